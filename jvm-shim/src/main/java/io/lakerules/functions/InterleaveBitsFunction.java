package io.lakerules.functions;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.StructType;

/**
 * interleave_bits(bits, ids): the z-value of non-negative integers, each of the given width in
 * bits: from the most significant bit down, bit i of ids[0], of ids[1], ..., then bit i-1 of each.
 * So interleave_bits(2, array(1, 2)) = 0b0110 = 6. A NULL id counts as 0; bits * size(ids) must be
 * at most 63 (the result is a non-negative BIGINT) and each id below 2^bits.
 */
public final class InterleaveBitsFunction implements UnboundFunction {
  @Override
  public String name() {
    return "interleave_bits";
  }

  @Override
  public String description() {
    return "interleave_bits(bits, ids): z-value of an array of non-negative INTs of `bits` bits each";
  }

  @Override
  public BoundFunction bind(StructType input) {
    return new Bound(idsType("interleave_bits", input));
  }

  /** The ids' type of (bits INT, ids ARRAY<INT>), the arguments of interleave_bits and hilbert_index. */
  static DataType idsType(String name, StructType input) {
    if (input.fields().length != 2
        || !(input.fields()[0].dataType() instanceof IntegerType)
        || !(input.fields()[1].dataType() instanceof ArrayType)
        || !(((ArrayType) input.fields()[1].dataType()).elementType() instanceof IntegerType)) {
      throw new UnsupportedOperationException(name + " takes (bits INT, ids ARRAY<INT>)");
    }
    return input.fields()[1].dataType();
  }

  /** Checks that n ids of bits bits fit in a non-negative BIGINT. */
  static void checkWidth(String name, int bits, int n) {
    if (bits < 1 || (long) bits * n > 63) {
      throw new IllegalArgumentException(name + ": " + n + " ids of " + bits + " bits do not fit in 63 bits");
    }
  }

  /** ids[j], NULL as 0, checked to lie in [0, limit). */
  static long id(String name, ArrayData ids, int j, int bits, long limit) {
    long id = ids.isNullAt(j) ? 0 : ids.getInt(j);
    if (id < 0 || id >= limit) {
      throw new IllegalArgumentException(name + ": id " + id + " does not fit in " + bits + " bits");
    }
    return id;
  }

  public static final class Bound implements ScalarFunction<Long> {
    private final DataType[] types;

    Bound(DataType ids) {
      this.types = new DataType[] {DataTypes.IntegerType, ids};
    }

    public static Long invoke(int bits, ArrayData ids) {
      if (ids == null) return null;
      int n = ids.numElements();
      checkWidth("interleave_bits", bits, n);
      long limit = 1L << bits;
      long z = 0;
      for (int i = bits - 1; i >= 0; i--) {
        for (int j = 0; j < n; j++) {
          z = (z << 1) | ((id("interleave_bits", ids, j, bits, limit) >>> i) & 1L);
        }
      }
      return z;
    }

    @Override public String name() { return "interleave_bits"; }
    @Override public DataType resultType() { return DataTypes.LongType; }
    @Override public DataType[] inputTypes() { return types; }
    @Override public String canonicalName() { return "lakerules.interleave_bits"; }

    @Override public Long produceResult(InternalRow row) {
      return row.isNullAt(1) ? null : invoke(row.getInt(0), row.getArray(1));
    }
  }
}
