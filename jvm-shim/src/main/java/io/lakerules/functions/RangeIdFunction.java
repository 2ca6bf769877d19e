package io.lakerules.functions;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.ByteArray;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * range_id(value, bounds): the range of a value among sorted range boundaries, by binary search:
 * 1 + the number of boundaries strictly below the value, so 1 .. size(bounds) + 1; NULL for NULL.
 *
 * <p>This is Delta's range_partition_id(col, N) with the boundaries passed in: lakerules samples
 * them (see lakerules.optimize.curves) instead of sorting the data. Values are BIGINT, DOUBLE (compared as
 * Double.compare: NaN above everything), STRING (UTF-8 bytes) or BINARY (unsigned bytes); bounds
 * is an array of the same type, sorted ascending.
 */
public final class RangeIdFunction implements UnboundFunction {
  @Override
  public String name() {
    return "range_id";
  }

  @Override
  public String description() {
    return "range_id(value, bounds): 1 + the number of sorted bounds below value (NULL for NULL)";
  }

  @Override
  public BoundFunction bind(StructType input) {
    if (input.fields().length != 2 || !(input.fields()[1].dataType() instanceof ArrayType)) {
      throw new UnsupportedOperationException("range_id takes two arguments: (value, array of sorted bounds)");
    }
    DataType value = input.fields()[0].dataType();
    DataType bounds = input.fields()[1].dataType();
    DataType element = ((ArrayType) bounds).elementType();
    if (!element.sameType(value)) {
      throw new UnsupportedOperationException(
          "range_id: bounds must be an array of the value's type, got " + value.simpleString()
              + " and " + bounds.simpleString());
    }
    if (value instanceof LongType) return new OfLong(bounds);
    if (value instanceof DoubleType) return new OfDouble(bounds);
    if (value instanceof StringType) return new OfString(value, bounds);
    if (value instanceof BinaryType) return new OfBinary(bounds);
    throw new UnsupportedOperationException(
        "range_id is defined for BIGINT, DOUBLE, STRING and BINARY, not " + value.simpleString());
  }

  private abstract static class Base implements ScalarFunction<Integer> {
    private final DataType[] types;

    Base(DataType value, DataType bounds) {
      this.types = new DataType[] {value, bounds};
    }

    @Override public String name() { return "range_id"; }
    @Override public DataType resultType() { return DataTypes.IntegerType; }
    @Override public DataType[] inputTypes() { return types; }
    @Override public String canonicalName() { return "lakerules.range_id(" + types[0].catalogString() + ")"; }
  }

  public static final class OfLong extends Base {
    OfLong(DataType bounds) { super(DataTypes.LongType, bounds); }

    public static int invoke(long value, ArrayData bounds) {
      int lo = 0, hi = bounds.numElements();
      while (lo < hi) {
        int mid = (lo + hi) >>> 1;
        if (bounds.getLong(mid) < value) lo = mid + 1; else hi = mid;
      }
      return lo + 1;
    }

    @Override public Integer produceResult(InternalRow row) {
      return row.isNullAt(0) ? null : invoke(row.getLong(0), row.getArray(1));
    }
  }

  public static final class OfDouble extends Base {
    OfDouble(DataType bounds) { super(DataTypes.DoubleType, bounds); }

    public static int invoke(double value, ArrayData bounds) {
      int lo = 0, hi = bounds.numElements();
      while (lo < hi) {
        int mid = (lo + hi) >>> 1;
        if (Double.compare(bounds.getDouble(mid), value) < 0) lo = mid + 1; else hi = mid;
      }
      return lo + 1;
    }

    @Override public Integer produceResult(InternalRow row) {
      return row.isNullAt(0) ? null : invoke(row.getDouble(0), row.getArray(1));
    }
  }

  // Spark passes NULL to a magic method's object parameters: the object variants return NULL then.

  public static final class OfString extends Base {
    OfString(DataType value, DataType bounds) { super(value, bounds); }

    public static Integer invoke(UTF8String value, ArrayData bounds) {
      if (value == null || bounds == null) return null;
      int lo = 0, hi = bounds.numElements();
      while (lo < hi) {
        int mid = (lo + hi) >>> 1;
        if (bounds.getUTF8String(mid).binaryCompare(value) < 0) lo = mid + 1; else hi = mid;
      }
      return lo + 1;
    }

    @Override public Integer produceResult(InternalRow row) {
      return row.isNullAt(0) ? null : invoke(row.getUTF8String(0), row.getArray(1));
    }
  }

  public static final class OfBinary extends Base {
    OfBinary(DataType bounds) { super(DataTypes.BinaryType, bounds); }

    public static Integer invoke(byte[] value, ArrayData bounds) {
      if (value == null || bounds == null) return null;
      int lo = 0, hi = bounds.numElements();
      while (lo < hi) {
        int mid = (lo + hi) >>> 1;
        if (ByteArray.compareBinary(bounds.getBinary(mid), value) < 0) lo = mid + 1; else hi = mid;
      }
      return lo + 1;
    }

    @Override public Integer produceResult(InternalRow row) {
      return row.isNullAt(0) ? null : invoke(row.getBinary(0), row.getArray(1));
    }
  }
}
