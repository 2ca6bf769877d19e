package io.lakerules;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import io.lakerules.functions.PositionDeleteSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.Function1;
import scala.collection.Iterator;
import scala.collection.immutable.Map;
import scala.collection.immutable.Seq;
import scala.runtime.AbstractFunction1;

/**
 * Spark's Parquet reader (with RowGroupParquetFormat's row-group spans) that drops the rows a
 * {@link PositionDeleteSet} deletes (Iceberg's deletion vectors, position delete files) inside the
 * reader, batch by batch: no position column, Filter or per-row call reaches the query's plan.
 *
 * <p>The reader is asked for Spark's row index column as well (the column the file source fills
 * for {@code _metadata.row_index}; counted by io.lakerules.RowIndexes). A batch none of whose rows
 * is deleted goes on as it is (without the index column when the query did not ask for it); in
 * one with deleted rows the kept rows are moved to the front of the reader's own vectors
 * (io.lakerules.KeptRows) as runs of rows, an array copy per run and column; a batch whose rows
 * are all deleted is skipped. A batch of consecutive positions (the usual one) finds its deleted
 * rows among the file's sorted deleted positions in its range, with no test per row; any other
 * batch walks its positions against them row by row. Rows (Spark's row-based reader) are tested
 * one by one and projected without the index column.
 */
public class PositionDeletesParquetFormat extends RowGroupParquetFormat {
  private static final String INDEX = ParquetFileFormat.ROW_INDEX_TEMPORARY_COLUMN_NAME();

  private final PositionDeleteSet deletes;

  public PositionDeletesParquetFormat(PositionDeleteSet deletes) {
    this(deletes, false);
  }

  /** {@code lineage}: see {@link RowGroupParquetFormat#RowGroupParquetFormat(boolean)}. */
  public PositionDeletesParquetFormat(PositionDeleteSet deletes, boolean lineage) {
    super(lineage);
    this.deletes = deletes;
  }

  static int indexOf(StructType schema) {
    StructField[] fields = schema.fields();
    for (int i = 0; i < fields.length; i++) {
      if (fields[i].name().equals(INDEX) && fields[i].dataType() == DataTypes.LongType) {
        return i;
      }
    }
    return -1;
  }

  private static StructType withIndex(StructType schema) {
    return indexOf(schema) >= 0 ? schema : schema.add(INDEX, DataTypes.LongType, true);
  }

  /** Batches when Spark's reader gives them for these columns and the index, and KeptRows can move
   * every column's rows; otherwise rows. */
  @Override
  public boolean supportBatch(SparkSession session, StructType schema) {
    return KeptRows.movable(schema) && super.supportBatch(session, withIndex(schema));
  }

  @Override
  public Function1<PartitionedFile, Iterator<InternalRow>> buildReaderWithPartitionValues(
      SparkSession session, StructType dataSchema, StructType partitionSchema, StructType requiredSchema,
      Seq<Filter> filters, Map<String, String> options, Configuration hadoopConf) {
    int asked = indexOf(requiredSchema);
    StructType read = withIndex(requiredSchema);
    Function1<PartitionedFile, Iterator<InternalRow>> reader = super.buildReaderWithPartitionValues(
        session, dataSchema, partitionSchema, read, filters, options, hadoopConf);
    StructType rows = new StructType(concat(read.fields(), partitionSchema.fields()));
    return new LiveRows(reader, deletes, asked >= 0 ? asked : requiredSchema.length(), asked < 0, rows);
  }

  private static StructField[] concat(StructField[] a, StructField[] b) {
    StructField[] out = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof PositionDeletesParquetFormat o && o.deletes == deletes;
  }

  @Override
  public int hashCode() {
    return System.identityHashCode(deletes);
  }

  @Override
  public String toString() {
    return "Parquet (" + deletes + ")";
  }

  /** The reader of a split: the base reader's batches or rows less the deleted rows. */
  static final class LiveRows extends AbstractFunction1<PartitionedFile, Iterator<InternalRow>>
      implements Serializable {
    private final Function1<PartitionedFile, Iterator<InternalRow>> reader;
    private final PositionDeleteSet deletes;
    private final int index;      // the row index column's ordinal in the reader's rows
    private final boolean drop;   // whether the query did not ask for it
    private final StructType rows;  // the reader's rows: required columns, the index, partition values

    LiveRows(Function1<PartitionedFile, Iterator<InternalRow>> reader, PositionDeleteSet deletes, int index,
             boolean drop, StructType rows) {
      this.reader = reader;
      this.deletes = deletes;
      this.index = index;
      this.drop = drop;
      this.rows = rows;
    }

    @Override
    public Iterator<InternalRow> apply(PartitionedFile file) {
      long[] deleted = deletes.positionsOf(file.filePath().urlEncoded());
      Iterator<InternalRow> in = reader.apply(file);  // row indexes counted (RowGroupParquetFormat)
      if (deleted == null && !drop) {
        return in;
      }
      @SuppressWarnings("unchecked")
      Iterator<InternalRow> out = (Iterator<InternalRow>) (Iterator<?>)
          new Live(this, in, deleted == null ? null : new PositionDeleteSet.Cursor(deleted));
      return out;
    }
  }

  /**
   * One split's batches (or rows) with the deleted rows left out. Elements are Objects: the
   * vectorized reader hands out ColumnarBatches through its Iterator[InternalRow].
   */
  static final class Live extends scala.collection.AbstractIterator<Object> {
    private final LiveRows of;  // the index column's ordinal, whether to drop it, the rows' schema
    private final Iterator<?> in;
    private final PositionDeleteSet.Cursor deleted;  // this file's; null: none
    private Object next;

    // batches: the last base batch, the batch of its columns that go on (all of them unless drop)
    private ColumnarBatch base;
    private ColumnarBatch plain;
    private int[] keep = new int[0];  // a batch's kept rows

    private UnsafeProjection project;  // rows without the index column

    Live(LiveRows of, Iterator<?> in, PositionDeleteSet.Cursor deleted) {
      this.of = of;
      this.in = in;
      this.deleted = deleted;
    }

    @Override
    public boolean hasNext() {
      while (next == null && in.hasNext()) {
        Object element = in.next();
        next = element instanceof ColumnarBatch b ? batch(b) : row((InternalRow) element);
      }
      return next != null;
    }

    @Override
    public Object next() {
      if (!hasNext()) {
        throw new java.util.NoSuchElementException();
      }
      Object out = next;
      next = null;
      return out;
    }

    /** The batch's kept rows, or null when none is kept. */
    private ColumnarBatch batch(ColumnarBatch b) {
      if (b != base) {
        views(b);
      }
      int n = b.numRows();
      ColumnVector positions = n == 0 ? null : b.column(of.index);
      if (deleted == null || n == 0 || !deleted.anyIn(positions.getLong(0), positions.getLong(n - 1))) {
        plain.setNumRows(n);
        return plain;
      }
      long first = positions.getLong(0);
      int k = positions.getLong(n - 1) - first == n - 1
          ? runsOfRange(n, first)  // the batch's rows are consecutive positions: the usual batch
          : runsOfRows(positions, n);
      if (k == 0) {
        return null;
      }
      if (k < n) {
        move(k);
      }
      plain.setNumRows(k);
      return plain;
    }

    // the batch's kept rows as runs: run r is runLen[r] rows from row runSrc[r] to row runDst[r]
    private int runs;
    private int[] runSrc = new int[16];
    private int[] runDst = new int[16];
    private int[] runLen = new int[16];

    /**
     * The runs of a batch of the consecutive positions {@code first..first+n-1}: the rows between
     * the file's deleted positions in that range, found with no test per row. Returns how many
     * rows are kept.
     */
    private int runsOfRange(int n, long first) {
      runs = 0;
      int k = 0;
      int row = 0;  // the next row not yet kept or dropped
      for (int i = deleted.indexOf(first); i < deleted.size(); i++) {
        long gone = deleted.at(i) - first;
        if (gone >= n) {
          break;
        }
        int r = (int) gone;
        if (r > row) {
          k = keep(row, k, r - row);
        }
        row = Math.max(row, r + 1);
      }
      return row < n ? keep(row, k, n - row) : k;
    }

    /** The runs of any other batch: each row's position tested. Returns how many rows are kept. */
    private int runsOfRows(ColumnVector positions, int n) {
      runs = 0;
      int k = 0;
      for (int i = 0; i < n; i++) {
        if (!deleted.deleted(positions.getLong(i))) {
          k = keep(i, k, 1);
        }
      }
      return k;
    }

    /**
     * Keeps {@code len} rows from row {@code src} as rows {@code dst..} (a run, or the last run
     * extended when they follow it); returns how many rows are kept then.
     */
    private int keep(int src, int dst, int len) {
      if (runs > 0 && runSrc[runs - 1] + runLen[runs - 1] == src) {
        runLen[runs - 1] += len;
        return dst + len;
      }
      if (runs == runSrc.length) {
        runSrc = java.util.Arrays.copyOf(runSrc, 2 * runs);
        runDst = java.util.Arrays.copyOf(runDst, 2 * runs);
        runLen = java.util.Arrays.copyOf(runLen, 2 * runs);
      }
      runSrc[runs] = src;
      runDst[runs] = dst;
      runLen[runs] = len;
      runs++;
      return dst + len;
    }

    /**
     * The {@code k} kept rows moved to the batch's front in every column the reader wrote: as
     * whole runs where the vector allows (KeptRows.moveRuns), else row by row (KeptRows.compact).
     */
    private void move(int k) {
      int from = k;  // the first row that moves
      for (int r = 0; r < runs; r++) {
        if (runSrc[r] != runDst[r]) {
          from = runDst[r];
          break;
        }
      }
      int[] rows = null;
      for (int col = 0; col < plain.numCols(); col++) {
        if (plain.column(col) instanceof WritableColumnVector v  // not the constant ones
            && !KeptRows.moveRuns(v, runSrc, runDst, runLen, runs)) {
          if (rows == null) {
            rows = keptRows(k);
          }
          KeptRows.compact(v, rows, from, k);
        }
      }
    }

    /** The kept rows one by one (KeptRows.compact's {@code keep}: row j becomes row keep[j]). */
    private int[] keptRows(int k) {
      if (keep.length < k) {
        keep = new int[Math.max(k, 2 * keep.length)];
      }
      for (int r = 0; r < runs; r++) {
        for (int j = 0; j < runLen[r]; j++) {
          keep[runDst[r] + j] = runSrc[r] + j;
        }
      }
      return keep;
    }

    private void views(ColumnarBatch b) {
      base = b;
      if (!of.drop) {
        plain = b;
        return;
      }
      ColumnVector[] kept = new ColumnVector[b.numCols() - 1];
      for (int i = 0, j = 0; i < b.numCols(); i++) {
        if (i != of.index) {
          kept[j++] = b.column(i);
        }
      }
      plain = new ColumnarBatch(kept);
    }

    /** The row, without the index column unless asked for, or null when it is deleted. */
    private InternalRow row(InternalRow r) {
      if (deleted != null && deleted.deleted(r.getLong(of.index))) {
        return null;
      }
      if (!of.drop) {
        return r;
      }
      if (project == null) {
        List<Expression> out = new ArrayList<>();
        StructField[] fields = of.rows.fields();
        for (int i = 0; i < fields.length; i++) {
          if (i != of.index) {
            out.add(new BoundReference(i, fields[i].dataType(), fields[i].nullable()));
          }
        }
        project = UnsafeProjection.create(scala.jdk.javaapi.CollectionConverters.asScala(out).toList());
      }
      return project.apply(r);
    }
  }
}
