package io.lakerules.functions;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;

/**
 * Decodes one Iceberg manifest on the driver into Arrow columns, one row per live entry, for
 * scan planning's manifest cache (lakerules.scan.manifest_columns): no Python object per entry.
 * The entry's scalar fields are columns of their own; its metric maps travel as one binary
 * value each (little-endian: per key an int key, then a long value, or an int length and the
 * bytes); split offsets and equality ids as little-endian longs and ints. Partition values are
 * columns p0.. of the kinds asked for (int, long, float, double, boolean, string; anything else
 * as its bytes), and the lower and upper bounds of the columns asked for are decoded from
 * Iceberg's single-value serialization (ManifestEntries.decode) into lower_ID and upper_ID.
 */
public final class ManifestColumns {
  private static final int DELETED = 2;
  private static final BufferAllocator ROOT = new RootAllocator(Long.MAX_VALUE);

  private ManifestColumns() {
  }

  /**
   * Writes the live entries of the manifests {@code paths} (NUL-separated, all of one partition
   * spec) as one Arrow IPC stream of one batch, manifest after manifest, to the local file
   * {@code out} (a temporary file of the Python process: Py4J's transfer of a byte array costs
   * more than the decoding), and returns how many rows each manifest has, comma-separated. The
   * manifests are read in parallel; one batch for all of them, as Arrow's allocations cost more
   * than a small manifest's rows. {@code partitionKinds}: the kinds of the spec's partition
   * fields, comma-separated; {@code bounds}: the columns whose bounds to decode, "id:kind",
   * comma-separated.
   */
  public static String read(SparkSession session, String paths, String partitionKinds, String bounds, String out)
      throws Exception {
    String[] manifests = paths.split("\0", -1);
    String[] kinds = partitionKinds.isEmpty() ? new String[0] : partitionKinds.split(",");
    String[] pairs = bounds.isEmpty() ? new String[0] : bounds.split(",");
    int[] boundIds = new int[pairs.length];
    String[] boundKinds = new String[pairs.length];
    for (int i = 0; i < pairs.length; i++) {
      String[] pair = pairs[i].split(":");
      boundIds[i] = Integer.parseInt(pair[0]);
      boundKinds[i] = pair[1];
    }
    java.util.function.Supplier<Configuration> conf = ManifestMerge.hadoopConf(session);
    int threads = Math.max(1, Math.min(manifests.length, Runtime.getRuntime().availableProcessors()));
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(threads);
    List<Entry> entries = new ArrayList<>();
    StringBuilder counts = new StringBuilder();
    try {
      List<java.util.concurrent.Future<List<Entry>>> done = new ArrayList<>();
      for (String manifest : manifests) {
        done.add(pool.submit(() -> live(conf, manifest, kinds, boundIds, boundKinds)));
      }
      for (java.util.concurrent.Future<List<Entry>> f : done) {
        List<Entry> some;
        try {
          some = f.get();
        } catch (java.util.concurrent.ExecutionException e) {
          throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        }
        entries.addAll(some);
        counts.append(counts.length() == 0 ? "" : ",").append(some.size());
      }
    } finally {
      pool.shutdownNow();
    }
    try (BufferAllocator alloc = ROOT.newChildAllocator("manifests", 0, Long.MAX_VALUE);
         java.io.OutputStream file = new java.io.BufferedOutputStream(
             java.nio.file.Files.newOutputStream(java.nio.file.Paths.get(out)), 1 << 16)) {
      columns(alloc, entries, kinds, boundIds, boundKinds, file);
    } catch (IOException e) {
      throw new UncheckedIOException("lakerules: cannot write the columns of manifests: " + e.getMessage(), e);
    }
    return counts.toString();
  }

  /** The live entries of one manifest, each decoded into an {@link Entry} (on a pool thread). */
  private static List<Entry> live(java.util.function.Supplier<Configuration> conf, String path, String[] kinds,
                                  int[] boundIds, String[] boundKinds) {
    List<Entry> entries = new ArrayList<>();
    Layout layout = null;
    try (AvroBlocks.Records records = AvroBlocks.open(() -> ManifestMerge.open(conf, path))) {
      for (GenericRecord entry = records.next(); entry != null; entry = records.next()) {
        if (layout == null || layout.schema != entry.getSchema()) {
          layout = new Layout(entry.getSchema());
        }
        if (((Number) entry.get(layout.status)).intValue() != DELETED) {
          entries.add(layout.entry(entry, kinds, boundIds, boundKinds));
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException("lakerules: cannot read manifest " + path + ": " + e.getMessage(), e);
    }
    return entries;
  }

  /** What the columns hold of one live entry, copied out of its (reused) Avro record. */
  private static final class Entry {
    int status;
    Long snapshot;
    Long sequence;
    Long fileSequence;
    int content;
    byte[] path;
    byte[] format;
    Long records;
    Long size;
    byte[] keyMetadata;
    Integer sortOrder;
    byte[] splits;
    byte[] equalityIds;
    final byte[][] maps = new byte[MAPS.length][];
    Object[] partition;
    Object[] lower;
    Object[] upper;
  }

  private static final String[] MAPS = {"column_sizes", "value_counts", "null_value_counts", "nan_value_counts",
      "lower_bounds", "upper_bounds"};
  private static final int LOWER = 4;
  private static final int UPPER = 5;

  /** Field positions of a manifest entry schema (-1: absent), looked up once per schema. */
  private static final class Layout {
    final Schema schema;
    final int status;
    final int snapshot;
    final int sequence;
    final int fileSequence;
    final int dataFile;
    Schema fileSchema;
    int content;
    int path;
    int format;
    int records;
    int size;
    int keyMetadata;
    int sortOrder;
    int splits;
    int equalityIds;
    int partition;
    final int[] maps = new int[MAPS.length];

    Layout(Schema schema) {
      this.schema = schema;
      status = pos(schema, "status");
      snapshot = pos(schema, "snapshot_id");
      sequence = pos(schema, "sequence_number");
      fileSequence = pos(schema, "file_sequence_number");
      dataFile = pos(schema, "data_file");
    }

    private void file(Schema s) {
      fileSchema = s;
      content = pos(s, "content");
      path = pos(s, "file_path");
      format = pos(s, "file_format");
      records = pos(s, "record_count");
      size = pos(s, "file_size_in_bytes");
      keyMetadata = pos(s, "key_metadata");
      sortOrder = pos(s, "sort_order_id");
      splits = pos(s, "split_offsets");
      equalityIds = pos(s, "equality_ids");
      partition = pos(s, "partition");
      for (int k = 0; k < MAPS.length; k++) {
        maps[k] = pos(s, MAPS[k]);
      }
    }

    private static int pos(Schema s, String name) {
      Schema.Field f = s.getField(name);
      return f == null ? -1 : f.pos();
    }

    private static Object get(GenericRecord r, int pos) {
      return pos < 0 ? null : r.get(pos);
    }

    Entry entry(GenericRecord record, String[] kinds, int[] boundIds, String[] boundKinds) {
      GenericRecord file = (GenericRecord) record.get(dataFile);
      if (file.getSchema() != fileSchema) {
        file(file.getSchema());
      }
      Entry e = new Entry();
      e.status = ((Number) record.get(status)).intValue();
      e.snapshot = asLong(get(record, snapshot));
      e.sequence = asLong(get(record, sequence));
      e.fileSequence = asLong(get(record, fileSequence));
      Object c = get(file, content);
      e.content = c == null ? 0 : ((Number) c).intValue();
      e.path = text(get(file, path));
      e.format = text(get(file, format));
      e.records = asLong(get(file, records));
      e.size = asLong(get(file, size));
      Object key = get(file, keyMetadata);
      e.keyMetadata = key == null ? null : ManifestEntries.bytes(key);
      Object order = get(file, sortOrder);
      e.sortOrder = order == null ? null : ((Number) order).intValue();
      e.splits = numbers(get(file, splits), 8);
      e.equalityIds = numbers(get(file, equalityIds), 4);
      for (int k = 0; k < MAPS.length; k++) {
        e.maps[k] = packed(get(file, maps[k]), k >= LOWER);
      }
      GenericRecord p = (GenericRecord) get(file, partition);
      int fields = p == null ? 0 : Math.min(kinds.length, p.getSchema().getFields().size());
      e.partition = new Object[kinds.length];
      for (int k = 0; k < fields; k++) {
        e.partition[k] = partitionValue(kinds[k], p.get(k));
      }
      e.lower = new Object[boundIds.length];
      e.upper = new Object[boundIds.length];
      if (boundIds.length > 0) {
        Object lowers = get(file, maps[LOWER]);
        Object uppers = get(file, maps[UPPER]);
        for (int k = 0; k < boundIds.length; k++) {
          e.lower[k] = ManifestEntries.decode(boundKinds[k], ManifestEntries.bytes(valueOf(lowers, boundIds[k])));
          e.upper[k] = ManifestEntries.decode(boundKinds[k], ManifestEntries.bytes(valueOf(uppers, boundIds[k])));
        }
      }
      return e;
    }
  }

  private static Long asLong(Object v) {
    return v == null ? null : ((Number) v).longValue();
  }

  /** A string's UTF-8 bytes (Avro's Utf8 without decoding it). */
  private static byte[] text(Object v) {
    if (v == null) {
      return null;
    }
    if (v instanceof org.apache.avro.util.Utf8) {
      org.apache.avro.util.Utf8 u = (org.apache.avro.util.Utf8) v;
      return java.util.Arrays.copyOf(u.getBytes(), u.getByteLength());
    }
    return v.toString().getBytes(StandardCharsets.UTF_8);
  }

  /**
   * An int-keyed metric map (Iceberg writes an array of key/value records; an Avro map is read
   * too) packed as the column holds it: per key an int key, then a long value ({@code binary}
   * false) or an int length and the bytes; a key with no value is left out.
   */
  @SuppressWarnings("unchecked")
  private static byte[] packed(Object raw, boolean binary) {
    if (raw == null) {
      return null;
    }
    int n = raw instanceof Map ? ((Map<Object, Object>) raw).size() : ((List<Object>) raw).size();
    int[] keys = new int[n];
    Object[] values = new Object[n];
    int k = 0;
    if (raw instanceof Map) {
      for (Map.Entry<Integer, Object> e : ManifestEntries.intMap(raw).entrySet()) {
        keys[k] = e.getKey();
        values[k++] = e.getValue();
      }
    } else {
      for (Object kv : (List<Object>) raw) {
        GenericRecord r = (GenericRecord) kv;
        keys[k] = ((Number) r.get(0)).intValue();
        values[k++] = r.get(1);
      }
    }
    int size = 0;
    for (int i = 0; i < n; i++) {
      if (values[i] != null) {
        values[i] = binary ? ManifestEntries.bytes(values[i]) : values[i];
        size += binary ? 8 + ((byte[]) values[i]).length : 12;
      }
    }
    ByteBuffer buf = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < n; i++) {
      if (values[i] == null) {
        continue;
      }
      buf.putInt(keys[i]);
      if (binary) {
        buf.putInt(((byte[]) values[i]).length);
        buf.put((byte[]) values[i]);
      } else {
        buf.putLong(((Number) values[i]).longValue());
      }
    }
    return buf.array();
  }

  /** The value of {@code key} in an int-keyed map as {@link #packed} reads it (null: none). */
  @SuppressWarnings("unchecked")
  private static Object valueOf(Object raw, int key) {
    if (raw == null) {
      return null;
    }
    if (raw instanceof Map) {
      return ManifestEntries.intMap(raw).get(key);
    }
    for (Object kv : (List<Object>) raw) {
      GenericRecord r = (GenericRecord) kv;
      if (((Number) r.get(0)).intValue() == key) {
        return r.get(1);
      }
    }
    return null;
  }

  private static void columns(BufferAllocator alloc, List<Entry> entries, String[] partitionKinds,
                              int[] boundIds, String[] boundKinds, java.io.OutputStream out) {
    int n = entries.size();
    IntVector status = new IntVector("status", alloc);
    BigIntVector snapshot = new BigIntVector("snapshot_id", alloc);
    BigIntVector sequence = new BigIntVector("sequence_number", alloc);
    BigIntVector fileSequence = new BigIntVector("file_sequence_number", alloc);
    IntVector content = new IntVector("content", alloc);
    VarCharVector filePath = new VarCharVector("file_path", alloc);
    VarCharVector format = new VarCharVector("file_format", alloc);
    BigIntVector recordCount = new BigIntVector("record_count", alloc);
    BigIntVector fileSize = new BigIntVector("file_size_in_bytes", alloc);
    VarBinaryVector keyMetadata = new VarBinaryVector("key_metadata", alloc);
    IntVector sortOrder = new IntVector("sort_order_id", alloc);
    VarBinaryVector splits = new VarBinaryVector("split_offsets", alloc);
    VarBinaryVector equalityIds = new VarBinaryVector("equality_ids", alloc);
    VarBinaryVector[] maps = new VarBinaryVector[MAPS.length];
    for (int k = 0; k < maps.length; k++) {
      maps[k] = new VarBinaryVector(MAPS[k], alloc);
    }
    FieldVector[] partition = new FieldVector[partitionKinds.length];
    for (int k = 0; k < partition.length; k++) {
      partition[k] = vector(alloc, "p" + k, partitionKinds[k]);
    }
    FieldVector[] lower = new FieldVector[boundIds.length];
    FieldVector[] upper = new FieldVector[boundIds.length];
    for (int k = 0; k < boundIds.length; k++) {
      lower[k] = vector(alloc, "lower_" + boundIds[k], boundKinds[k]);
      upper[k] = vector(alloc, "upper_" + boundIds[k], boundKinds[k]);
    }
    List<FieldVector> all = new ArrayList<>(List.of(status, snapshot, sequence, fileSequence, content, filePath,
        format, recordCount, fileSize, keyMetadata, sortOrder, splits, equalityIds));
    all.addAll(List.of(maps));
    all.addAll(List.of(partition));
    for (int k = 0; k < boundIds.length; k++) {
      all.add(lower[k]);
      all.add(upper[k]);
    }
    for (FieldVector v : all) {
      v.setInitialCapacity(Math.max(n, 1));
      v.allocateNew();
    }
    for (int i = 0; i < n; i++) {
      Entry e = entries.get(i);
      status.setSafe(i, e.status);
      setLong(snapshot, i, e.snapshot);
      setLong(sequence, i, e.sequence);
      setLong(fileSequence, i, e.fileSequence);
      content.setSafe(i, e.content);
      setBytes(filePath, i, e.path);
      setBytes(format, i, e.format);
      setLong(recordCount, i, e.records);
      setLong(fileSize, i, e.size);
      setBytes(keyMetadata, i, e.keyMetadata);
      if (e.sortOrder != null) {
        sortOrder.setSafe(i, e.sortOrder);
      }
      setBytes(splits, i, e.splits);
      setBytes(equalityIds, i, e.equalityIds);
      for (int k = 0; k < maps.length; k++) {
        setBytes(maps[k], i, e.maps[k]);
      }
      for (int k = 0; k < partition.length; k++) {
        set(partition[k], partitionKinds[k], i, e.partition[k]);
      }
      for (int k = 0; k < boundIds.length; k++) {
        set(lower[k], boundKinds[k], i, e.lower[k]);
        set(upper[k], boundKinds[k], i, e.upper[k]);
      }
    }
    for (FieldVector v : all) {
      v.setValueCount(n);
    }
    try (VectorSchemaRoot root = new VectorSchemaRoot(all)) {
      root.setRowCount(n);
      try (ArrowStreamWriter writer = new ArrowStreamWriter(root, null, Channels.newChannel(out))) {
        writer.start();
        writer.writeBatch();
        writer.end();
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static FieldVector vector(BufferAllocator alloc, String name, String kind) {
    switch (kind) {
      case "int":
        return new IntVector(name, alloc);
      case "long":
        return new BigIntVector(name, alloc);
      case "float":
        return new Float4Vector(name, alloc);
      case "double":
        return new Float8Vector(name, alloc);
      case "boolean":
        return new BitVector(name, alloc);
      case "string":
        return new VarCharVector(name, alloc);
      default:
        return new VarBinaryVector(name, alloc);
    }
  }

  private static Object partitionValue(String kind, Object v) {
    if (v == null) {
      return null;
    }
    switch (kind) {
      case "int":
      case "long":
      case "float":
      case "double":
      case "boolean":
        return v;
      case "string":
        return v.toString();
      default:
        return ManifestEntries.bytes(v);
    }
  }

  private static void set(FieldVector vector, String kind, int i, Object v) {
    if (v == null) {
      return;  // left null
    }
    switch (kind) {
      case "int":
        ((IntVector) vector).setSafe(i, ((Number) v).intValue());
        break;
      case "long":
        ((BigIntVector) vector).setSafe(i, ((Number) v).longValue());
        break;
      case "float":
        ((Float4Vector) vector).setSafe(i, ((Number) v).floatValue());
        break;
      case "double":
        ((Float8Vector) vector).setSafe(i, ((Number) v).doubleValue());
        break;
      case "boolean":
        ((BitVector) vector).setSafe(i, ((Boolean) v) ? 1 : 0);
        break;
      case "string":
        ((VarCharVector) vector).setSafe(i, ((String) v).getBytes(StandardCharsets.UTF_8));
        break;
      default:
        ((VarBinaryVector) vector).setSafe(i, (byte[]) v);
    }
  }

  private static void setLong(BigIntVector v, int i, Long value) {
    if (value != null) {
      v.setSafe(i, value);
    }
  }

  private static void setBytes(org.apache.arrow.vector.BaseVariableWidthVector v, int i, byte[] value) {
    if (value != null) {
      v.setSafe(i, value);
    }
  }

  @SuppressWarnings("unchecked")
  private static byte[] numbers(Object list, int width) {
    if (list == null) {
      return null;
    }
    List<Object> values = (List<Object>) list;
    ByteBuffer buf = ByteBuffer.allocate(values.size() * width).order(ByteOrder.LITTLE_ENDIAN);
    for (Object x : values) {
      if (width == 8) {
        buf.putLong(((Number) x).longValue());
      } else {
        buf.putInt(((Number) x).intValue());
      }
    }
    return buf.array();
  }
}
