package io.lakerules.functions;

import java.math.BigDecimal;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * bucket(n, value): Iceberg's bucket transform, (murmur3_x86_32(bytes(value)) &amp; MAX_INT) % n.
 * Each bound variant has a static invoke method, which Spark compiles into a direct call.
 */
public final class BucketFunction implements UnboundFunction {
  @Override
  public String name() {
    return "bucket";
  }

  @Override
  public String description() {
    return "bucket(numBuckets, value): Iceberg bucket partition transform";
  }

  @Override
  public BoundFunction bind(StructType input) {
    if (input.fields().length != 2) {
      throw new UnsupportedOperationException("bucket takes two arguments: (numBuckets, value)");
    }
    DataType t = input.fields()[1].dataType();
    if (t instanceof IntegerType || t instanceof ShortType || t instanceof ByteType) return new OfInt();
    if (t instanceof DateType) return new OfDate();
    if (t instanceof LongType) return new OfLong(DataTypes.LongType);
    if (t instanceof TimestampType) return new OfLong(DataTypes.TimestampType);
    if (t instanceof TimestampNTZType) return new OfLong(DataTypes.TimestampNTZType);
    if (t instanceof StringType) return new OfString();
    if (t instanceof BinaryType) return new OfBinary();
    if (t instanceof DecimalType) return new OfDecimal((DecimalType) t);
    throw new UnsupportedOperationException("bucket is not defined for type " + t.simpleString());
  }

  static int bucket(int hash, int n) {
    return (hash & Integer.MAX_VALUE) % n;
  }

  private abstract static class Base implements ScalarFunction<Integer> {
    @Override public String name() { return "bucket"; }
    @Override public DataType resultType() { return DataTypes.IntegerType; }
    @Override public String canonicalName() { return "lakerules.bucket(" + inputTypes()[1].catalogString() + ")"; }
  }

  public static final class OfInt extends Base {
    public static int invoke(int n, int value) { return bucket(Murmur3.hashLong(value), n); }
    @Override public DataType[] inputTypes() { return new DataType[] {DataTypes.IntegerType, DataTypes.IntegerType}; }
    @Override public Integer produceResult(InternalRow row) { return invoke(row.getInt(0), row.getInt(1)); }
  }

  public static final class OfDate extends Base {
    public static int invoke(int n, int days) { return bucket(Murmur3.hashLong(days), n); }
    @Override public DataType[] inputTypes() { return new DataType[] {DataTypes.IntegerType, DataTypes.DateType}; }
    @Override public Integer produceResult(InternalRow row) { return invoke(row.getInt(0), row.getInt(1)); }
  }

  public static final class OfLong extends Base {
    private final DataType type;
    OfLong(DataType type) { this.type = type; }
    public static int invoke(int n, long value) { return bucket(Murmur3.hashLong(value), n); }
    @Override public DataType[] inputTypes() { return new DataType[] {DataTypes.IntegerType, type}; }
    @Override public Integer produceResult(InternalRow row) { return invoke(row.getInt(0), row.getLong(1)); }
  }

  // Spark passes NULL to a magic method's object parameters (it propagates NULL only for
  // primitive ones), so the object variants check for it and return a boxed, nullable result.

  public static final class OfString extends Base {
    public static Integer invoke(int n, UTF8String value) {
      if (value == null) return null;
      byte[] b = value.getBytes();
      return bucket(Murmur3.hashBytes(b, 0, b.length), n);
    }
    @Override public DataType[] inputTypes() { return new DataType[] {DataTypes.IntegerType, DataTypes.StringType}; }
    @Override public Integer produceResult(InternalRow row) { return invoke(row.getInt(0), row.getUTF8String(1)); }
  }

  public static final class OfBinary extends Base {
    public static Integer invoke(int n, byte[] value) {
      if (value == null) return null;
      return bucket(Murmur3.hashBytes(value, 0, value.length), n);
    }
    @Override public DataType[] inputTypes() { return new DataType[] {DataTypes.IntegerType, DataTypes.BinaryType}; }
    @Override public Integer produceResult(InternalRow row) { return invoke(row.getInt(0), row.getBinary(1)); }
  }

  public static final class OfDecimal extends Base {
    private final DecimalType type;
    OfDecimal(DecimalType type) { this.type = type; }
    public static Integer invoke(int n, Decimal value) {
      if (value == null) return null;
      BigDecimal d = value.toJavaBigDecimal();
      byte[] b = d.unscaledValue().toByteArray();
      return bucket(Murmur3.hashBytes(b, 0, b.length), n);
    }
    @Override public DataType[] inputTypes() { return new DataType[] {DataTypes.IntegerType, type}; }
    @Override public Integer produceResult(InternalRow row) {
      return invoke(row.getInt(0), row.getDecimal(1, type.precision(), type.scale()));
    }
  }
}
