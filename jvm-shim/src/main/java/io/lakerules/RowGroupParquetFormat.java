package io.lakerules;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import scala.Function1;
import scala.collection.Iterator;
import scala.collection.immutable.Map;
import scala.collection.immutable.Seq;
import scala.runtime.AbstractFunction1;

/**
 * Spark's Parquet reader, reading only some row groups of some files: late materialization's
 * phase two (lakerules.latemat). The option {@code lakerules.rowGroups} lists, one file a line,
 * {@code <file name as _metadata.file_path shows it>\t<start>:<end>,<start>:<end>...}: the byte
 * spans of the row groups to read. A split of a listed file reads each listed row group whose
 * span's middle falls in the split (so each is read once, by one split) through Spark's own reader,
 * given the row group's span as its range: Parquet then reads exactly that row group (the one
 * whose midpoint lies in the range), with its row indexes, pushed filters and vectorized batches
 * as usual. A file not listed is read whole.
 */
public class RowGroupParquetFormat extends ParquetFileFormat {
  public static final String OPTION = "lakerules.rowgroups";  // lower case: Spark lower-cases option names

  @Override
  public Function1<PartitionedFile, Iterator<InternalRow>> buildReaderWithPartitionValues(
      SparkSession session, StructType dataSchema, StructType partitionSchema, StructType requiredSchema,
      Seq<Filter> filters, Map<String, String> options, Configuration hadoopConf) {
    Function1<PartitionedFile, Iterator<InternalRow>> read = super.buildReaderWithPartitionValues(
        session, dataSchema, partitionSchema, requiredSchema, filters, options, hadoopConf);
    scala.Option<String> spec = options.get(OPTION);
    if (spec.isEmpty()) {
      spec = options.get("lakerules.rowGroups");
    }
    return spec.isEmpty() ? read : new RowGroupReader(read, parse(spec.get()));
  }

  static HashMap<String, long[]> parse(String spec) {
    HashMap<String, long[]> out = new HashMap<>();
    for (String line : spec.split("\n")) {
      if (line.isEmpty()) {
        continue;
      }
      int tab = line.lastIndexOf('\t');
      String[] spans = line.substring(tab + 1).split(",");
      long[] bounds = new long[spans.length * 2];
      for (int i = 0; i < spans.length; i++) {
        String[] se = spans[i].split(":");
        bounds[2 * i] = Long.parseLong(se[0]);
        bounds[2 * i + 1] = Long.parseLong(se[1]);
      }
      out.put(key(line.substring(0, tab)), bounds);
    }
    return out;
  }

  /** One form of a file's name (_metadata.file_path says file:/x where the split says file:///x). */
  static String key(String urlEncoded) {
    try {
      return new org.apache.hadoop.fs.Path(new java.net.URI(urlEncoded)).toString();
    } catch (java.net.URISyntaxException e) {
      return urlEncoded;
    }
  }

  static final class RowGroupReader extends AbstractFunction1<PartitionedFile, Iterator<InternalRow>>
      implements Serializable {
    private final Function1<PartitionedFile, Iterator<InternalRow>> read;
    private final HashMap<String, long[]> spans;

    RowGroupReader(Function1<PartitionedFile, Iterator<InternalRow>> read, HashMap<String, long[]> spans) {
      this.read = read;
      this.spans = spans;
    }

    @Override
    public Iterator<InternalRow> apply(PartitionedFile file) {
      long[] bounds = spans.get(file.toPath().toString());
      if (bounds == null) {
        return read.apply(file);
      }
      long from = file.start();
      long to = file.start() + file.length();
      List<PartitionedFile> parts = new ArrayList<>();
      for (int i = 0; i < bounds.length; i += 2) {
        long start = bounds[i];
        long end = bounds[i + 1];
        long middle = start + (end - start) / 2;
        if (middle >= from && middle < to) {
          parts.add(new PartitionedFile(file.partitionValues(), file.filePath(), start, end - start,
              file.locations(), file.modificationTime(), file.fileSize(),
              file.otherConstantMetadataColumnValues()));
        }
      }
      @SuppressWarnings("unchecked")
      Iterator<InternalRow> rows = (Iterator<InternalRow>) (Iterator<?>) new Chain(read, parts);
      return rows;
    }
  }

  /**
   * The elements of each part in turn; a part's reader is opened only when the previous is done.
   * Elements are Objects: the vectorized reader hands out ColumnarBatches through its
   * Iterator[InternalRow].
   */
  static final class Chain extends scala.collection.AbstractIterator<Object> {
    private final Function1<PartitionedFile, Iterator<InternalRow>> read;
    private final List<PartitionedFile> parts;
    private int next = 0;
    private Iterator<?> current = null;

    Chain(Function1<PartitionedFile, Iterator<InternalRow>> read, List<PartitionedFile> parts) {
      this.read = read;
      this.parts = parts;
    }

    @Override
    public boolean hasNext() {
      while (current == null || !current.hasNext()) {
        if (next >= parts.size()) {
          return false;
        }
        current = read.apply(parts.get(next++));
      }
      return true;
    }

    @Override
    public Object next() {
      if (!hasNext()) {
        throw new java.util.NoSuchElementException();
      }
      return current.next();
    }
  }
}
