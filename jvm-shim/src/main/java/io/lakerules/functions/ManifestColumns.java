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
import org.apache.avro.file.DataFileStream;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
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
    List<GenericRecord> entries = new ArrayList<>();
    StringBuilder counts = new StringBuilder();
    try {
      List<java.util.concurrent.Future<List<GenericRecord>>> done = new ArrayList<>();
      for (String manifest : manifests) {
        done.add(pool.submit(() -> live(conf, manifest)));
      }
      for (java.util.concurrent.Future<List<GenericRecord>> f : done) {
        List<GenericRecord> some;
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

  private static List<GenericRecord> live(java.util.function.Supplier<Configuration> conf, String path) {
    List<GenericRecord> entries = new ArrayList<>();
    try (InputStream in = ManifestMerge.open(conf, path);
         DataFileStream<GenericRecord> records = new DataFileStream<>(in, new GenericDatumReader<>())) {
      for (GenericRecord entry : records) {
        if (((Number) entry.get("status")).intValue() != DELETED) {
          entries.add(entry);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException("lakerules: cannot read manifest " + path + ": " + e.getMessage(), e);
    }
    return entries;
  }

  private static void columns(BufferAllocator alloc, List<GenericRecord> entries, String[] partitionKinds,
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
    String[] mapNames = {"column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds",
        "upper_bounds"};
    VarBinaryVector[] maps = new VarBinaryVector[mapNames.length];
    for (int k = 0; k < maps.length; k++) {
      maps[k] = new VarBinaryVector(mapNames[k], alloc);
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
      GenericRecord entry = entries.get(i);
      GenericRecord file = (GenericRecord) entry.get("data_file");
      status.setSafe(i, ((Number) entry.get("status")).intValue());
      setLong(snapshot, i, field(entry, "snapshot_id"));
      setLong(sequence, i, field(entry, "sequence_number"));
      setLong(fileSequence, i, field(entry, "file_sequence_number"));
      Object c = field(file, "content");
      content.setSafe(i, c == null ? 0 : ((Number) c).intValue());
      setText(filePath, i, file.get("file_path"));
      setText(format, i, file.get("file_format"));
      setLong(recordCount, i, file.get("record_count"));
      setLong(fileSize, i, file.get("file_size_in_bytes"));
      setBytes(keyMetadata, i, field(file, "key_metadata"));
      Object order = field(file, "sort_order_id");
      if (order != null) {
        sortOrder.setSafe(i, ((Number) order).intValue());
      }
      setBytes(splits, i, numbers(field(file, "split_offsets"), 8));
      setBytes(equalityIds, i, numbers(field(file, "equality_ids"), 4));
      Map<Integer, Object> lowerMap = null;
      Map<Integer, Object> upperMap = null;
      for (int k = 0; k < maps.length; k++) {
        Object raw = field(file, mapNames[k]);
        Map<Integer, Object> m = raw == null ? null : ManifestEntries.intMap(raw);
        setBytes(maps[k], i, m == null ? null : k >= 4 ? byteMap(m) : longMap(m));
        if (k == 4) {
          lowerMap = m;
        } else if (k == 5) {
          upperMap = m;
        }
      }
      GenericRecord p = (GenericRecord) field(file, "partition");
      int fields = p == null ? 0 : Math.min(partition.length, p.getSchema().getFields().size());
      for (int k = 0; k < fields; k++) {
        set(partition[k], partitionKinds[k], i, partitionValue(partitionKinds[k], p.get(k)));
      }
      for (int k = 0; k < boundIds.length; k++) {
        set(lower[k], boundKinds[k], i, lowerMap == null ? null
            : ManifestEntries.decode(boundKinds[k], ManifestEntries.bytes(lowerMap.get(boundIds[k]))));
        set(upper[k], boundKinds[k], i, upperMap == null ? null
            : ManifestEntries.decode(boundKinds[k], ManifestEntries.bytes(upperMap.get(boundIds[k]))));
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

  private static Object field(GenericRecord record, String name) {
    Schema.Field f = record.getSchema().getField(name);
    return f == null ? null : record.get(f.pos());
  }

  private static void setLong(BigIntVector v, int i, Object value) {
    if (value != null) {
      v.setSafe(i, ((Number) value).longValue());
    }
  }

  private static void setText(VarCharVector v, int i, Object value) {
    if (value != null) {
      v.setSafe(i, value.toString().getBytes(StandardCharsets.UTF_8));
    }
  }

  private static void setBytes(VarBinaryVector v, int i, Object value) {
    if (value != null) {
      v.setSafe(i, value instanceof byte[] ? (byte[]) value : ManifestEntries.bytes(value));
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

  private static byte[] longMap(Map<Integer, Object> m) {
    ByteBuffer buf = ByteBuffer.allocate(m.size() * 12).order(ByteOrder.LITTLE_ENDIAN);
    for (Map.Entry<Integer, Object> e : m.entrySet()) {
      buf.putInt(e.getKey());
      buf.putLong(((Number) e.getValue()).longValue());
    }
    return buf.array();
  }

  private static byte[] byteMap(Map<Integer, Object> m) {
    List<byte[]> values = new ArrayList<>();
    int size = 0;
    for (Object v : m.values()) {
      byte[] b = ManifestEntries.bytes(v);
      values.add(b);
      size += 8 + b.length;
    }
    ByteBuffer buf = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    int k = 0;
    for (Integer key : m.keySet()) {
      byte[] b = values.get(k++);
      buf.putInt(key);
      buf.putInt(b.length);
      buf.put(b);
    }
    return buf.array();
  }
}
