package io.lakerules;

import java.lang.reflect.Field;

import org.apache.parquet.column.page.PageReadStore;
import org.apache.spark.sql.execution.datasources.RecordReaderIterator;
import org.apache.spark.sql.execution.datasources.parquet.ParquetRowIndexUtil;
import org.apache.spark.sql.execution.datasources.parquet.VectorizedParquetRecordReader;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;

/**
 * Row indexes (a row's position in its Parquet file) at the cost of a counter. Spark's vectorized
 * reader fills its row index column from a Scala range iterator of boxed longs: 12-29 ns a row
 * measured here, about a fifth of a plain scan's time, which every read with deletes paid
 * (io.lakerules.PositionDeletesParquetFormat). {@link #install} gives a reader this generator
 * instead: the same values (a row group's first row index, then one more per row), written by a
 * loop over primitive longs. Where Spark's would do something else (page skipping, which reads
 * some rows of a row group only) it defers to Spark's own code.
 *
 * <p>The reader's generator is a private field; if this Spark has none of that name (or no
 * iterator field to find the reader by), install does nothing and Spark's generator runs.
 */
final class RowIndexes {
  private static final Field ROW_READER = field(RecordReaderIterator.class, "rowReader");
  private static final Field GENERATOR = field(VectorizedParquetRecordReader.class, "rowIndexGenerator");
  private static final Field COLUMN = field(ParquetRowIndexUtil.RowIndexGenerator.class, "rowIndexColumnIdx");

  private RowIndexes() {}

  private static Field field(Class<?> owner, String name) {
    try {
      Field f = owner.getDeclaredField(name);
      f.setAccessible(true);
      return f;
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null;
    }
  }

  /** Gives the vectorized reader behind {@code iterator} (Spark's Parquet reader of one split) the
   * counting generator, when it reads row indexes. */
  static void install(Object iterator) {
    if (ROW_READER == null || GENERATOR == null || COLUMN == null || !(iterator instanceof RecordReaderIterator)) {
      return;
    }
    try {
      Object reader = ROW_READER.get(iterator);
      if (!(reader instanceof VectorizedParquetRecordReader)) {
        return;
      }
      Object generator = GENERATOR.get(reader);
      if (generator == null || generator.getClass() != ParquetRowIndexUtil.RowIndexGenerator.class) {
        return;
      }
      GENERATOR.set(reader, new Counting(COLUMN.getInt(generator)));
    } catch (IllegalAccessException e) {
      // Spark's generator stays
    }
  }

  /** Spark's generator, counting where it would walk a range of boxed longs. */
  static final class Counting extends ParquetRowIndexUtil.RowIndexGenerator {
    private long next;
    private boolean spark;  // page skipping: Spark's own iterator of the rows read

    Counting(int column) {
      super(column);
    }

    @Override
    public void initFromPageReadStore(PageReadStore pages) {
      spark = pages.getRowIndexes().isPresent() || !pages.getRowIndexOffset().isPresent();
      if (spark) {
        super.initFromPageReadStore(pages);
      } else {
        next = pages.getRowIndexOffset().get();
      }
    }

    @Override
    public void populateRowIndex(WritableColumnVector vector, int rows) {
      if (spark) {
        super.populateRowIndex(vector, rows);
        return;
      }
      long at = next;
      for (int i = 0; i < rows; i++) {
        vector.putLong(i, at + i);
      }
      next = at + rows;
    }
  }
}
