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
 * phase two (lakerules.scan.latemat). The option {@code lakerules.rowGroups} lists, one file a line,
 * {@code <file name as _metadata.file_path shows it>\t<start>:<end>,<start>:<end>...}: the byte
 * spans of the row groups to read. A split of a listed file reads each listed row group whose
 * span's middle falls in the split (so each is read once, by one split) through Spark's own reader,
 * given the row group's span as its range: Parquet then reads exactly that row group (the one
 * whose midpoint lies in the range), with its row indexes, pushed filters and vectorized batches
 * as usual. A file not listed is read whole.
 *
 * <p>A span may carry a third field, {@code <start>:<end>:<rows>}, the row indexes within the row
 * group to read ({@code a-b;c;...}, as io.lakerules.PageRanges writes them): then only those rows
 * are read, and of each column only the pages holding them (PageRanges.narrow), when the file has
 * offset indexes and Spark's vectorized reader reads it; otherwise the whole row group.
 *
 * <p>Without the option it is Spark's reader of whole files; either way the row indexes a read asks
 * for ({@code _metadata.row_index}) are counted by io.lakerules.RowIndexes, not walked through boxed
 * longs. io.lakerules.LakeFileIndex reads every lake file through it.
 *
 * <p>Built for a read of row lineage (Iceberg v3), its {@code _metadata} has two more fields, constant
 * per file: {@link #FIRST_ROW_ID} and {@link #DATA_SEQUENCE}, the values io.lakerules.LakeFileIndex
 * lists with each file. Spark appends them to each file's rows as it appends {@code file_path}: the
 * spec's {@code _row_id} (first_row_id + position) is then an expression over the rows, not a join
 * of every row with a table of the files.
 */
public class RowGroupParquetFormat extends ParquetFileFormat {
  public static final String OPTION = SharedNames.ROW_GROUPS_OPTION;  // lower case: Spark lower-cases option names
  /** The file's first_row_id (null: none), a constant {@code _metadata} field of a lineage read. */
  public static final String FIRST_ROW_ID = SharedNames.FIRST_ROW_ID_FIELD;
  /** The file's data sequence number, a constant {@code _metadata} field of a lineage read. */
  public static final String DATA_SEQUENCE = SharedNames.DATA_SEQUENCE_FIELD;

  private final boolean lineage;

  public RowGroupParquetFormat() {
    this(false);
  }

  /** {@code lineage}: {@code _metadata} has {@link #FIRST_ROW_ID} and {@link #DATA_SEQUENCE} too. */
  public RowGroupParquetFormat(boolean lineage) {
    this.lineage = lineage;
  }

  @Override
  public Seq<org.apache.spark.sql.types.StructField> metadataSchemaFields() {
    Seq<org.apache.spark.sql.types.StructField> base = super.metadataSchemaFields();
    if (!lineage) {
      return base;
    }
    List<org.apache.spark.sql.types.StructField> all = new ArrayList<>(scala.jdk.javaapi.CollectionConverters.asJava(base));
    for (String name : new String[] {FIRST_ROW_ID, DATA_SEQUENCE}) {
      all.add(org.apache.spark.sql.catalyst.expressions.FileSourceConstantMetadataStructField$.MODULE$.apply(
          name, org.apache.spark.sql.types.DataTypes.LongType, true));
    }
    return scala.jdk.javaapi.CollectionConverters.asScala(all).toList();
  }

  @Override
  public Function1<PartitionedFile, Iterator<InternalRow>> buildReaderWithPartitionValues(
      SparkSession session, StructType dataSchema, StructType partitionSchema, StructType requiredSchema,
      Seq<Filter> filters, Map<String, String> options, Configuration hadoopConf) {
    scala.Option<String> spec = options.get(OPTION);
    if (spec.isEmpty()) {
      spec = options.get("lakerules.rowGroups");
    }
    if (spec.isEmpty()) {
      return new Counted(super.buildReaderWithPartitionValues(session, dataSchema, partitionSchema, requiredSchema,
          filters, options, perFile(session, requiredSchema, partitionSchema, filters, hadoopConf)));
    }
    // The spans say which rows to read: a pushed filter would only cost work (its dictionary
    // checks read dictionary pages) and keep PageRanges from narrowing the read to those rows.
    Seq<Filter> none = scala.collection.immutable.List$.MODULE$.<Filter>empty();
    Function1<PartitionedFile, Iterator<InternalRow>> read = super.buildReaderWithPartitionValues(session, dataSchema,
        partitionSchema, requiredSchema, none, options, perFile(session, requiredSchema, partitionSchema, none, hadoopConf));
    return new RowGroupReader(new Counted(read), parse(spec.get()));
  }

  /**
   * The Hadoop configuration Spark's reader is built with. Spark's reader makes a task attempt
   * context for every file it opens, and Hadoop's context copies a configuration that is not a
   * JobConf (~1,100 properties, ~14% of a task's time reading files of a few thousand rows). Given a
   * JobConf it copies nothing: the broadcast configuration is then the one object each file's
   * context shares (in a local session's executors; a cluster's deserialize a plain Configuration
   * and copy it as before). Shared only where Spark's reader writes nothing into it per file: no
   * filter pushed to Parquet (a file's predicate, which depends on its schema, is set into the
   * context's configuration) and the vectorized reader (parquet-mr's record reader writes its read
   * options back into it); otherwise {@code conf} as given.
   */
  private Configuration perFile(SparkSession session, StructType requiredSchema, StructType partitionSchema,
      Seq<Filter> filters, Configuration conf) {
    if (!filters.isEmpty() || conf instanceof org.apache.hadoop.mapred.JobConf
        || !super.supportBatch(session, withPartitions(requiredSchema, partitionSchema))) {
      return conf;
    }
    return new org.apache.hadoop.mapred.JobConf(conf);
  }

  /** The rows Spark's reader returns: the required columns, then the partition columns. */
  private static StructType withPartitions(StructType required, StructType partitions) {
    org.apache.spark.sql.types.StructField[] all = java.util.Arrays.copyOf(required.fields(),
        required.fields().length + partitions.fields().length);
    System.arraycopy(partitions.fields(), 0, all, required.fields().length, partitions.fields().length);
    return new StructType(all);
  }

  /** A file's spans: (start, end) pairs, and per span its rows' (first, last) pairs or null. */
  static final class Spans implements Serializable {
    final long[] bounds;
    final long[][] rows;

    Spans(long[] bounds, long[][] rows) {
      this.bounds = bounds;
      this.rows = rows;
    }
  }

  static HashMap<String, Spans> parse(String spec) {
    HashMap<String, Spans> out = new HashMap<>();
    for (String line : spec.split("\n")) {
      if (line.isEmpty()) {
        continue;
      }
      int tab = line.lastIndexOf('\t');
      String[] spans = line.substring(tab + 1).split(",");
      long[] bounds = new long[spans.length * 2];
      long[][] rows = new long[spans.length][];
      for (int i = 0; i < spans.length; i++) {
        String[] se = spans[i].split(":");
        bounds[2 * i] = Long.parseLong(se[0]);
        bounds[2 * i + 1] = Long.parseLong(se[1]);
        rows[i] = se.length > 2 && !se[2].isEmpty() ? PageRanges.parseRanges(se[2]) : null;
      }
      out.put(key(line.substring(0, tab)), new Spans(bounds, rows));
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

  /** Spark's reader of a split (or of a row group's span), its row indexes (when asked for) counted
   * by io.lakerules.RowIndexes. */
  static final class Counted extends AbstractFunction1<PartitionedFile, Iterator<InternalRow>> implements Serializable {
    private final Function1<PartitionedFile, Iterator<InternalRow>> read;

    Counted(Function1<PartitionedFile, Iterator<InternalRow>> read) {
      this.read = read;
    }

    @Override
    public Iterator<InternalRow> apply(PartitionedFile file) {
      Iterator<InternalRow> in = read.apply(file);
      RowIndexes.install(in);
      return in;
    }
  }

  static final class RowGroupReader extends AbstractFunction1<PartitionedFile, Iterator<InternalRow>>
      implements Serializable {
    private final Function1<PartitionedFile, Iterator<InternalRow>> read;
    private final HashMap<String, Spans> spans;

    RowGroupReader(Function1<PartitionedFile, Iterator<InternalRow>> read, HashMap<String, Spans> spans) {
      this.read = read;
      this.spans = spans;
    }

    @Override
    public Iterator<InternalRow> apply(PartitionedFile file) {
      Spans listed = spans.get(file.toPath().toString());
      if (listed == null) {
        return read.apply(file);
      }
      long[] bounds = listed.bounds;
      long from = file.start();
      long to = file.start() + file.length();
      List<PartitionedFile> parts = new ArrayList<>();
      List<long[]> rows = new ArrayList<>();
      for (int i = 0; i < bounds.length; i += 2) {
        long start = bounds[i];
        long end = bounds[i + 1];
        long middle = start + (end - start) / 2;
        if (middle >= from && middle < to) {
          parts.add(new PartitionedFile(file.partitionValues(), file.filePath(), start, end - start,
              file.locations(), file.modificationTime(), file.fileSize(),
              file.otherConstantMetadataColumnValues()));
          rows.add(listed.rows[i / 2]);
        }
      }
      @SuppressWarnings("unchecked")
      Iterator<InternalRow> out = (Iterator<InternalRow>) (Iterator<?>) new Chain(read, parts, rows);
      return out;
    }
  }

  /**
   * The elements of each part in turn; a part's reader is opened only when the previous is done,
   * and narrowed to the part's rows when it lists some.
   * Elements are Objects: the vectorized reader hands out ColumnarBatches through its
   * Iterator[InternalRow].
   */
  static final class Chain extends scala.collection.AbstractIterator<Object> {
    private final Function1<PartitionedFile, Iterator<InternalRow>> read;
    private final List<PartitionedFile> parts;
    private final List<long[]> rows;
    private int next = 0;
    private Iterator<?> current = null;

    Chain(Function1<PartitionedFile, Iterator<InternalRow>> read, List<PartitionedFile> parts, List<long[]> rows) {
      this.read = read;
      this.parts = parts;
      this.rows = rows;
    }

    @Override
    public boolean hasNext() {
      while (current == null || !current.hasNext()) {
        if (next >= parts.size()) {
          return false;
        }
        long[] wanted = rows.get(next);
        current = read.apply(parts.get(next++));
        if (wanted != null) {
          PageRanges.narrow(current, wanted);
        }
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
