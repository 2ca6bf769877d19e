package io.lakerules.functions;

import java.io.Serializable;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;

import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.objects.Invoke;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.ObjectType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.array.ByteArrayMethods;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The equality deletes of a scan over one set of equality columns, as hash tables of their keys,
 * broadcast once to the executors. Each key keeps the highest data sequence number of the delete
 * rows that carry it, per scope: one table for the deletes of unpartitioned specs (they apply to
 * every data file) and one per (spec, partition) of the others. A data row of a file with data
 * sequence number s is deleted when its key is in the global table or in its partition's table
 * with a sequence number above s (Iceberg's rule: a delete applies to strictly older data).
 *
 * <p>Keys are compared null-safely (a NULL in a delete row deletes the rows whose value is NULL):
 * either one long (integral, date and timestamp-with-zone columns, a NULL apart), or the bytes of
 * the key columns as an UnsafeRow (the byte equality Spark groups by; the caller normalizes
 * -0.0 and NaN as Spark's joins do).
 *
 * <p>{@link #filterLive} puts a Filter over the data rows, whose test ({@link Probe#isLive}) finds
 * the row's file (one object comparison while the file stays the same), then probes one or two
 * tables: no shuffle, no join.
 */
public final class EqualityDeleteSet implements Serializable {
  private static final long serialVersionUID = 1L;

  private final Broadcast<Tables> tables;
  private final long rows;
  private final long keys;
  private final long bytes;
  private final boolean longKeys;

  private EqualityDeleteSet(Broadcast<Tables> tables, long rows, Tables t) {
    this.tables = tables;
    this.rows = rows;
    this.keys = t.keys();
    this.bytes = t.bytes();
    this.longKeys = t.keyTypes == null;
  }

  /** The tables of every scope: index scopes() is the global one. */
  static final class Tables implements Serializable {
    private static final long serialVersionUID = 1L;
    final Table[] byScope;   // [scope] (null: no deletes there); the last one is global
    final DataType[] keyTypes;  // null: long keys
    final long maxSeq;

    Tables(Table[] byScope, DataType[] keyTypes, long maxSeq) {
      this.byScope = byScope;
      this.keyTypes = keyTypes;
      this.maxSeq = maxSeq;
    }

    long keys() {
      long n = 0;
      for (Table t : byScope) {
        n += t == null ? 0 : t.size();
      }
      return n;
    }

    long bytes() {
      long n = 0;
      for (Table t : byScope) {
        n += t == null ? 0 : t.bytes();
      }
      return n;
    }
  }

  interface Table extends Serializable {
    long size();

    long bytes();
  }

  // ---- building ---------------------------------------------------------------------------------

  /**
   * Runs {@code rows}, a plan of (key, delete sequence number BIGINT, scope INT) rows where the
   * key is a BIGINT (long keys) or a struct of the key columns, and scope is 0 to scopes - 1 or
   * -1 for a global delete; collects them (each task's rows as flat arrays: one stage, no
   * shuffle), builds the tables on the driver and broadcasts them.
   */
  public static EqualityDeleteSet collect(org.apache.spark.sql.classic.SparkSession session, LogicalPlan rows,
                                          int scopes) {
    org.apache.spark.sql.classic.Dataset<?> ds = org.apache.spark.sql.classic.Dataset.ofRows(session, rows);
    DataType keyType = ds.schema().fields()[0].dataType();
    boolean longKeys = keyType instanceof org.apache.spark.sql.types.LongType;
    DataType[] types = null;
    if (!longKeys) {
      StructField[] fields = ((StructType) keyType).fields();
      types = new DataType[fields.length];
      for (int i = 0; i < fields.length; i++) {
        types[i] = fields[i].dataType();
      }
    }
    final DataType[] keyTypes = types;
    org.apache.spark.rdd.RDD<InternalRow> rdd = ds.queryExecution().executedPlan().execute();
    List<Part> parts = rdd.toJavaRDD().mapPartitions(it -> partition(it, keyTypes)).collect();
    long total = 0;
    long maxSeq = 0;
    int[] perScope = new int[scopes + 1];
    for (Part p : parts) {
      total += p.size;
      for (int i = 0; i < p.size; i++) {
        perScope[p.scopes[i] < 0 ? scopes : p.scopes[i]]++;
        maxSeq = Math.max(maxSeq, p.seqs[i]);
      }
    }
    Table[] byScope = new Table[scopes + 1];
    for (int s = 0; s <= scopes; s++) {
      if (perScope[s] > 0) {
        byScope[s] = longKeys ? new LongTable(perScope[s]) : new BytesTable(perScope[s]);
      }
    }
    for (Part p : parts) {
      for (int i = 0; i < p.size; i++) {
        Table t = byScope[p.scopes[i] < 0 ? scopes : p.scopes[i]];
        if (longKeys) {
          ((LongTable) t).put(p.longs[i], p.nulls[i], p.seqs[i]);
        } else {
          int at = p.offsets[i];
          ((BytesTable) t).put(p.data, Platform.BYTE_ARRAY_OFFSET + at, p.offsets[i + 1] - at, p.seqs[i]);
        }
      }
    }
    for (Table t : byScope) {
      if (t instanceof BytesTable) {
        ((BytesTable) t).trim();
      }
    }
    Tables tables = new Tables(byScope, keyTypes, maxSeq);
    Broadcast<Tables> b = session.sparkContext().broadcast(tables, scala.reflect.ClassTag$.MODULE$.apply(Tables.class));
    return new EqualityDeleteSet(b, total, tables);
  }

  /** One task's delete rows, flat. */
  static final class Part implements Serializable {
    private static final long serialVersionUID = 1L;
    int size;
    long[] seqs = new long[64];
    int[] scopes = new int[64];
    long[] longs;          // long keys
    boolean[] nulls;
    byte[] data;           // other keys: UnsafeRow bytes, entry i at offsets[i] until offsets[i + 1]
    int[] offsets;
    int used;
  }

  private static java.util.Iterator<Part> partition(java.util.Iterator<InternalRow> rows, DataType[] keyTypes) {
    Part p = new Part();
    UnsafeProjection project = null;
    if (keyTypes == null) {
      p.longs = new long[64];
      p.nulls = new boolean[64];
    } else {
      p.data = new byte[1024];
      p.offsets = new int[65];
      project = UnsafeProjection.create(keyTypes);
    }
    while (rows.hasNext()) {
      InternalRow r = rows.next();
      if (r.isNullAt(1) || r.getLong(1) <= 0) {
        continue;  // a delete with sequence number 0 applies to no data (data sequence numbers are >= 0)
      }
      int i = p.size;
      if (i == p.seqs.length) {
        int n = i * 2;
        p.seqs = Arrays.copyOf(p.seqs, n);
        p.scopes = Arrays.copyOf(p.scopes, n);
        if (keyTypes == null) {
          p.longs = Arrays.copyOf(p.longs, n);
          p.nulls = Arrays.copyOf(p.nulls, n);
        } else {
          p.offsets = Arrays.copyOf(p.offsets, n + 1);
        }
      }
      p.seqs[i] = r.getLong(1);
      p.scopes[i] = r.isNullAt(2) ? -1 : r.getInt(2);
      if (keyTypes == null) {
        p.nulls[i] = r.isNullAt(0);
        p.longs[i] = p.nulls[i] ? 0 : r.getLong(0);
      } else {
        UnsafeRow u = project.apply(r.getStruct(0, keyTypes.length));
        int n = u.getSizeInBytes();
        if (p.used + n > p.data.length) {
          p.data = Arrays.copyOf(p.data, Math.max(p.data.length * 2, p.used + n));
        }
        u.writeToMemory(p.data, Platform.BYTE_ARRAY_OFFSET + p.used);
        p.used += n;
        p.offsets[i + 1] = p.used;
      }
      p.size++;
    }
    return java.util.Collections.singletonList(p).iterator();
  }

  // ---- the tables -------------------------------------------------------------------------------

  private static int capacity(int n) {
    int c = 16;
    while (c < 2L * n) {
      c <<= 1;
    }
    return c;
  }

  private static long mix(long k) {
    k ^= k >>> 33;
    k *= 0xff51afd7ed558ccdL;
    k ^= k >>> 33;
    k *= 0xc4ceb9fe1a85ec53L;
    k ^= k >>> 33;
    return k;
  }

  /**
   * A blocked Bloom filter in front of a table: 16 bits a key, three bits of one 64-bit word
   * per key (about 2% false positives). A probe of a table of a million keys misses the CPU's
   * caches (measured: 130-160 ns a probe of a 32 MB table, 2 loaded cores); the filter's 2 MB
   * answer most rows, which match no delete, in one read that mostly hits them.
   */
  static final class Bloom implements Serializable {
    private static final long serialVersionUID = 1L;
    final long[] words;
    final int mask;

    Bloom(int n) {
      int w = 1;
      while (w < n / 4 + 1) {  // 16 bits a key: n / 4 words
        w <<= 1;
      }
      words = new long[w];
      mask = w - 1;
    }

    private static long bits(long h) {
      return (1L << (h & 63)) | (1L << ((h >>> 6) & 63)) | (1L << ((h >>> 12) & 63));
    }

    void add(long h) {
      words[(int) (h >>> 32) & mask] |= bits(h);
    }

    boolean mayContain(long h) {
      long b = bits(h);
      return (words[(int) (h >>> 32) & mask] & b) == b;
    }
  }

  /** Long keys by open addressing: key and sequence number side by side (sequence number 0: empty). */
  static final class LongTable implements Table {
    private static final long serialVersionUID = 1L;
    final long[] slots;
    final int mask;
    final Bloom bloom;
    long nullSeq;
    int size;

    LongTable(int n) {
      int c = capacity(n);
      slots = new long[2 * c];
      mask = c - 1;
      bloom = new Bloom(n);
    }

    void put(long key, boolean isNull, long seq) {
      if (isNull) {
        if (nullSeq == 0) {
          size++;
        }
        nullSeq = Math.max(nullSeq, seq);
        return;
      }
      long h = mix(key);
      bloom.add(h);
      int i = (int) h & mask;
      while (true) {
        long s = slots[2 * i + 1];
        if (s == 0) {
          slots[2 * i] = key;
          slots[2 * i + 1] = seq;
          size++;
          return;
        }
        if (slots[2 * i] == key) {
          slots[2 * i + 1] = Math.max(s, seq);
          return;
        }
        i = (i + 1) & mask;
      }
    }

    /** The highest sequence number of a delete of this key, 0 if none. */
    long seq(long key, boolean isNull) {
      if (isNull) {
        return nullSeq;
      }
      long h = mix(key);
      if (!bloom.mayContain(h)) {
        return 0;
      }
      int i = (int) h & mask;
      while (true) {
        long s = slots[2 * i + 1];
        if (s == 0 || slots[2 * i] == key) {
          return s;
        }
        i = (i + 1) & mask;
      }
    }

    public long size() {
      return size;
    }

    public long bytes() {
      return 8L * slots.length + 8L * bloom.words.length + 48;
    }
  }

  /** Keys as UnsafeRow bytes in one array, found through an open-addressing table of entry numbers. */
  static final class BytesTable implements Table {
    private static final long serialVersionUID = 1L;
    byte[] data = new byte[1024];
    int used;
    int[] offsets;  // entry e at offsets[e] until offsets[e + 1]
    long[] seqs;
    int[] hashes;
    final int[] table;  // entry + 1, 0: empty
    final int mask;
    final Bloom bloom;
    int size;

    BytesTable(int n) {
      int c = capacity(n);
      table = new int[c];
      mask = c - 1;
      bloom = new Bloom(n);
      offsets = new int[n + 1];
      seqs = new long[n];
      hashes = new int[n];
    }

    void put(Object base, long offset, int len, long seq) {
      int h = Murmur3_x86_32.hashUnsafeWords(base, offset, len, 42);
      int i = h & mask;
      while (true) {
        int e = table[i] - 1;
        if (e < 0) {
          break;
        }
        if (hashes[e] == h && same(e, base, offset, len)) {
          seqs[e] = Math.max(seqs[e], seq);
          return;
        }
        i = (i + 1) & mask;
      }
      if (used + len > data.length) {
        data = Arrays.copyOf(data, Math.max(data.length * 2, used + len));
      }
      Platform.copyMemory(base, offset, data, Platform.BYTE_ARRAY_OFFSET + used, len);
      int e = size++;
      offsets[e] = used;
      used += len;
      offsets[e + 1] = used;
      seqs[e] = seq;
      hashes[e] = h;
      table[i] = e + 1;
      bloom.add(mix(h));
    }

    /** The key bytes' array cut to what they use (it grows by doubling while the table is built). */
    void trim() {
      data = Arrays.copyOf(data, used);
    }

    private boolean same(int e, Object base, long offset, int len) {
      int at = offsets[e];
      return offsets[e + 1] - at == len
          && ByteArrayMethods.arrayEquals(data, Platform.BYTE_ARRAY_OFFSET + at, base, offset, len);
    }

    long seq(UnsafeRow key) {
      Object base = key.getBaseObject();
      long offset = key.getBaseOffset();
      int len = key.getSizeInBytes();
      int h = key.hashCode();  // Murmur3 of its words, seed 42: as put computes it
      if (!bloom.mayContain(mix(h))) {
        return 0;
      }
      int i = h & mask;
      while (true) {
        int e = table[i] - 1;
        if (e < 0) {
          return 0;
        }
        if (hashes[e] == h && same(e, base, offset, len)) {
          return seqs[e];
        }
        i = (i + 1) & mask;
      }
    }

    public long size() {
      return size;
    }

    public long bytes() {
      return data.length + 4L * offsets.length + 8L * seqs.length + 4L * hashes.length + 4L * table.length + 8L * bloom.words.length + 80;
    }
  }

  // ---- probing ----------------------------------------------------------------------------------

  /**
   * Filter(isLive(file, key)) over data: its rows that no delete of this set removes. Each data
   * file named in {@code files} ("name NUL data sequence number NUL scope NUL ...", scope -1: a
   * partition without partitioned deletes) gets its rows tested; a file not named there fails the
   * task (the caller names every file it reads).
   */
  public LogicalPlan filterLive(LogicalPlan data, Attribute fileName, Attribute key, String files) {
    return new Filter(live(fileName, key, files), data);
  }

  /** Filter(NOT isLive(file, key)) over data: its rows that a delete of this set removes (as filterLive names files). */
  public LogicalPlan filterDeleted(LogicalPlan data, Attribute fileName, Attribute key, String files) {
    return new Filter(new org.apache.spark.sql.catalyst.expressions.Not(live(fileName, key, files)), data);
  }

  private Expression live(Attribute fileName, Attribute key, String files) {
    String[] parts = files.isEmpty() ? new String[0] : files.split("\0", -1);
    HashMap<String, long[]> byName = new HashMap<>();
    for (int i = 0; i + 2 < parts.length; i += 3) {
      byName.put(parts[i], new long[] {Long.parseLong(parts[i + 1]), Long.parseLong(parts[i + 2])});
    }
    Probe probe = new Probe(tables, byName);
    Expression target = Literal.create(probe, new ObjectType(Probe.class));
    // a long key goes as a non-NULL value and its NULL flag: Spark's Invoke returns NULL, whatever
    // propagateNull says, when a nullable argument of a primitive parameter is NULL (a Filter would
    // then drop a row whose key is NULL although no delete has a NULL key)
    Expression value = new org.apache.spark.sql.catalyst.expressions.Coalesce(
        scala.jdk.javaapi.CollectionConverters.asScala(List.<Expression>of(key, Literal.create(0L, DataTypes.LongType))).toList());
    List<Expression> args = longKeys ? List.of(fileName, value, new IsNull(key)) : List.of(fileName, key);
    scala.collection.immutable.Seq<Expression> seq = scala.jdk.javaapi.CollectionConverters.asScala(args).toList();
    scala.collection.immutable.Seq<org.apache.spark.sql.types.AbstractDataType> none =
        scala.collection.immutable.List$.MODULE$.empty();
    return new Invoke(target, "isLive", DataTypes.BooleanType, seq, none, false, false, true);
  }

  /** The per-row test: a plan's object, deserialized per task (its cursor state is the task's own). */
  public static final class Probe implements Serializable {
    private static final long serialVersionUID = 1L;
    private final Broadcast<Tables> tables;
    private final HashMap<String, long[]> files;

    private transient Tables t;
    private transient UTF8String file;  // a private copy of the current file's name
    private transient UTF8String seen;  // the object the caller passed for it
    private transient long dataSeq;
    private transient boolean none;     // no delete applies to the current file
    private transient Table scoped;
    private transient Table global;
    private transient UnsafeProjection project;

    Probe(Broadcast<Tables> tables, HashMap<String, long[]> files) {
      this.tables = tables;
      this.files = files;
    }

    private void locate(UTF8String fileName) {
      if (fileName == seen || (file != null && file.equals(fileName))) {
        seen = fileName;
        return;
      }
      if (t == null) {
        t = tables.value();
        if (t.keyTypes != null) {
          project = UnsafeProjection.create(t.keyTypes);
        }
      }
      file = fileName.clone();
      seen = fileName;
      long[] info = files.get(file.toString());
      if (info == null) {
        throw new IllegalStateException("lakerules: equality deletes: no sequence number for data file " + file);
      }
      dataSeq = info[0];
      int scope = (int) info[1];
      global = t.byScope[t.byScope.length - 1];
      scoped = scope >= 0 && scope < t.byScope.length - 1 ? t.byScope[scope] : null;
      none = dataSeq >= t.maxSeq || (global == null && scoped == null);
    }

    /** Whether a row of fileName whose key is key (isNull: the key is NULL) is not deleted. */
    public boolean isLive(UTF8String fileName, long key, boolean isNull) {
      if (fileName == null) {
        throw new IllegalStateException("lakerules: equality deletes: a row without its data file");
      }
      locate(fileName);
      if (none) {
        return true;
      }
      if (global != null && ((LongTable) global).seq(key, isNull) > dataSeq) {
        return false;
      }
      return scoped == null || ((LongTable) scoped).seq(key, isNull) <= dataSeq;
    }

    /** Whether a row of fileName whose key columns are key is not deleted. */
    public boolean isLive(UTF8String fileName, InternalRow key) {
      if (fileName == null) {
        throw new IllegalStateException("lakerules: equality deletes: a row without its data file");
      }
      locate(fileName);
      if (none) {
        return true;
      }
      UnsafeRow u = project.apply(key);
      if (global != null && ((BytesTable) global).seq(u) > dataSeq) {
        return false;
      }
      return scoped == null || ((BytesTable) scoped).seq(u) <= dataSeq;
    }
  }

  public long rows() {
    return rows;
  }

  public long keys() {
    return keys;
  }

  /** The tables' size in memory (their arrays). */
  public long bytes() {
    return bytes;
  }

  /** Drops the executors' copies. */
  public void release() {
    tables.unpersist(false);
  }

  @Override
  public String toString() {
    return "equality deletes: " + keys + " keys (" + rows + " rows, " + bytes + " bytes, "
        + (longKeys ? "long keys" : "row keys") + ")";
  }
}
