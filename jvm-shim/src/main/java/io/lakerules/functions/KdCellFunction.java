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
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StructType;

/**
 * kd_cell(keys, tree, cuts): the leaf (0-based) of a k-d tree a point falls in. {@code keys} is
 * the point (one BIGINT a dimension, NULL counts as Long.MIN_VALUE); {@code tree} holds three INTs
 * a node, [dim, left, right], node 0 the root; a child below 0 is the leaf -(child + 1); {@code
 * cuts} one BIGINT a node: keys[dim] <= cut goes left. An empty tree is one leaf: 0.
 * lakerules.optimize.curves lays files out with it (the tree and cuts come from a sample of the rows).
 */
public final class KdCellFunction implements UnboundFunction {
  @Override
  public String name() {
    return "kd_cell";
  }

  @Override
  public String description() {
    return "kd_cell(keys ARRAY<BIGINT>, tree ARRAY<INT>, cuts ARRAY<BIGINT>): leaf of a k-d tree";
  }

  private static boolean arrayOf(DataType t, Class<?> element) {
    return t instanceof ArrayType && element.isInstance(((ArrayType) t).elementType());
  }

  @Override
  public BoundFunction bind(StructType input) {
    if (input.fields().length != 3
        || !arrayOf(input.fields()[0].dataType(), LongType.class)
        || !arrayOf(input.fields()[1].dataType(), IntegerType.class)
        || !arrayOf(input.fields()[2].dataType(), LongType.class)) {
      throw new UnsupportedOperationException(
          "kd_cell takes (keys ARRAY<BIGINT>, tree ARRAY<INT>, cuts ARRAY<BIGINT>)");
    }
    return new Bound(input.fields()[0].dataType(), input.fields()[1].dataType(), input.fields()[2].dataType());
  }

  public static final class Bound implements ScalarFunction<Integer> {
    private final DataType[] types;

    Bound(DataType keys, DataType tree, DataType cuts) {
      this.types = new DataType[] {keys, tree, cuts};
    }

    public static Integer invoke(ArrayData keys, ArrayData tree, ArrayData cuts) {
      if (keys == null || tree == null || cuts == null) return null;
      int nodes = tree.numElements() / 3;
      if (nodes == 0) return 0;
      if (cuts.numElements() != nodes) {
        throw new IllegalArgumentException("kd_cell: " + nodes + " nodes but " + cuts.numElements() + " cuts");
      }
      int node = 0;
      for (int steps = 0; steps <= nodes; steps++) {
        int dim = tree.getInt(3 * node);
        if (dim < 0 || dim >= keys.numElements()) {
          throw new IllegalArgumentException("kd_cell: node " + node + " splits dimension " + dim
              + " of " + keys.numElements());
        }
        long key = keys.isNullAt(dim) ? Long.MIN_VALUE : keys.getLong(dim);
        int child = key <= cuts.getLong(node) ? tree.getInt(3 * node + 1) : tree.getInt(3 * node + 2);
        if (child < 0) return -(child + 1);
        if (child >= nodes) throw new IllegalArgumentException("kd_cell: no node " + child);
        node = child;
      }
      throw new IllegalArgumentException("kd_cell: the tree has a cycle");
    }

    @Override public String name() { return "kd_cell"; }
    @Override public DataType resultType() { return DataTypes.IntegerType; }
    @Override public DataType[] inputTypes() { return types; }
    @Override public String canonicalName() { return "lakerules.kd_cell"; }

    @Override public Integer produceResult(InternalRow row) {
      if (row.isNullAt(0) || row.isNullAt(1) || row.isNullAt(2)) return null;
      return invoke(row.getArray(0), row.getArray(1), row.getArray(2));
    }
  }
}
