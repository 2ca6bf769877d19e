package io.lakerules;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.CalendarIntervalType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DayTimeIntervalType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.NullType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.types.YearMonthIntervalType;

/**
 * A batch's kept rows moved to its front, in place, in the reader's own vectors: row {@code j}
 * becomes row {@code keep[j]} (ascending, so {@code keep[j] >= j} and nothing is overwritten
 * before it is read). Spark's Parquet reader writes every row of its vectors again for the next
 * batch (or never changes them: all-null and constant columns), so moving rows within a batch
 * leaves the next one as it would be.
 *
 * <p>Values move as the vector stores them: fixed-width values, a string's, binary's, array's or
 * map's (offset, length) into data that stays where it is, a dictionary-encoded column's ids, a
 * struct's children row by row, and null flags. So the scan keeps the reader's own vector classes,
 * which Spark's generated code calls without a virtual dispatch: reading through ColumnVector views
 * of the kept rows instead was measured ~15% slower on a whole scan. A schema with a type this
 * class does not move is read as rows (PositionDeletesParquetFormat.supportBatch).
 */
final class KeptRows {
  private KeptRows() {}

  /** Where a vector of a type keeps its values (which of its arrays, or its children). */
  private enum Storage { INTS, LONGS, ARRAYS, DOUBLES, FLOATS, SHORTS, BYTES, BOOLEANS, CHILDREN, NONE }

  /** Where vectors of type {@code t} keep their values; null: a type whose rows this does not move. */
  private static Storage storage(DataType t) {
    if (t instanceof IntegerType || t instanceof DateType || t instanceof YearMonthIntervalType
        || (t instanceof DecimalType d && DecimalType.is32BitDecimalType(d))) {
      return Storage.INTS;
    } else if (t instanceof LongType || t instanceof TimestampType || t instanceof TimestampNTZType
        || t instanceof DayTimeIntervalType  // is64BitDecimalType includes the 32-bit ones, tested above
        || (t instanceof DecimalType d && DecimalType.is64BitDecimalType(d))) {
      return Storage.LONGS;
    } else if (t instanceof StringType || t instanceof BinaryType || t instanceof DecimalType
        || t instanceof ArrayType || t instanceof MapType) {
      return Storage.ARRAYS;  // (offset, length) into data that stays where it is
    } else if (t instanceof DoubleType) {
      return Storage.DOUBLES;
    } else if (t instanceof FloatType) {
      return Storage.FLOATS;
    } else if (t instanceof ShortType) {
      return Storage.SHORTS;
    } else if (t instanceof ByteType) {
      return Storage.BYTES;
    } else if (t instanceof BooleanType) {
      return Storage.BOOLEANS;
    } else if (t instanceof StructType || t instanceof CalendarIntervalType) {
      return Storage.CHILDREN;
    } else if (t instanceof NullType) {
      return Storage.NONE;
    }
    return null;
  }

  /** Whether vectors of type {@code t} can be compacted here. */
  static boolean movable(DataType t) {
    if (t instanceof StructType struct) {
      for (StructField f : struct.fields()) {
        if (!movable(f.dataType())) {
          return false;
        }
      }
      return true;
    }
    return storage(t) != null;
  }

  // the arrays Spark's on-heap vectors keep their values in (null: not reachable; rows move one by one)
  private static final VarHandle NULLS;
  private static final VarHandle BYTES;
  private static final VarHandle SHORTS;
  private static final VarHandle INTS;
  private static final VarHandle LONGS;
  private static final VarHandle FLOATS;
  private static final VarHandle DOUBLES;
  private static final VarHandle LENGTHS;
  private static final VarHandle OFFSETS;

  static {
    VarHandle[] h = new VarHandle[9];
    try {
      MethodHandles.Lookup l = MethodHandles.privateLookupIn(OnHeapColumnVector.class, MethodHandles.lookup());
      String[] names = {"nulls", "byteData", "shortData", "intData", "longData", "floatData", "doubleData",
          "arrayLengths", "arrayOffsets"};
      Class<?>[] types = {byte[].class, byte[].class, short[].class, int[].class, long[].class, float[].class,
          double[].class, int[].class, int[].class};
      for (int i = 0; i < h.length; i++) {
        h[i] = l.findVarHandle(OnHeapColumnVector.class, names[i], types[i]);
      }
    } catch (ReflectiveOperationException | RuntimeException e) {
      java.util.Arrays.fill(h, null);  // another Spark's vectors: rows move one by one
    }
    NULLS = h[0];
    BYTES = h[1];
    SHORTS = h[2];
    INTS = h[3];
    LONGS = h[4];
    FLOATS = h[5];
    DOUBLES = h[6];
    LENGTHS = h[7];
    OFFSETS = h[8];
  }

  /**
   * Runs of rows moved to the front: run {@code r} of {@code len[r]} rows from row {@code src[r]}
   * to row {@code dst[r]} ({@code dst[r] <= src[r]}, runs ascending), each as one array copy of
   * the on-heap vector's values (and null flags). False, with nothing moved, when {@code v} is not
   * a vector whose values this moves so (off-heap, structs, intervals): the caller moves its rows
   * one by one ({@link #compact}).
   */
  static boolean moveRuns(WritableColumnVector v, int[] src, int[] dst, int[] len, int runs) {
    if (OFFSETS == null || !(v instanceof OnHeapColumnVector)) {
      return false;
    }
    if (v.isAllNull()) {
      return true;
    }
    Object[] arrays;
    if (v.hasDictionary()) {
      WritableColumnVector ids = v.getDictionaryIds();
      if (!(ids instanceof OnHeapColumnVector)) {
        return false;
      }
      arrays = new Object[] {INTS.get(ids)};
    } else {
      Storage where = storage(v.dataType());
      if (where == null || where == Storage.CHILDREN) {
        return false;
      }
      arrays = switch (where) {
        case INTS -> new Object[] {INTS.get(v)};
        case LONGS -> new Object[] {LONGS.get(v)};
        case ARRAYS -> new Object[] {OFFSETS.get(v), LENGTHS.get(v)};
        case DOUBLES -> new Object[] {DOUBLES.get(v)};
        case FLOATS -> new Object[] {FLOATS.get(v)};
        case SHORTS -> new Object[] {SHORTS.get(v)};
        case BYTES, BOOLEANS -> new Object[] {BYTES.get(v)};
        default -> new Object[0];
      };
    }
    for (Object a : arrays) {
      if (a == null) {
        return false;
      }
    }
    Object nulls = v.hasNull() ? NULLS.get(v) : null;
    for (int r = 0; r < runs; r++) {
      if (src[r] == dst[r]) {
        continue;
      }
      for (Object a : arrays) {
        System.arraycopy(a, src[r], a, dst[r], len[r]);
      }
      if (nulls != null) {
        System.arraycopy(nulls, src[r], nulls, dst[r], len[r]);
      }
    }
    return true;
  }

  /** Rows {@code keep[from..k)} of {@code v} moved to rows {@code from..k}. */
  static void compact(WritableColumnVector v, int[] keep, int from, int k) {
    if (v.isAllNull()) {
      return;
    }
    if (v.hasNull()) {
      for (int j = from; j < k; j++) {
        if (v.isNullAt(keep[j])) {
          v.putNull(j);
        } else {
          v.putNotNull(j);
        }
      }
    }
    if (v.hasDictionary()) {
      WritableColumnVector ids = v.getDictionaryIds();
      for (int j = from; j < k; j++) {
        ids.putInt(j, ids.getInt(keep[j]));
      }
      return;
    }
    DataType t = v.dataType();
    Storage where = storage(t);
    if (where == null) {
      throw new IllegalStateException("lakerules: cannot move rows of a " + t.simpleString() + " vector");
    }
    switch (where) {
      case CHILDREN -> {
        int children = t instanceof StructType s ? s.fields().length : 3;
        for (int c = 0; c < children; c++) {
          compact(v.getChild(c), keep, from, k);
        }
      }
      case INTS -> {
        for (int j = from; j < k; j++) {
          v.putInt(j, v.getInt(keep[j]));
        }
      }
      case LONGS -> {
        for (int j = from; j < k; j++) {
          v.putLong(j, v.getLong(keep[j]));
        }
      }
      case ARRAYS -> {
        for (int j = from; j < k; j++) {
          int row = keep[j];
          v.putArray(j, v.getArrayOffset(row), v.getArrayLength(row));
        }
      }
      case DOUBLES -> {
        for (int j = from; j < k; j++) {
          v.putDouble(j, v.getDouble(keep[j]));
        }
      }
      case FLOATS -> {
        for (int j = from; j < k; j++) {
          v.putFloat(j, v.getFloat(keep[j]));
        }
      }
      case SHORTS -> {
        for (int j = from; j < k; j++) {
          v.putShort(j, v.getShort(keep[j]));
        }
      }
      case BYTES -> {
        for (int j = from; j < k; j++) {
          v.putByte(j, v.getByte(keep[j]));
        }
      }
      case BOOLEANS -> {
        for (int j = from; j < k; j++) {
          v.putBoolean(j, v.getBoolean(keep[j]));
        }
      }
      default -> {
        // NullType: no values
      }
    }
  }
}
