package io.lakerules.functions;

import java.io.Serializable;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.objects.Invoke;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.ObjectType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The position deletes of a scan, as a sorted array of deleted row positions per data file,
 * broadcast once to the executors; {@link #isLive} is the per-row test of a Filter over the data
 * files' rows (their file name and row index). Rows of a file arrive in position order, so a row
 * costs one comparison of its file name with the previous row's and one step of a cursor through
 * that file's positions: no hash join, no per-row hashing.
 *
 * <p>Spark deserializes a plan's objects for each task, so the cursor state is per task; the
 * broadcast arrays are shared and never written.
 */
public final class PositionDeleteSet implements Serializable {
  private static final long serialVersionUID = 1L;

  private static final java.util.concurrent.atomic.AtomicLong IDS = new java.util.concurrent.atomic.AtomicLong();

  private final Broadcast<HashMap<String, long[]>> positions;
  private final long rows;
  private final int files;
  private final long id = IDS.incrementAndGet();  // unique in this driver

  private transient Map<String, long[]> byFile;
  private transient UTF8String file;  // a private copy of the current file's name
  private transient UTF8String seen;  // the object the caller passed for it
  private transient Cursor current;   // a walk through its deleted positions; null: none

  private PositionDeleteSet(Broadcast<HashMap<String, long[]>> positions, long rows, int files) {
    this.positions = positions;
    this.rows = rows;
    this.files = files;
  }

  /**
   * The positions of each name of {@code rows}, a plan of (name STRING, position BIGINT) rows,
   * sorted. Each task groups its own rows into one sorted array per name (delete rows are sorted
   * by file, so that is one hash lookup per run of a name), and only those arrays come back to
   * the driver: one stage, no shuffle, 8 bytes a row.
   */
  static HashMap<String, long[]> positionsByName(org.apache.spark.sql.classic.SparkSession session, LogicalPlan rows) {
    return merged(grouped(session, rows).collect());
  }

  /** Each task's rows of {@code rows} (name, position) as one sorted array per name. */
  static org.apache.spark.api.java.JavaRDD<HashMap<String, long[]>> grouped(
      org.apache.spark.sql.classic.SparkSession session, LogicalPlan rows) {
    org.apache.spark.sql.classic.Dataset<?> ds = org.apache.spark.sql.classic.Dataset.ofRows(session, rows);
    org.apache.spark.rdd.RDD<InternalRow> rdd = ds.queryExecution().executedPlan().execute();
    return rdd.toJavaRDD().mapPartitions(PositionDeleteSet::groupPartition);
  }

  /** The tasks' arrays of each name in one sorted array. */
  static HashMap<String, long[]> merged(java.util.List<HashMap<String, long[]>> parts) {
    Map<String, java.util.List<long[]>> byName = new HashMap<>();
    for (HashMap<String, long[]> part : parts) {
      for (Map.Entry<String, long[]> e : part.entrySet()) {
        byName.computeIfAbsent(e.getKey(), k -> new java.util.ArrayList<>()).add(e.getValue());
      }
    }
    HashMap<String, long[]> merged = new HashMap<>();
    for (Map.Entry<String, java.util.List<long[]>> e : byName.entrySet()) {
      merged.put(e.getKey(), sortedUnion(e.getValue()));
    }
    return merged;
  }

  private static final java.util.regex.Pattern LOCAL = java.util.regex.Pattern.compile("^file:/*");

  /** A data file path in lakerules.scan.read.normal_path's form (file:/x -> /x). */
  static String normal(String path) {
    return LOCAL.matcher(path).replaceFirst("/");
  }

  /**
   * The set of the position delete files {@code deleteFiles} (NUL-separated paths, as their
   * manifest gives them; {@code sizes}: their lengths, NUL-separated) with no Spark job: each
   * file's rows come from {@link DeleteFileRows}, the driver's cache of decoded delete files,
   * or are read here on the driver (then cached). {@code pairs}: NUL-separated triples (index
   * into deleteFiles, a data file's path in lakerules.scan.read.normal_path's form, that data
   * file's name as its rows carry it); a delete row counts only through such a pair.
   */
  public static PositionDeleteSet readOnDriver(org.apache.spark.sql.classic.SparkSession session, String deleteFiles,
                                               String sizes, String pairs) {
    String[] files = deleteFiles.split("\0", -1);
    String[] lengths = sizes.split("\0", -1);
    String[] t = pairs.isEmpty() ? new String[0] : pairs.split("\0", -1);
    java.util.List<Map<String, String>> allowed = new java.util.ArrayList<>();
    for (int i = 0; i < files.length; i++) {
      allowed.add(new HashMap<>());
    }
    for (int i = 0; i + 2 < t.length; i += 3) {
      allowed.get(Integer.parseInt(t[i])).put(t[i + 1], t[i + 2]);
    }
    org.apache.hadoop.conf.Configuration conf = null;
    Map<String, java.util.List<long[]>> byName = new HashMap<>();
    for (int i = 0; i < files.length; i++) {
      Map<String, String> names = allowed.get(i);
      if (names.isEmpty()) {
        continue;
      }
      String key = DeleteFileRows.key(files[i], lengths[i]);
      Map<String, long[]> rows = DeleteFileRows.get(key);
      if (rows == null) {
        if (conf == null) {
          conf = session.sessionState().newHadoopConf();
        }
        rows = readFile(conf, files[i]);
        DeleteFileRows.put(key, rows);
      }
      for (Map.Entry<String, String> pair : names.entrySet()) {
        long[] positions = rows.get(pair.getKey());
        if (positions != null) {
          byName.computeIfAbsent(pair.getValue(), k -> new java.util.ArrayList<>()).add(positions);
        }
      }
    }
    HashMap<String, long[]> merged = new HashMap<>();
    for (Map.Entry<String, java.util.List<long[]>> e : byName.entrySet()) {
      merged.put(e.getKey(), sortedUnion(e.getValue()));
    }
    return of(session, merged);
  }

  /**
   * Which of {@code deleteFiles} (NUL-separated paths; {@code sizes} their lengths) the driver's
   * cache of decoded delete files lacks: one character per file, '1' missing, '0' cached.
   */
  public static String uncached(String deleteFiles, String sizes) {
    String[] files = deleteFiles.split("\0", -1);
    String[] lengths = sizes.split("\0", -1);
    StringBuilder out = new StringBuilder(files.length);
    for (int i = 0; i < files.length; i++) {
      out.append(DeleteFileRows.get(DeleteFileRows.key(files[i], lengths[i])) == null ? '1' : '0');
    }
    return out.toString();
  }

  /**
   * Runs {@code rows}, a plan of (name STRING, position BIGINT) rows of delete files too large to
   * read on the driver, each name {@code <delete file length>\0<delete file path>\0<data file
   * path in normal form>} (a {@link DeleteFileRows#key} and a data file path), and caches each
   * delete file's positions per data file, as {@link #readOnDriver} then finds them: one stage
   * ({@link #positionsByName}).
   */
  public static void cacheFiles(org.apache.spark.sql.classic.SparkSession session, LogicalPlan rows) {
    Map<String, HashMap<String, long[]>> byFile = new HashMap<>();
    for (Map.Entry<String, long[]> e : positionsByName(session, rows).entrySet()) {
      int cut = e.getKey().lastIndexOf('\0');
      byFile.computeIfAbsent(e.getKey().substring(0, cut), k -> new HashMap<>())
          .put(e.getKey().substring(cut + 1), e.getValue());
    }
    for (Map.Entry<String, HashMap<String, long[]>> f : byFile.entrySet()) {
      DeleteFileRows.put(f.getKey(), f.getValue());
    }
  }

  /** Forgets every cached delete file (benchmarks measuring a first read). */
  public static void clearFileCache() {
    DeleteFileRows.clear();
  }

  /** One delete file's rows: data file path (normal form) -> its deleted positions, sorted. */
  private static Map<String, long[]> readFile(org.apache.hadoop.conf.Configuration conf, String file) {
    Map<String, Positions> byPath = new HashMap<>();
    try (org.apache.parquet.hadoop.ParquetReader<org.apache.parquet.example.data.Group> reader =
             org.apache.parquet.hadoop.ParquetReader.builder(new org.apache.parquet.hadoop.example.GroupReadSupport(),
                 new org.apache.hadoop.fs.Path(file)).withConf(conf).build()) {
      String path = null;  // the current run's data file path (delete files are sorted by it)
      Positions run = null;
      for (org.apache.parquet.example.data.Group g = reader.read(); g != null; g = reader.read()) {
        String next = g.getString("file_path", 0);
        if (!next.equals(path)) {
          path = next;
          run = byPath.computeIfAbsent(normal(next), k -> new Positions());
        }
        run.add(g.getLong("pos", 0));
      }
    } catch (java.io.IOException | RuntimeException e) {
      throw new java.io.UncheckedIOException("lakerules: cannot read position delete file " + file + ": "
          + e.getMessage(), e instanceof java.io.IOException ? (java.io.IOException) e : new java.io.IOException(e));
    }
    HashMap<String, long[]> out = new HashMap<>();
    for (Map.Entry<String, Positions> e : byPath.entrySet()) {
      out.put(e.getKey(), e.getValue().sorted());
    }
    return out;
  }

  /** The sorted arrays' values in one sorted array (a single array is returned as it is: never written). */
  static long[] sortedUnion(java.util.List<long[]> arrays) {
    if (arrays.size() == 1) {
      return arrays.get(0);
    }
    int n = 0;
    for (long[] p : arrays) {
      n += p.length;
    }
    long[] all = new long[n];
    int at = 0;
    for (long[] p : arrays) {
      System.arraycopy(p, 0, all, at, p.length);
      at += p.length;
    }
    Arrays.sort(all);
    return all;
  }

  /** The set of {@code byName} (data file name -> its deleted positions, sorted), broadcast. */
  static PositionDeleteSet of(org.apache.spark.sql.classic.SparkSession session, HashMap<String, long[]> byName) {
    long total = 0;
    for (long[] p : byName.values()) {
      total += p.length;
    }
    Broadcast<HashMap<String, long[]>> b = session.sparkContext().broadcast(byName,
        scala.reflect.ClassTag$.MODULE$.apply(HashMap.class));
    return new PositionDeleteSet(b, total, byName.size());
  }

  /** One task's (name, position) rows as one sorted array of positions per name. */
  private static java.util.Iterator<HashMap<String, long[]>> groupPartition(java.util.Iterator<InternalRow> rows) {
    Map<UTF8String, Positions> byName = new HashMap<>();
    UTF8String name = null;  // the current run's name (a private copy: rows reuse their buffers)
    Positions run = null;
    while (rows.hasNext()) {
      InternalRow r = rows.next();
      if (r.isNullAt(0) || r.isNullAt(1)) {
        continue;
      }
      UTF8String next = r.getUTF8String(0);
      if (name == null || !name.equals(next)) {
        name = next.clone();
        run = byName.computeIfAbsent(name, k -> new Positions());
      }
      run.add(r.getLong(1));
    }
    HashMap<String, long[]> out = new HashMap<>();
    for (Map.Entry<UTF8String, Positions> e : byName.entrySet()) {
      out.put(e.getKey().toString(), e.getValue().sorted());
    }
    return java.util.Collections.singletonList(out).iterator();
  }

  /** A growing array of positions. */
  private static final class Positions {
    long[] values = new long[64];
    int size;

    void add(long v) {
      if (size == values.length) {
        values = Arrays.copyOf(values, size * 2);
      }
      values[size++] = v;
    }

    long[] sorted() {
      long[] all = Arrays.copyOf(values, size);
      Arrays.sort(all);
      return all;
    }
  }

  /** Filter(isLive(file, pos)) over data: its rows that no position delete of this set removes. */
  public LogicalPlan filterLive(LogicalPlan data, Attribute fileName, Attribute position) {
    Expression target = Literal.create(this, new ObjectType(PositionDeleteSet.class));
    scala.collection.immutable.Seq<Expression> args =
        scala.jdk.javaapi.CollectionConverters.asScala(java.util.List.<Expression>of(fileName, position)).toList();
    scala.collection.immutable.Seq<org.apache.spark.sql.types.AbstractDataType> none =
        scala.collection.immutable.List$.MODULE$.empty();
    Expression live = new Invoke(target, "isLive", DataTypes.BooleanType, args, none, false, false, true);
    return new Filter(live, data);
  }

  /**
   * The deleted positions of the data file Spark names {@code fileName} (as _metadata.file_path
   * shows it), sorted, or null: what io.lakerules.PositionDeletesParquetFormat's reader drops.
   */
  public long[] positionsOf(String fileName) {
    if (byFile == null) {
      byFile = positions.value();
    }
    return byFile.get(fileName);
  }

  /** Whether the row at position pos of the file Spark names fileName is not deleted. */
  public boolean isLive(UTF8String fileName, long pos) {
    if (fileName == null) {
      return true;
    }
    // A reader passes one object for all the rows of a file (a constant column); comparing the
    // bytes of a long path for every row would cost more than the rest of this test. Any other
    // object is compared by its bytes with a private copy (the caller's may point into a reused
    // buffer).
    if (fileName != seen && (file == null || !file.equals(fileName))) {
      file = fileName.clone();
      long[] deleted = positionsOf(file.toString());
      current = deleted == null ? null : new Cursor(deleted);
    }
    seen = fileName;
    return current == null || !current.deleted(pos);
  }

  /**
   * A walk through one file's deleted positions (sorted) as its rows go by: rows come in position
   * order, so a row costs a step or two of the walk; a position behind the last one (or the first
   * one, which may be anywhere in the file) is found by binary search.
   */
  public static final class Cursor {
    private final long[] sorted;
    private int at;                      // first index whose position is >= the last one asked
    private long last = Long.MIN_VALUE;  // the last position asked; MIN_VALUE: none yet

    public Cursor(long[] sorted) {
      this.sorted = sorted;
    }

    /** Whether position p is deleted. */
    public boolean deleted(long p) {
      seek(p);
      return at < sorted.length && sorted[at] == p;
    }

    /** Whether a position in [from, to] is deleted. */
    public boolean anyIn(long from, long to) {
      seek(from);
      return at < sorted.length && sorted[at] <= to;
    }

    /**
     * The index of the first deleted position at or after {@code p} ({@link #size} when none): the
     * deleted positions from there on are {@link #at}(index), ascending.
     */
    public int indexOf(long p) {
      seek(p);
      return at;
    }

    /** The {@code i}th deleted position, ascending. */
    public long at(int i) {
      return sorted[i];
    }

    /** How many positions are deleted. */
    public int size() {
      return sorted.length;
    }

    private void seek(long p) {
      if (p < last || last == Long.MIN_VALUE) {
        at = lowerBound(sorted, p);
      } else {
        while (at < sorted.length && sorted[at] < p) {
          at++;
        }
      }
      last = p;
    }

    private static int lowerBound(long[] a, long v) {
      int lo = 0;
      int hi = a.length;
      while (lo < hi) {
        int mid = (lo + hi) >>> 1;
        if (a[mid] < v) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      return lo;
    }
  }

  /** A number no other set of this driver has. */
  public long id() {
    return id;
  }

  public long rows() {
    return rows;
  }

  public int files() {
    return files;
  }

  /** Drops the executors' copies (the driver keeps its own: a later use fetches it again). */
  public void release() {
    positions.unpersist(false);
  }

  @Override
  public String toString() {
    return "position deletes: " + rows + " rows in " + files + " data files";
  }
}
