package io.lakerules;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.PrimitiveIterator;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.metadata.BlockMetaData;
import org.apache.parquet.hadoop.metadata.ColumnChunkMetaData;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.internal.column.columnindex.OffsetIndex;
import org.apache.parquet.internal.filter2.columnindex.RowRanges;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.Type;

/**
 * Late materialization at page granularity (lakerules.scan.latemat, phase two).
 *
 * <p>{@link #plan} runs on the driver, once per query for every file with matches: from each
 * file's footer and the offset indexes of the row groups holding matches, it writes the spans
 * {@link RowGroupParquetFormat} reads (a row group's byte span plus the row ranges of its matched
 * rows) and counts what phase two reads: row groups, pages and bytes of the columns read.
 *
 * <p>{@link #narrow} runs on the executors: given the iterator Spark's vectorized Parquet reader
 * returns for one row group (not yet read: Spark reads pages on the first batch), it makes the
 * reader fetch that row group through {@code ParquetFileReader.readFilteredRowGroup(0, ranges)}:
 * parquet-mr then reads, of every column, only the pages overlapping the ranges (the offset
 * indexes say where they are), and the vectorized reader decodes only the rows in the ranges,
 * with their row indexes (_metadata.row_index), as it does for Spark's own column-index
 * filtering. The reader's row-group source is a package-private field of Spark's reader, so it
 * is reached by reflection; when anything is not as expected (another Spark, the row-based
 * reader, a file without offset indexes) the row group is read whole, which is correct too:
 * phase two's semi-join keeps only the matched rows either way.
 */
public final class PageRanges {
  private PageRanges() {}

  // ---- the driver: spans and counts --------------------------------------------------------

  /**
   * {@code request}: one file a line, {@code <file name as _metadata.file_path shows it>\t<row
   * indexes, comma separated, ascending>}; {@code fieldIds}: the top-level field ids of the
   * columns read (comma separated; empty: every column). Returns one line per file:
   * {@code <file>\t<spans>\t<groups hit> <groups> <pages hit> <pages of the groups hit> <bytes
   * hit> <bytes> <pages covered>}, spans as {@link RowGroupParquetFormat} takes them. Bytes and
   * pages are those of the columns read (compressed, dictionary pages included); the pages
   * covered are those of the groups hit that start at or before the group's last listed row
   * (a prefix of a file's matches: the pages it ran through).
   */
  public static String plan(Configuration conf, String request, String fieldIds) throws IOException {
    Set<Integer> ids = new HashSet<>();
    for (String s : fieldIds.split(",")) {
      if (!s.isEmpty()) {
        ids.add(Integer.parseInt(s));
      }
    }
    StringBuilder out = new StringBuilder();
    for (String line : request.split("\n")) {
      if (line.isEmpty()) {
        continue;
      }
      int tab = line.lastIndexOf('\t');
      String name = line.substring(0, tab);
      long[] rows = parseLongs(line.substring(tab + 1));
      out.append(name).append('\t').append(planFile(conf, name, rows, ids)).append('\n');
    }
    return out.toString();
  }

  private static long[] parseLongs(String csv) {
    if (csv.isEmpty()) {
      return new long[0];
    }
    String[] parts = csv.split(",");
    long[] out = new long[parts.length];
    for (int i = 0; i < parts.length; i++) {
      out[i] = Long.parseLong(parts[i]);
    }
    Arrays.sort(out);
    return out;
  }

  private static String planFile(Configuration conf, String name, long[] rows, Set<Integer> ids) throws IOException {
    Path path = new Path(RowGroupParquetFormat.key(name));
    try (ParquetFileReader reader = ParquetFileReader.open(HadoopInputFile.fromPath(path, conf))) {
      List<BlockMetaData> blocks = reader.getRowGroups();
      Set<String> read = columnsRead(reader.getFileMetaData().getSchema(), ids);
      StringBuilder spans = new StringBuilder();
      long groupsHit = 0, pagesHit = 0, pagesOfHit = 0, bytesHit = 0, bytes = 0, pagesCovered = 0;
      long first = 0;
      int r = 0;
      for (int b = 0; b < blocks.size(); b++) {
        BlockMetaData block = blocks.get(b);
        long count = block.getRowCount();
        long from = r;
        while (r < rows.length && rows[r] < first + count) {
          r++;
        }
        List<ColumnChunkMetaData> chunks = new ArrayList<>();
        for (ColumnChunkMetaData c : block.getColumns()) {
          if (read == null || read.contains(c.getPath().toDotString())) {
            chunks.add(c);
            bytes += c.getTotalSize();
          }
        }
        if (r > from) {
          long[] local = new long[(int) (r - from)];
          for (int i = 0; i < local.length; i++) {
            local[i] = rows[(int) from + i] - first;
          }
          groupsHit++;
          boolean indexed = true;
          for (ColumnChunkMetaData c : block.getColumns()) {
            indexed &= c.getOffsetIndexReference() != null;
          }
          java.util.Map<ColumnChunkMetaData, OffsetIndex> indexes = indexed ? offsetIndexes(reader, path, conf, chunks) : null;
          for (ColumnChunkMetaData c : chunks) {
            OffsetIndex index = indexed ? indexes.get(c) : null;
            if (index == null) {
              pagesHit++;
              pagesOfHit++;
              pagesCovered++;
              bytesHit += c.getTotalSize();
              continue;
            }
            long start = chunkStart(c);
            bytesHit += Math.max(0, index.getOffset(0) - start);  // the dictionary page, read with any page
            int k = 0;
            for (int p = 0; p < index.getPageCount(); p++) {
              long lo = index.getFirstRowIndex(p);
              long hi = index.getLastRowIndex(p, count);
              while (k < local.length && local[k] < lo) {
                k++;
              }
              pagesOfHit++;
              if (lo <= local[local.length - 1]) {
                pagesCovered++;
              }
              if (k < local.length && local[k] <= hi) {
                pagesHit++;
                bytesHit += index.getCompressedPageSize(p);
              }
            }
          }
          // the row group's bytes: they hold its midpoint, by which Parquet picks the row groups of a split
          long end = block.getStartingPos() + Math.max(1, block.getCompressedSize());
          if (spans.length() > 0) {
            spans.append(',');
          }
          spans.append(block.getStartingPos()).append(':').append(end);
          if (indexed) {
            spans.append(':').append(ranges(local));
          }
        }
        first += count;
      }
      return spans + "\t" + groupsHit + " " + blocks.size() + " " + pagesHit + " " + pagesOfHit + " "
          + bytesHit + " " + bytes + " " + pagesCovered;
    }
  }

  private static long chunkStart(ColumnChunkMetaData c) {
    long start = c.getFirstDataPageOffset();
    if (c.hasDictionaryPage() && c.getDictionaryPageOffset() > 0 && c.getDictionaryPageOffset() < start) {
      start = c.getDictionaryPageOffset();
    }
    return start;
  }

  /**
   * The offset indexes of these column chunks. Parquet writers put a file's offset indexes
   * together (before the footer), so they are read in one read of the span holding them,
   * rather than one read each; a span over 16 MiB, or anything unexpected, reads them one by one.
   */
  private static java.util.Map<ColumnChunkMetaData, OffsetIndex> offsetIndexes(
      ParquetFileReader reader, Path path, Configuration conf, List<ColumnChunkMetaData> chunks) throws IOException {
    java.util.Map<ColumnChunkMetaData, OffsetIndex> out = new java.util.HashMap<>();
    long lo = Long.MAX_VALUE, hi = 0;
    for (ColumnChunkMetaData c : chunks) {
      lo = Math.min(lo, c.getOffsetIndexReference().getOffset());
      hi = Math.max(hi, c.getOffsetIndexReference().getOffset() + c.getOffsetIndexReference().getLength());
    }
    if (!chunks.isEmpty() && hi - lo <= 16L << 20) {
      try (org.apache.hadoop.fs.FSDataInputStream in = path.getFileSystem(conf).open(path)) {
        byte[] bytes = new byte[(int) (hi - lo)];
        in.readFully(lo, bytes);
        for (ColumnChunkMetaData c : chunks) {
          int at = (int) (c.getOffsetIndexReference().getOffset() - lo);
          out.put(c, org.apache.parquet.format.converter.ParquetMetadataConverter.fromParquetOffsetIndex(
              org.apache.parquet.format.Util.readOffsetIndex(
                  new java.io.ByteArrayInputStream(bytes, at, c.getOffsetIndexReference().getLength()))));
        }
        return out;
      } catch (IOException | RuntimeException e) {
        out.clear();  // e.g. an encrypted file: parquet-mr's own reader below knows how
      }
    }
    for (ColumnChunkMetaData c : chunks) {
      out.put(c, reader.readOffsetIndex(c));
    }
    return out;
  }

  /** The leaf columns (dotted paths) under the top-level fields with these ids; null: all. */
  private static Set<String> columnsRead(MessageType schema, Set<Integer> ids) {
    if (ids.isEmpty()) {
      return null;
    }
    Set<String> tops = new HashSet<>();
    for (Type t : schema.getFields()) {
      if (t.getId() != null && ids.contains(t.getId().intValue())) {
        tops.add(t.getName());
      }
    }
    Set<String> out = new HashSet<>();
    for (org.apache.parquet.column.ColumnDescriptor d : schema.getColumns()) {
      if (tops.contains(d.getPath()[0])) {
        out.add(String.join(".", d.getPath()));
      }
    }
    return out;
  }

  /** Ascending row indexes as {@code a-b;c;...} (runs of consecutive rows as one range). */
  static String ranges(long[] rows) {
    StringBuilder out = new StringBuilder();
    int i = 0;
    while (i < rows.length) {
      int j = i;
      while (j + 1 < rows.length && rows[j + 1] <= rows[j] + 1) {
        j++;
      }
      if (out.length() > 0) {
        out.append(';');
      }
      out.append(rows[i]);
      if (rows[j] != rows[i]) {
        out.append('-').append(rows[j]);
      }
      i = j + 1;
    }
    return out.toString();
  }

  /** {@code a-b;c;...} -> (first, last) pairs. */
  static long[] parseRanges(String text) {
    String[] parts = text.split(";");
    long[] out = new long[parts.length * 2];
    for (int i = 0; i < parts.length; i++) {
      int dash = parts[i].indexOf('-');
      out[2 * i] = Long.parseLong(dash < 0 ? parts[i] : parts[i].substring(0, dash));
      out[2 * i + 1] = Long.parseLong(dash < 0 ? parts[i] : parts[i].substring(dash + 1));
    }
    return out;
  }

  // ---- the executors: read only those rows' pages ------------------------------------------------

  /** RowRanges holding exactly the given (first, last) pairs of a row group of {@code count} rows. */
  static RowRanges rowRanges(long[] pairs, long count) {
    OffsetIndex spans = new OffsetIndex() {
      @Override public int getPageCount() { return pairs.length / 2; }
      @Override public long getOffset(int i) { return 0; }
      @Override public int getCompressedPageSize(int i) { return 0; }
      @Override public long getFirstRowIndex(int i) { return pairs[2 * i]; }
      @Override public long getLastRowIndex(int i, long rowCount) { return Math.min(pairs[2 * i + 1], rowCount - 1); }
    };
    PrimitiveIterator.OfInt all = java.util.stream.IntStream.range(0, pairs.length / 2).iterator();
    return RowRanges.create(count, all, spans);
  }

  private static volatile Field[] fields;
  private static final java.util.concurrent.atomic.AtomicLong NARROWED = new java.util.concurrent.atomic.AtomicLong();
  private static final java.util.concurrent.atomic.AtomicLong WHOLE = new java.util.concurrent.atomic.AtomicLong();

  /** Row groups read narrowed to their rows' pages, and read whole, by this JVM's executors. */
  public static long[] counts() {
    return new long[] {NARROWED.get(), WHOLE.get()};
  }

  private static Field[] fields() throws ReflectiveOperationException {
    Field[] f = fields;
    if (f == null) {
      Field rowReader = org.apache.spark.sql.execution.datasources.RecordReaderIterator.class.getDeclaredField("rowReader");
      Class<?> base = org.apache.spark.sql.execution.datasources.parquet.SpecificParquetRecordReaderBase.class;
      Field source = base.getDeclaredField("reader");
      Field total = base.getDeclaredField("totalRowCount");
      Class<?> impl = Class.forName(base.getName() + "$ParquetRowGroupReaderImpl", false, base.getClassLoader());
      Field file = impl.getDeclaredField("reader");
      for (Field x : new Field[] {rowReader, source, total, file}) {
        x.setAccessible(true);
      }
      fields = f = new Field[] {rowReader, source, total, file};
    }
    return f;
  }

  /**
   * Makes Spark's reader of one row group (the iterator its Parquet format returned, not read
   * yet) read only the rows in {@code pairs} (row indexes within the row group, (first, last)
   * pairs), and only their pages. Returns whether it could; if not, the iterator is unchanged.
   */
  static boolean narrow(Object iterator, long[] pairs) {
    boolean done = tryNarrow(iterator, pairs);
    (done ? NARROWED : WHOLE).incrementAndGet();
    return done;
  }

  private static boolean tryNarrow(Object iterator, long[] pairs) {
    try {
      if (!(iterator instanceof org.apache.spark.sql.execution.datasources.RecordReaderIterator)) {
        return false;
      }
      Field[] f = fields();
      Object recordReader = f[0].get(iterator);
      if (!(recordReader instanceof org.apache.spark.sql.execution.datasources.parquet.VectorizedParquetRecordReader)) {
        return false;
      }
      Object source = f[1].get(recordReader);
      if (source == null || !f[3].getDeclaringClass().isInstance(source)) {
        return false;
      }
      ParquetFileReader file = (ParquetFileReader) f[3].get(source);
      List<BlockMetaData> blocks = file.getRowGroups();
      if (blocks.size() != 1 || f[2].getLong(recordReader) != blocks.get(0).getRowCount()) {
        return false;
      }
      for (ColumnChunkMetaData c : blocks.get(0).getColumns()) {
        if (c.getOffsetIndexReference() == null) {
          return false;
        }
      }
      RowRanges ranges = rowRanges(pairs, blocks.get(0).getRowCount());
      Class<?> type = f[1].getType();
      InvocationHandler handler = new InvocationHandler() {
        private boolean done = false;

        @Override
        public Object invoke(Object proxy, java.lang.reflect.Method method, Object[] args) throws Throwable {
          switch (method.getName()) {
            case "readNextRowGroup":
              if (done) {
                return null;
              }
              done = true;
              return file.readFilteredRowGroup(0, ranges);
            case "close":
              file.close();
              return null;
            case "hashCode":
              return System.identityHashCode(proxy);
            case "equals":
              return proxy == args[0];
            case "toString":
              return "lakerules row ranges " + ranges;
            default:
              throw new UnsupportedOperationException(method.getName());
          }
        }
      };
      Object replacement = Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, handler);
      f[1].set(recordReader, replacement);
      f[2].setLong(recordReader, ranges.rowCount());
      return true;
    } catch (ReflectiveOperationException | RuntimeException e) {
      return false;
    }
  }
}
