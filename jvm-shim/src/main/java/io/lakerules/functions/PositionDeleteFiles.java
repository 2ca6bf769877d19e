package io.lakerules.functions;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.RecordWriter;
import org.apache.parquet.hadoop.ParquetFileWriter;
import org.apache.parquet.hadoop.ParquetOutputFormat;
import org.apache.parquet.hadoop.api.WriteSupport;
import org.apache.parquet.hadoop.metadata.CompressionCodecName;
import org.apache.parquet.io.api.Binary;
import org.apache.parquet.io.api.RecordConsumer;
import org.apache.parquet.schema.LogicalTypeAnnotation;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName;
import org.apache.parquet.schema.Types;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

/**
 * Position delete files written by the driver: a statement's deletes (few, as a CDC batch's MERGE
 * makes them) come back from the executors with no shuffle ({@link #collect}, 8 bytes a row) and
 * are written here, one Parquet file per group, by parquet-mr's own output format under the same
 * options Spark's writer would get: no shuffle, no write job, no output committer. Each file is
 * then in the driver's cache of decoded delete files, so the next statement's scan does not read
 * it back.
 */
public final class PositionDeleteFiles {
  static final int FILE_PATH_ID = 2147483546;
  static final int POS_ID = 2147483545;
  static final MessageType SCHEMA = Types.buildMessage()
      .required(PrimitiveTypeName.BINARY).as(LogicalTypeAnnotation.stringType()).id(FILE_PATH_ID).named("file_path")
      .required(PrimitiveTypeName.INT64).id(POS_ID).named("pos")
      .named("spark_schema");

  private PositionDeleteFiles() {
  }

  /**
   * A statement's positions, by name ({@code <kind>\0<group index>\0<data file path>}), on the
   * driver, and how many each name has; when there were more than the limit, only the counts.
   */
  public static final class Collected {
    final HashMap<String, long[]> byName;  // null: not collected, only counted
    final HashMap<String, Long> counted;

    Collected(HashMap<String, long[]> byName, HashMap<String, Long> counted) {
      this.byName = byName;
      this.counted = counted;
    }

    /** Whether the positions themselves are here (else only their counts). */
    public boolean complete() {
      return byName != null;
    }

    /** One name's positions: its delete group index, its data file path, its sorted positions. */
    record Part(int group, String path, long[] positions) {}

    /**
     * The positions of the names whose kind (each a character of {@code kinds}) is asked for, but
     * for the data file paths of {@code skip} (NUL-separated: files the statement removes whole).
     */
    List<Part> parts(String kinds, String skip) {
      if (!complete()) {
        throw new IllegalStateException("positions were counted, not collected");
      }
      java.util.Set<String> skipped = new java.util.HashSet<>(Arrays.asList(Joined.strings(skip)));
      List<Part> out = new ArrayList<>();
      for (Map.Entry<String, long[]> e : byName.entrySet()) {
        String name = e.getKey();
        int first = name.indexOf('\0');
        int second = name.indexOf('\0', first + 1);
        String path = name.substring(second + 1);
        if (first == 1 && kinds.indexOf(name.charAt(0)) >= 0 && !skipped.contains(path)) {
          out.add(new Part(Integer.parseInt(name.substring(first + 1, second)), path, e.getValue()));
        }
      }
      return out;
    }

    /** {@link #parts} as one sorted array of positions per data file path, whatever their group and kind. */
    public HashMap<String, long[]> byFile(String kinds, String skip) {
      HashMap<String, List<long[]>> arrays = new HashMap<>();
      for (Part p : parts(kinds, skip)) {
        arrays.computeIfAbsent(p.path(), k -> new ArrayList<>()).add(p.positions());
      }
      HashMap<String, long[]> out = new HashMap<>();
      arrays.forEach((path, a) -> out.put(path, PositionDeleteSet.sortedUnion(a)));
      return out;
    }

    /** NUL-separated (name, number of positions) pairs. */
    public String counts() {
      StringBuilder out = new StringBuilder();
      for (Map.Entry<String, Long> e : counted.entrySet()) {
        if (out.length() > 0) {
          out.append('\0');
        }
        out.append(e.getKey()).append('\0').append(e.getValue());
      }
      return out.toString();
    }
  }

  /**
   * The (name STRING, position BIGINT) rows of {@code rows} on the driver, sorted per name, or
   * only their number per name if there are more than {@code maxRows} (then no position came to
   * the driver: {@link Collected#complete} is false). Each task groups its rows into one sorted
   * array per name and sends them if they are at most its share of {@code maxRows} (maxRows /
   * tasks), else only their counts: one job, and never more than maxRows positions on the driver.
   * Only if a task held more than its share (few rows, unevenly spread) does a second job collect
   * the arrays, which the executors kept. A {@code maxRows} of 0 counts only.
   */
  public static Collected collect(org.apache.spark.sql.classic.SparkSession session, LogicalPlan rows, long maxRows) {
    org.apache.spark.api.java.JavaRDD<HashMap<String, long[]>> grouped = PositionDeleteSet.grouped(session, rows)
        .persist(org.apache.spark.storage.StorageLevel.MEMORY_AND_DISK());
    try {
      long share = maxRows == 0 ? 0 : Math.max(1, maxRows / Math.max(1, grouped.getNumPartitions()));
      List<HashMap<String, long[]>> parts = grouped.map(part -> sentOrCounted(part, share)).collect();
      long n = 0;
      boolean all = true;
      HashMap<String, Long> counted = new HashMap<>();
      for (HashMap<String, long[]> part : parts) {
        boolean onlyCounts = part.containsKey(COUNTED);
        all &= !onlyCounts;
        for (Map.Entry<String, long[]> e : part.entrySet()) {
          if (!e.getKey().equals(COUNTED)) {
            long k = onlyCounts ? e.getValue()[0] : e.getValue().length;
            counted.merge(e.getKey(), k, Long::sum);
            n += k;
          }
        }
      }
      return new Collected(n > maxRows ? null : PositionDeleteSet.merged(all ? parts : grouped.collect()), counted);
    } finally {
      grouped.unpersist(false);
    }
  }

  /** The key marking a task's answer of counts, not positions (no name is empty: each has a kind). */
  private static final String COUNTED = "";

  private static HashMap<String, long[]> sentOrCounted(HashMap<String, long[]> part, long share) {
    long n = size(part);
    if (n <= share) {
      return part;
    }
    HashMap<String, long[]> counted = new HashMap<>();
    counted.put(COUNTED, new long[0]);
    for (Map.Entry<String, long[]> e : part.entrySet()) {
      counted.put(e.getKey(), new long[] {e.getValue().length});
    }
    return counted;
  }

  private static long size(HashMap<String, long[]> part) {
    long n = 0;
    for (long[] p : part.values()) {
      n += p.length;
    }
    return n;
  }

  /**
   * Writes the positions of {@code collected} whose kind is one of {@code kinds} (each a
   * character) as one delete file per group under {@code target}, in {@code <groupColumn>=<group
   * index>/} folders, sorted by data file path (UTF-8 bytes) then position, as the spec asks.
   * {@code options}: NUL-separated keys and values, Spark's Parquet writer options
   * ({@code compression}, else Hadoop configuration keys parquet-mr reads). {@code skip}:
   * NUL-separated data file paths whose positions are left out (files the statement removes
   * whole). Returns NUL-separated (path relative to target, length) pairs.
   */
  public static String write(org.apache.spark.sql.classic.SparkSession session, Collected collected, String kinds,
                             String target, String groupColumn, String options, String skip)
      throws IOException, InterruptedException {
    // group -> data file path (UTF-8 bytes, in their order, as the spec sorts) -> its arrays (one per kind)
    TreeMap<Integer, TreeMap<byte[], List<long[]>>> groups = new TreeMap<>();
    for (Collected.Part p : collected.parts(kinds, skip)) {
      groups.computeIfAbsent(p.group(), k -> new TreeMap<>(Arrays::compareUnsigned))
          .computeIfAbsent(p.path().getBytes(StandardCharsets.UTF_8), k -> new ArrayList<>())
          .add(p.positions());
    }
    Configuration conf = session.sessionState().newHadoopConf();
    CompressionCodecName codec = codec(session.sessionState().conf().parquetCompressionCodec());
    String[] kv = options.isEmpty() ? new String[0] : options.split("\0", -1);
    for (int i = 0; i + 1 < kv.length; i += 2) {
      if (kv[i].equals("compression")) {
        codec = codec(kv[i + 1]);
      } else {
        conf.set(kv[i], kv[i + 1]);
      }
    }
    // local files without a chmod process per file and folder (io.lakerules.LocalFiles)
    Configuration writing = io.lakerules.LocalFiles.forWriting(conf, target);
    StringBuilder out = new StringBuilder();
    for (Map.Entry<Integer, TreeMap<byte[], List<long[]>>> g : groups.entrySet()) {
      String relative = groupColumn + "=" + g.getKey() + "/deletes-" + UUID.randomUUID() + ".parquet";
      String full = target + "/" + relative;
      Path path = new Path(full);
      RecordWriter<Void, Row> writer = new ParquetOutputFormat<Row>(new Support())
          .getRecordWriter(writing, path, codec, ParquetFileWriter.Mode.CREATE);
      Row row = new Row();
      HashMap<String, long[]> cached = new HashMap<>();
      for (Map.Entry<byte[], List<long[]>> f : g.getValue().entrySet()) {
        long[] positions = PositionDeleteSet.sortedUnion(f.getValue());
        row.path = Binary.fromConstantByteArray(f.getKey());
        for (long p : positions) {
          row.pos = p;
          writer.write(null, row);
        }
        cached.put(PositionDeleteSet.normal(new String(f.getKey(), StandardCharsets.UTF_8)), positions);
      }
      writer.close(null);
      long length = path.getFileSystem(conf).getFileStatus(path).getLen();
      DeleteFileRows.put(DeleteFileRows.key(full, Long.toString(length)), cached);
      if (out.length() > 0) {
        out.append('\0');
      }
      out.append(relative).append('\0').append(length);
    }
    return out.toString();
  }

  /** parquet-mr's codec of a Spark codec name ({@code none} and {@code uncompressed}: none). */
  private static CompressionCodecName codec(String name) {
    String n = name.toLowerCase(java.util.Locale.ROOT);
    return n.equals("none") || n.equals("uncompressed") ? CompressionCodecName.UNCOMPRESSED
        : CompressionCodecName.valueOf(n.toUpperCase(java.util.Locale.ROOT));
  }

  private static final class Row {
    Binary path;
    long pos;
  }

  private static final class Support extends WriteSupport<Row> {
    private RecordConsumer consumer;

    @Override
    public WriteContext init(Configuration configuration) {
      return new WriteContext(SCHEMA, new HashMap<>());
    }

    @Override
    public void prepareForWrite(RecordConsumer recordConsumer) {
      this.consumer = recordConsumer;
    }

    @Override
    public void write(Row row) {
      consumer.startMessage();
      consumer.startField("file_path", 0);
      consumer.addBinary(row.path);
      consumer.endField("file_path", 0);
      consumer.startField("pos", 1);
      consumer.addLong(row.pos);
      consumer.endField("pos", 1);
      consumer.endMessage();
    }
  }
}
