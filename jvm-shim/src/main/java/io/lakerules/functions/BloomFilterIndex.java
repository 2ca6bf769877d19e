package io.lakerules.functions;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.column.values.bloomfilter.BloomFilter;
import org.apache.parquet.hadoop.BloomFilterReader;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.metadata.BlockMetaData;
import org.apache.parquet.hadoop.metadata.ColumnChunkMetaData;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.io.api.Binary;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.PrimitiveType;
import org.apache.parquet.schema.Type;

/**
 * Which data files may hold a value of a column, from the Parquet bloom filters their writers
 * stored (one per row group), read on the driver while a scan is planned: a point query on a key
 * whose values every small CDC file spans (so that no file's bounds exclude it) then opens only
 * the files whose filters admit the value, instead of opening every file in a task to learn that
 * nothing matches.
 *
 * <p>Data files never change, so each file's filters for a column are read once per JVM and kept
 * (at most {@link #CACHE_BYTES} bytes of bit sets, least recently used dropped first); the files
 * not yet kept are read by {@link #THREADS} threads. The column is found by its Iceberg field id
 * (the Parquet schema's field ids), at the top level only. A file is kept, never dropped, when
 * anything is unknown: no bloom filter in some row group, no column with that id, another
 * physical type than the values', a file that cannot be read.
 */
public final class BloomFilterIndex {
  private BloomFilterIndex() {}

  /** Bytes of bit sets kept across queries, in the driver's JVM. */
  public static final long CACHE_BYTES = 128L << 20;

  /** Threads that read the files not yet kept. */
  public static final int THREADS = 8;

  /** A file's filters for one column: per row group a filter, or null where a row group has none. */
  private static final class Filters {
    final PrimitiveType.PrimitiveTypeName type; // null: no such column, or unreadable: keep the file
    final BloomFilter[] groups;
    final long bytes;

    Filters(PrimitiveType.PrimitiveTypeName type, BloomFilter[] groups) {
      this.type = type;
      this.groups = groups;
      long b = 64;
      for (BloomFilter g : groups) {
        b += g == null ? 8 : g.getBitsetSize() + 32;
      }
      this.bytes = b;
    }
  }

  /** A file that could not be read now: kept by the scan, and asked again next time. */
  private static final Filters UNREAD = new Filters(null, new BloomFilter[0]);

  private static final LinkedHashMap<String, Filters> CACHE = new LinkedHashMap<>(256, 0.75f, true);
  private static long cachedBytes = 0;
  private static ExecutorService pool;

  private static synchronized ExecutorService pool() {
    if (pool == null) {
      pool = Executors.newFixedThreadPool(THREADS, r -> {
        Thread t = new Thread(r, "lakerules-bloom-filters");
        t.setDaemon(true);
        return t;
      });
    }
    return pool;
  }

  private static synchronized Filters cached(String key) {
    return CACHE.get(key);
  }

  private static synchronized void keep(String key, Filters f) {
    if (f == UNREAD || f.bytes > CACHE_BYTES || CACHE.containsKey(key)) {
      return;
    }
    CACHE.put(key, f);
    cachedBytes += f.bytes;
    var it = CACHE.entrySet().iterator();
    while (cachedBytes > CACHE_BYTES && it.hasNext()) {
      Map.Entry<String, Filters> e = it.next();
      cachedBytes -= e.getValue().bytes;
      it.remove();
    }
  }

  /** Files whose filters are kept now (tests). */
  public static synchronized int cachedFiles() {
    return CACHE.size();
  }

  /** Drops what is kept (tests). */
  public static synchronized void clear() {
    CACHE.clear();
    cachedBytes = 0;
  }

  /**
   * For each of {@code paths} (joined by NUL characters), 1 when the file may hold one of
   * {@code values} (joined by NUL characters) in the top-level column of Iceberg field id
   * {@code fieldId}, 0 when its bloom filters exclude them all. {@code kind}: 'i' 32-bit integers
   * (also dates, as days), 'l' 64-bit integers, 's' strings.
   */
  public static byte[] mayContain(org.apache.spark.sql.classic.SparkSession session, String paths, int fieldId,
                                  String kind, String values) throws Exception {
    String[] files = paths.isEmpty() ? new String[0] : paths.split("\u0000", -1);
    String[] texts = values.isEmpty() ? new String[0] : values.split("\u0000", -1);
    byte[] out = new byte[files.length];
    Filters[] found = new Filters[files.length];
    List<Integer> missing = new ArrayList<>();
    for (int i = 0; i < files.length; i++) {
      found[i] = cached(files[i] + "\u0000" + fieldId);
      if (found[i] == null) {
        missing.add(i);
      }
    }
    if (!missing.isEmpty()) {
      Configuration conf = session.sessionState().newHadoopConf();
      List<Future<Filters>> reads = new ArrayList<>(missing.size());
      for (int i : missing) {
        String file = files[i];
        reads.add(pool().submit(() -> read(conf, file, fieldId)));
      }
      for (int k = 0; k < missing.size(); k++) {
        int i = missing.get(k);
        found[i] = reads.get(k).get();
        keep(files[i] + "\u0000" + fieldId, found[i]);
      }
    }
    // the values' hashes depend on the files' physical type only: computed once for each
    java.util.EnumMap<PrimitiveType.PrimitiveTypeName, long[]> hashed = new java.util.EnumMap<>(PrimitiveType.PrimitiveTypeName.class);
    for (int i = 0; i < files.length; i++) {
      Filters f = found[i];
      if (f.type == null) {
        out[i] = 1;
      } else if (f.groups.length == 0) {
        out[i] = 0;  // no row groups: no rows
      } else {
        long[] hashes = hashed.computeIfAbsent(f.type, t -> hashes(f.groups[0], t, kind.charAt(0), texts));
        out[i] = (byte) (hashes == null || admits(f, hashes) ? 1 : 0);
      }
    }
    return out;
  }

  /**
   * The hashes of {@code values} as a column of physical type {@code type} stores them, by the
   * filter's hash; null when such a column cannot be compared with values of that kind (then
   * its files are read). A value beyond a 32-bit column's range has no hash: no such row.
   */
  private static long[] hashes(BloomFilter filter, PrimitiveType.PrimitiveTypeName type, char kind, String[] values) {
    if ((type == PrimitiveType.PrimitiveTypeName.BINARY) != (kind == 's')
        || (type != PrimitiveType.PrimitiveTypeName.INT32 && type != PrimitiveType.PrimitiveTypeName.INT64
            && type != PrimitiveType.PrimitiveTypeName.BINARY)) {
      return null;
    }
    long[] out = new long[values.length];
    int n = 0;
    for (String v : values) {
      if (type == PrimitiveType.PrimitiveTypeName.BINARY) {
        out[n++] = filter.hash(Binary.fromConstantByteArray(v.getBytes(StandardCharsets.UTF_8)));
      } else if (type == PrimitiveType.PrimitiveTypeName.INT64) {
        out[n++] = filter.hash(Long.parseLong(v));
      } else {
        long x = Long.parseLong(v);
        if (x >= Integer.MIN_VALUE && x <= Integer.MAX_VALUE) {
          out[n++] = filter.hash((int) x);
        }
      }
    }
    return java.util.Arrays.copyOf(out, n);
  }

  /** Whether a row group's filter admits one of the hashes. */
  private static boolean admits(Filters f, long[] hashes) {
    for (BloomFilter g : f.groups) {
      for (long h : hashes) {
        if (g.findHash(h)) {
          return true;
        }
      }
    }
    return false;
  }

  private static Filters read(Configuration conf, String file, int fieldId) {
    try (ParquetFileReader reader = ParquetFileReader.open(HadoopInputFile.fromPath(new Path(file), conf))) {
      MessageType schema = reader.getFooter().getFileMetaData().getSchema();
      Type column = null;
      for (Type t : schema.getFields()) {
        if (t.getId() != null && t.getId().intValue() == fieldId) {
          column = t;
        }
      }
      if (column == null || !column.isPrimitive()) {
        return new Filters(null, new BloomFilter[0]);
      }
      List<BlockMetaData> blocks = reader.getRowGroups();
      BloomFilter[] groups = new BloomFilter[blocks.size()];
      for (int b = 0; b < groups.length; b++) {
        ColumnChunkMetaData chunk = null;
        for (ColumnChunkMetaData c : blocks.get(b).getColumns()) {
          if (c.getPath().size() == 1 && c.getPath().toArray()[0].equals(column.getName())) {
            chunk = c;
          }
        }
        if (chunk != null && chunk.getBloomFilterOffset() >= 0) {
          BloomFilterReader filters = reader.getBloomFilterDataReader(blocks.get(b));
          groups[b] = filters.readBloomFilter(chunk);
        }
        if (groups[b] == null) {
          return new Filters(null, new BloomFilter[0]); // a row group without a filter: read the file
        }
      }
      return new Filters(column.asPrimitiveType().getPrimitiveTypeName(), groups);
    } catch (IOException | RuntimeException e) {
      return UNREAD; // unknown: the file is read, and its reader reports
    }
  }
}
