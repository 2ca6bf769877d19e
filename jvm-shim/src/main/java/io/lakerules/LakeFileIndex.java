package io.lakerules;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.paths.SparkPath;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.FileFormat;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;

/**
 * The data files of a planned lake scan as Spark's file source reads them: the list the manifests
 * gave (path and length of every file), handed over in one call, with no listing, no status call
 * and no Spark job per file. Spark's own index (InMemoryFileIndex) lists each path it is given,
 * which on a table of thousands of files costs a Spark job of one task per file before the scan.
 *
 * <p>The listing is one string: {@code length NUL rows NUL path NUL length NUL rows NUL path ...},
 * the lengths and row counts as the manifests record them (the rows weigh the read tasks:
 * {@link LakeScanExec}).
 * Paths are taken as paths, not globs and not URL-encoded URIs, as Iceberg's metadata stores them.
 */
public class LakeFileIndex implements FileIndex {
  private static final long BLOCK_SIZE = 128L * 1024 * 1024;
  private static final String DELETES_OPTION = "lakerules.positiondeletes";
  /**
   * parquet-mr's vectored reads (on by default since 1.14), turned off for files on the local file
   * system unless the session sets it: Hadoop's ChecksumFileSystem completes each range of a
   * vectored read with CompletableFuture.thenCombineAsync, and on a JVM of 2 cores (the common
   * pool's parallelism 1) that starts a thread per range. Late materialization reads page ranges
   * (a row group of 60 columns, one page of each: 60 ranges), and a read of 20 spread rows started
   * ~1,700 threads; the same read took 1.33 s with them, 1.10 s without. A local file is in the
   * page cache or on one disk: reading its ranges in turn loses nothing. Other file systems (S3A's
   * parallel range GETs) keep parquet-mr's default.
   */
  static final String VECTORED_IO = "parquet.hadoop.vectored.io.enabled";

  private static final String LINEAGE_OPTION = "lakerules.lineage";

  private final FileStatus[] files;
  private final long[] rows;
  // per file, the values of RowGroupParquetFormat's constant _metadata fields (a lineage read), or null
  private scala.collection.immutable.Map<String, Object>[] constants;
  private java.util.Map<String, Long> rowsByName; // Spark's name of a file (urlEncodedPath) -> rows
  private final long size;
  private long estimate = -1; // bytes the rows take in memory, when the caller knows (read)
  private final Seq<Path> roots;
  private final int hash;

  LakeFileIndex(FileStatus[] files, long[] rows) {
    this.files = files;
    this.rows = rows;
    long total = 0;
    int h = files.length;
    LinkedHashSet<Path> parents = new LinkedHashSet<>();
    for (FileStatus f : files) {
      total += f.getLen();
      h = 31 * h + f.getPath().hashCode();
      parents.add(f.getPath().getParent());
    }
    this.hash = h;
    this.size = total;
    this.roots = scala.jdk.javaapi.CollectionConverters.asScala(new ArrayList<>(parents)).toList();
  }

  /** The index of a listing (see the class comment); paths qualified by their file systems. */
  public static LakeFileIndex of(String listing, Configuration conf) throws java.io.IOException {
    String[] parts = split(listing);
    if (parts.length % 3 != 0) {
      throw new IllegalArgumentException("lakerules: malformed file listing (" + parts.length + " fields)");
    }
    String[] paths = new String[parts.length / 3];
    long[] rows = new long[paths.length];
    for (int i = 0; i < paths.length; i++) {
      rows[i] = Long.parseLong(parts[3 * i + 1]);
      paths[i] = parts[3 * i + 2];
    }
    Path[] qualified = qualify(paths, conf);
    FileStatus[] out = new FileStatus[paths.length];
    for (int i = 0; i < paths.length; i++) {
      out[i] = new FileStatus(Long.parseLong(parts[3 * i]), false, 1, BLOCK_SIZE, 0L, qualified[i]);
    }
    return new LakeFileIndex(out, rows);
  }

  /** Whether every file listed is on the local file system (scheme file). */
  boolean allLocal() {
    for (FileStatus f : files) {
      if (!"file".equals(f.getPath().toUri().getScheme())) {
        return false;
      }
    }
    return files.length > 0;
  }

  private static String[] split(String joined) {
    return joined.isEmpty() ? new String[0] : joined.split("\0", -1);
  }

  private static Path[] qualify(String[] paths, Configuration conf) throws java.io.IOException {
    Map<String, FileSystem> filesystems = new HashMap<>();
    Path[] out = new Path[paths.length];
    for (int i = 0; i < paths.length; i++) {
      Path path = new Path(paths[i]);
      String key = path.toUri().getScheme() + "://" + path.toUri().getAuthority();
      FileSystem fs = filesystems.get(key);
      if (fs == null) {
        fs = path.getFileSystem(conf);
        filesystems.put(key, fs);
      }
      // through Path's string form, as Spark's readers name files: file:/x, never file:///x
      out[i] = new Path(fs.makeQualified(path).toString());
    }
    return out;
  }

  /**
   * The plan that reads a listing's files as Parquet with the given (field-id carrying) schema,
   * through RowGroupParquetFormat (Spark's Parquet reader, restricted to the row groups its option
   * lists when the caller gives one); options are "key NUL value" pairs of the same string form.
   * {@code estimatedBytes}, when not negative, is
   * the size Spark's planner sees (sizeInBytes) instead of the files' lengths: the caller's
   * estimate of the rows in memory, as Iceberg's scans report rows times the schema's width.
   */
  public static LogicalPlan read(SparkSession session, String listing, StructType schema, String options,
      long estimatedBytes) throws java.io.IOException {
    return read(session, listing, schema, options, estimatedBytes, null);
  }

  /**
   * {@link #read}, the rows {@code deletes} deletes dropped inside the reader
   * (io.lakerules.PositionDeletesParquetFormat, which reads the row groups format's spans too).
   */
  public static LogicalPlan read(SparkSession session, String listing, StructType schema, String options,
      long estimatedBytes, io.lakerules.functions.PositionDeleteSet deletes) throws java.io.IOException {
    return read(session, listing, schema, options, estimatedBytes, deletes, null);
  }

  /**
   * {@link #read}, and with {@code lineage} (not null: each listed file's first_row_id and data
   * sequence number, NUL-separated, in the listing's order; an empty first_row_id is null) the
   * read's {@code _metadata} has them as the constant fields RowGroupParquetFormat.FIRST_ROW_ID and
   * DATA_SEQUENCE (Iceberg v3's row lineage: lakerules.scan.lineage).
   */
  public static LogicalPlan read(SparkSession session, String listing, StructType schema, String options,
      long estimatedBytes, io.lakerules.functions.PositionDeleteSet deletes, String lineage)
      throws java.io.IOException {
    Configuration conf = session.sessionState().newHadoopConf();
    LakeFileIndex index = of(listing, conf);
    index.estimate = estimatedBytes;
    boolean lineageRead = lineage != null;
    if (lineageRead) {
      index.constants = lineageConstants(lineage, index.files.length);
    }
    // RowGroupParquetFormat reads whole files too (without its option), row indexes counted
    FileFormat fileFormat = deletes != null ? new PositionDeletesParquetFormat(deletes, lineageRead)
        : new RowGroupParquetFormat(lineageRead);
    scala.collection.immutable.Map<String, String> opts = new scala.collection.immutable.HashMap<>();
    String[] kv = split(options);
    for (int i = 0; i + 1 < kv.length; i += 2) {
      opts = opts.updated(kv[i], kv[i + 1]);
    }
    if (conf.get(VECTORED_IO) == null && !opts.contains(VECTORED_IO) && index.allLocal()) {
      opts = opts.updated(VECTORED_IO, "false");
    }
    if (lineageRead) {  // ParquetFileFormat equals any ParquetFileFormat (below): a relation with these fields differs
      opts = opts.updated(LINEAGE_OPTION, "true");
    }
    if (deletes != null) {
      // ParquetFileFormat equals any ParquetFileFormat: the option tells a relation of the same
      // files without these deletes (e.g. another snapshot's) from this one
      opts = opts.updated(DELETES_OPTION, Long.toString(deletes.id()));
    }
    HadoopFsRelation relation = new HadoopFsRelation(index, new StructType(), schema, scala.Option.empty(),
        fileFormat, opts, session);
    return ((org.apache.spark.sql.classic.SparkSession) session).baseRelationToDataFrame(relation)
        .queryExecution().analyzed();
  }

  @SuppressWarnings("unchecked")
  private static scala.collection.immutable.Map<String, Object>[] lineageConstants(String joined, int files) {
    String[] parts = split(joined);
    if (parts.length != 2 * files) {
      throw new IllegalArgumentException("lakerules: " + parts.length + " lineage values for " + files + " files");
    }
    scala.collection.immutable.Map<String, Object>[] out = new scala.collection.immutable.Map[files];
    for (int i = 0; i < files; i++) {
      java.util.Map<String, Object> values = new HashMap<>(4);
      values.put(RowGroupParquetFormat.FIRST_ROW_ID, parts[2 * i].isEmpty() ? null : Long.valueOf(parts[2 * i]));
      values.put(RowGroupParquetFormat.DATA_SEQUENCE, Long.valueOf(parts[2 * i + 1]));
      out[i] = scala.collection.immutable.Map$.MODULE$.from(scala.jdk.javaapi.CollectionConverters.asScala(values));
    }
    return out;
  }

  /**
   * The rows the manifests record for a file, by the name Spark's reader gives it
   * (PartitionedFile.urlEncodedPath), or -1 for a file this index does not list.
   */
  public synchronized long rowsOf(String sparkName) {
    if (rowsByName == null) {
      rowsByName = new HashMap<>(files.length * 2);
      for (int i = 0; i < files.length; i++) {
        rowsByName.put(SparkPath.fromPath(files[i].getPath()).urlEncoded(), rows[i]);
      }
    }
    Long n = rowsByName.get(sparkName);
    return n == null ? -1 : n;
  }

  /** The name _metadata.file_path gives each file, in the listing's order, NUL-separated. */
  public String names() {
    Path[] paths = new Path[files.length];
    for (int i = 0; i < files.length; i++) {
      paths[i] = files[i].getPath();
    }
    return join(paths);
  }

  /**
   * The names _metadata.file_path gives these files (NUL-separated paths in, NUL-separated names
   * out, in order): the qualified path as a URI, as Spark builds it (file:/x for file:///x and
   * /x, URL-encoded). One call for all files, no file system access beyond qualifying.
   */
  public static String namesOf(String paths, Configuration conf) throws java.io.IOException {
    return join(qualify(split(paths), conf));
  }

  private static String join(Path[] paths) {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < paths.length; i++) {
      if (i > 0) {
        out.append('\0');
      }
      out.append(SparkPath.fromPath(paths[i]).urlEncoded());
    }
    return out.toString();
  }

  @Override
  public Seq<Path> rootPaths() {
    return roots;
  }

  @Override
  public Seq<PartitionDirectory> listFiles(Seq<Expression> partitionFilters, Seq<Expression> dataFilters) {
    List<FileStatusWithMetadata> out = new ArrayList<>(files.length);
    scala.collection.immutable.Map<String, Object> none = scala.collection.immutable.Map$.MODULE$.empty();
    for (int i = 0; i < files.length; i++) {
      out.add(new FileStatusWithMetadata(files[i], constants != null ? constants[i] : none));
    }
    PartitionDirectory dir = new PartitionDirectory(InternalRow.empty(),
        scala.jdk.javaapi.CollectionConverters.asScala(out).toList());
    return scala.jdk.javaapi.CollectionConverters.asScala(List.of(dir)).toList();
  }

  @Override
  public String[] inputFiles() {
    String[] out = new String[files.length];
    for (int i = 0; i < files.length; i++) {
      out[i] = files[i].getPath().toString();
    }
    return out;
  }

  @Override
  public void refresh() {
    // The files of a snapshot never change.
  }

  @Override
  public long sizeInBytes() {
    return estimate >= 0 ? estimate : size;
  }

  @Override
  public StructType partitionSchema() {
    return new StructType();
  }

  /** Indexes of the same files (paths and lengths, in order) are equal: plans over them compare equal. */
  @Override
  public boolean equals(Object other) {
    if (this == other) {
      return true;
    }
    if (!(other instanceof LakeFileIndex) || ((LakeFileIndex) other).files.length != files.length) {
      return false;
    }
    FileStatus[] theirs = ((LakeFileIndex) other).files;
    for (int i = 0; i < files.length; i++) {
      if (!files[i].getPath().equals(theirs[i].getPath()) || files[i].getLen() != theirs[i].getLen()) {
        return false;
      }
    }
    return true;
  }

  @Override
  public int hashCode() {
    return hash;
  }

  @Override
  public String toString() {
    return "LakeFileIndex(" + files.length + " files, " + size + " bytes)";
  }
}
