package io.lakerules.functions;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * hilbert_index(bits, ids): the position of a point on the Hilbert curve through the cube of
 * side 2^bits in size(ids) dimensions, as a non-negative BIGINT (bits * size(ids) at most 63; a
 * NULL id counts as 0). Coordinates are first transposed to the curve's frame (J. Skilling,
 * "Programming the Hilbert curve", AIP Conf. Proc. 707, 2004), whose bits interleave into the
 * index as interleave_bits interleaves ids: so hilbert_index(1, array(0, 1)) = 1 and
 * hilbert_index(1, array(1, 0)) = 3 in two dimensions.
 */
public final class HilbertIndexFunction implements UnboundFunction {
  @Override
  public String name() {
    return "hilbert_index";
  }

  @Override
  public String description() {
    return "hilbert_index(bits, ids): Hilbert-curve index of an array of non-negative INTs of `bits` bits each";
  }

  @Override
  public BoundFunction bind(StructType input) {
    return new Bound(InterleaveBitsFunction.idsType("hilbert_index", input));
  }

  public static final class Bound implements ScalarFunction<Long> {
    private final DataType[] types;

    Bound(DataType ids) {
      this.types = new DataType[] {DataTypes.IntegerType, ids};
    }

    public static Long invoke(int bits, ArrayData ids) {
      if (ids == null) return null;
      int n = ids.numElements();
      InterleaveBitsFunction.checkWidth("hilbert_index", bits, n);
      long limit = 1L << bits;
      long[] x = new long[n];
      for (int j = 0; j < n; j++) x[j] = InterleaveBitsFunction.id("hilbert_index", ids, j, bits, limit);
      // Skilling's AxestoTranspose: inverse undo, then Gray encode
      long m = 1L << (bits - 1);
      for (long q = m; q > 1; q >>>= 1) {
        long p = q - 1;
        for (int i = 0; i < n; i++) {
          if ((x[i] & q) != 0) {
            x[0] ^= p;
          } else {
            long t = (x[0] ^ x[i]) & p;
            x[0] ^= t;
            x[i] ^= t;
          }
        }
      }
      for (int i = 1; i < n; i++) x[i] ^= x[i - 1];
      long t = 0;
      for (long q = m; q > 1; q >>>= 1) {
        if ((x[n - 1] & q) != 0) t ^= q - 1;
      }
      for (int i = 0; i < n; i++) x[i] ^= t;
      long h = 0;
      for (int b = bits - 1; b >= 0; b--) {
        for (int i = 0; i < n; i++) h = (h << 1) | ((x[i] >>> b) & 1L);
      }
      return h;
    }

    @Override public String name() { return "hilbert_index"; }
    @Override public DataType resultType() { return DataTypes.LongType; }
    @Override public DataType[] inputTypes() { return types; }
    @Override public String canonicalName() { return "lakerules.hilbert_index"; }

    @Override public Long produceResult(InternalRow row) {
      return row.isNullAt(1) ? null : invoke(row.getInt(0), row.getArray(1));
    }
  }
}
