package io.lakerules.functions;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Arrays;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * truncate(width, value): Iceberg's truncate transform. Integers and decimals round down to a
 * multiple of width (of the unscaled value for decimals); strings keep width code points,
 * binaries width bytes.
 */
public final class TruncateFunction implements UnboundFunction {
  @Override
  public String name() {
    return "truncate";
  }

  @Override
  public String description() {
    return "truncate(width, value): Iceberg truncate partition transform";
  }

  @Override
  public BoundFunction bind(StructType input) {
    if (input.fields().length != 2) {
      throw new UnsupportedOperationException("truncate takes two arguments: (width, value)");
    }
    DataType t = input.fields()[1].dataType();
    if (t instanceof IntegerType || t instanceof ShortType || t instanceof ByteType) return new OfInt();
    if (t instanceof LongType) return new OfLong();
    if (t instanceof StringType) return new OfString();
    if (t instanceof BinaryType) return new OfBinary();
    if (t instanceof DecimalType) return new OfDecimal((DecimalType) t);
    throw new UnsupportedOperationException("truncate is not defined for type " + t.simpleString());
  }

  private abstract static class Base<R> implements ScalarFunction<R> {
    @Override public String name() { return "truncate"; }
    @Override public DataType resultType() { return inputTypes()[1]; }
    @Override public String canonicalName() { return "lakerules.truncate(" + inputTypes()[1].catalogString() + ")"; }
  }

  public static final class OfInt extends Base<Integer> {
    // floorMod, not the spec's ((v % w) + w) % w: in int arithmetic that overflows for w > 2^30.
    public static int invoke(int w, int v) { return v - Math.floorMod(v, w); }
    @Override public DataType[] inputTypes() { return new DataType[] {DataTypes.IntegerType, DataTypes.IntegerType}; }
    @Override public Integer produceResult(InternalRow row) { return invoke(row.getInt(0), row.getInt(1)); }
  }

  public static final class OfLong extends Base<Long> {
    public static long invoke(int w, long v) { return v - Math.floorMod(v, (long) w); }
    @Override public DataType[] inputTypes() { return new DataType[] {DataTypes.IntegerType, DataTypes.LongType}; }
    @Override public Long produceResult(InternalRow row) { return invoke(row.getInt(0), row.getLong(1)); }
  }

  public static final class OfString extends Base<UTF8String> {
    public static UTF8String invoke(int w, UTF8String v) {
      if (v == null) return null;  // Spark passes NULL to object parameters
      return v.numChars() <= w ? v : v.substring(0, w);
    }
    @Override public DataType[] inputTypes() { return new DataType[] {DataTypes.IntegerType, DataTypes.StringType}; }
    @Override public UTF8String produceResult(InternalRow row) { return invoke(row.getInt(0), row.getUTF8String(1)); }
  }

  public static final class OfBinary extends Base<byte[]> {
    public static byte[] invoke(int w, byte[] v) {
      if (v == null) return null;
      return v.length <= w ? v : Arrays.copyOf(v, w);
    }
    @Override public DataType[] inputTypes() { return new DataType[] {DataTypes.IntegerType, DataTypes.BinaryType}; }
    @Override public byte[] produceResult(InternalRow row) { return invoke(row.getInt(0), row.getBinary(1)); }
  }

  public static final class OfDecimal extends Base<Decimal> {
    private final DecimalType type;
    OfDecimal(DecimalType type) { this.type = type; }
    public static Decimal invoke(int w, Decimal v) {
      if (v == null) return null;
      BigDecimal d = v.toJavaBigDecimal();
      BigInteger unscaled = d.unscaledValue();
      BigInteger rem = unscaled.mod(BigInteger.valueOf(w));
      return Decimal.apply(new BigDecimal(unscaled.subtract(rem), d.scale()), v.precision(), v.scale());
    }
    @Override public DataType[] inputTypes() { return new DataType[] {DataTypes.IntegerType, type}; }
    @Override public Decimal produceResult(InternalRow row) {
      return invoke(row.getInt(0), row.getDecimal(1, type.precision(), type.scale()));
    }
  }
}
