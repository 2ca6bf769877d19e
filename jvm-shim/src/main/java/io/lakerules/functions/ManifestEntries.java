package io.lakerules.functions;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Reads Iceberg manifest files on the executors: the per-entry half of distributed scan
 * planning. Each task reads whole manifests (Avro, through the Hadoop file system Spark is
 * configured with) and turns each live entry into a row: the entry's fields as written, plus
 * the lower and upper bounds of some columns decoded from Iceberg's single-value serialization,
 * so that a filter over them can run in the same Spark job. Which entries to keep, and what the
 * rows mean, is decided by the caller (lakerules.scan.manifest_job); nothing here plans.
 *
 * <p>The row layout is the schema handed in: 21 fixed fields (see {@code FIXED}), then a lower
 * and an upper bound per decoded column. The partition struct's Spark types say how each
 * partition value is passed on: integers, longs, strings, booleans, floats and doubles as
 * themselves; anything else (decimals, UUIDs, fixed, binary) as its bytes.
 */
public final class ManifestEntries implements MapPartitionsFunction<String, Row>, Serializable {
  private static final long serialVersionUID = 1L;
  private static final int FIXED = 21;
  private static final int DELETED = 2;

  private final HashMap<String, String> hadoopConf;
  private final StructType schema;
  private final int[] boundIds;
  private final String[] boundKinds;  // int, long, float, double, string, binary

  private ManifestEntries(HashMap<String, String> hadoopConf, StructType schema, int[] boundIds, String[] boundKinds) {
    this.hadoopConf = hadoopConf;
    this.schema = schema;
    this.boundIds = boundIds;
    this.boundKinds = boundKinds;
  }

  /**
   * A Spark Dataset of the live entries of the given manifests (their paths in one string,
   * NUL-separated; the schema as JSON, see above).
   */
  public static Dataset<Row> read(SparkSession session, String paths, String schemaJson,
                                  int[] boundIds, String[] boundKinds) {
    StructType schema = (StructType) DataType.fromJson(schemaJson);
    if (schema.fields().length != FIXED + 2 * boundIds.length || boundIds.length != boundKinds.length) {
      throw new IllegalArgumentException("lakerules: manifest entry schema does not match the bounds asked for");
    }
    List<String> manifests = java.util.Arrays.asList(paths.split("\0", -1));
    HashMap<String, String> conf = new HashMap<>();
    for (Map.Entry<String, String> e : session.sessionState().newHadoopConf()) {
      conf.put(e.getKey(), e.getValue());
    }
    ManifestEntries reader = new ManifestEntries(conf, schema, boundIds, boundKinds);
    // a local relation: Spark slices it over min(manifests, default parallelism) tasks, no shuffle
    Dataset<String> files = session.createDataset(manifests, Encoders.STRING());
    return files.mapPartitions(reader, Encoders.row(schema));
  }

  @Override
  public Iterator<Row> call(Iterator<String> paths) throws Exception {
    Configuration conf = new Configuration(false);
    for (Map.Entry<String, String> e : hadoopConf.entrySet()) {
      conf.set(e.getKey(), e.getValue());
    }
    StructType partitionType = (StructType) schema.fields()[8].dataType();
    List<Row> out = new ArrayList<>();
    while (paths.hasNext()) {
      String manifest = paths.next();
      Path path = new Path(manifest);
      FileSystem fs = path.getFileSystem(conf);
      try (AvroBlocks.Records records = AvroBlocks.open(() -> fs.open(path))) {
        for (GenericRecord entry = records.next(); entry != null; entry = records.next()) {
          int status = ((Number) entry.get("status")).intValue();
          if (status != DELETED) {
            out.add(row(manifest, status, entry, partitionType));
          }
        }
      } catch (IOException e) {
        throw new UncheckedIOException("lakerules: cannot read manifest " + manifest + ": " + e.getMessage(), e);
      }
    }
    return out.iterator();
  }

  private Row row(String manifest, int status, GenericRecord entry, StructType partitionType) {
    GenericRecord file = (GenericRecord) entry.get("data_file");
    Object[] values = new Object[schema.fields().length];
    values[0] = manifest;
    values[1] = status;
    values[2] = asLong(field(entry, "snapshot_id"));
    values[3] = asLong(field(entry, "sequence_number"));
    values[4] = asLong(field(entry, "file_sequence_number"));
    Object content = field(file, "content");
    values[5] = content == null ? 0 : ((Number) content).intValue();
    values[6] = text(file.get("file_path"));
    values[7] = text(file.get("file_format"));
    values[8] = partition((GenericRecord) file.get("partition"), partitionType);
    values[9] = asLong(file.get("record_count"));
    values[10] = asLong(file.get("file_size_in_bytes"));
    Map<Integer, Object> lower = intMap(field(file, "lower_bounds"));
    Map<Integer, Object> upper = intMap(field(file, "upper_bounds"));
    values[11] = scalaMap(longValues(intMap(field(file, "column_sizes"))));
    values[12] = scalaMap(longValues(intMap(field(file, "value_counts"))));
    values[13] = scalaMap(longValues(intMap(field(file, "null_value_counts"))));
    values[14] = scalaMap(longValues(intMap(field(file, "nan_value_counts"))));
    values[15] = scalaMap(byteValues(lower));
    values[16] = scalaMap(byteValues(upper));
    values[17] = bytes(field(file, "key_metadata"));
    values[18] = scalaSeq(longList(field(file, "split_offsets")));
    values[19] = scalaSeq(intList(field(file, "equality_ids")));
    Object order = field(file, "sort_order_id");
    values[20] = order == null ? null : ((Number) order).intValue();
    for (int i = 0; i < boundIds.length; i++) {
      values[FIXED + 2 * i] = decode(boundKinds[i], lower == null ? null : bytes(lower.get(boundIds[i])));
      values[FIXED + 2 * i + 1] = decode(boundKinds[i], upper == null ? null : bytes(upper.get(boundIds[i])));
    }
    return RowFactory.create(values);
  }

  /** A record's field, or null when the writer's schema has no such field (v1 manifests). */
  private static Object field(GenericRecord record, String name) {
    Schema.Field f = record.getSchema().getField(name);
    return f == null ? null : record.get(f.pos());
  }

  private static Row partition(GenericRecord record, StructType type) {
    StructField[] fields = type.fields();
    Object[] values = new Object[fields.length];
    int n = record == null ? 0 : Math.min(fields.length, record.getSchema().getFields().size());
    for (int i = 0; i < n; i++) {
      values[i] = partitionValue(record.get(i), fields[i].dataType());
    }
    return RowFactory.create(values);
  }

  private static Object partitionValue(Object v, DataType type) {
    if (v == null) {
      return null;
    } else if (type instanceof IntegerType) {
      return ((Number) v).intValue();
    } else if (type instanceof LongType) {
      return ((Number) v).longValue();
    } else if (type instanceof FloatType) {
      return ((Number) v).floatValue();
    } else if (type instanceof DoubleType) {
      return ((Number) v).doubleValue();
    } else if (type instanceof BooleanType) {
      return v;
    } else if (type instanceof BinaryType) {
      return bytes(v);
    }
    return text(v);
  }

  /** Iceberg's single-value serialization, for the kinds the caller filters on. */
  static Object decode(String kind, byte[] b) {
    if (b == null) {
      return null;
    }
    ByteBuffer buf = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
    switch (kind) {
      case "int":
        return b.length < 4 ? null : buf.getInt();
      case "long":  // a column promoted from int keeps its 4-byte bounds
        return b.length == 4 ? (long) buf.getInt() : b.length < 8 ? null : buf.getLong();
      case "float":
        return b.length < 4 ? null : buf.getFloat();
      case "double":
        return b.length == 4 ? (double) buf.getFloat() : b.length < 8 ? null : buf.getDouble();
      case "string":
        return new String(b, StandardCharsets.UTF_8);
      case "binary":
        return b;
      default:
        throw new IllegalArgumentException("lakerules: no decoding of bounds of kind " + kind);
    }
  }

  private static Long asLong(Object v) {
    return v == null ? null : ((Number) v).longValue();
  }

  private static String text(Object v) {
    return v == null ? null : v.toString();
  }

  static byte[] bytes(Object v) {
    if (v == null) {
      return null;
    } else if (v instanceof ByteBuffer) {
      ByteBuffer b = ((ByteBuffer) v).duplicate();
      byte[] out = new byte[b.remaining()];
      b.get(out);
      return out;
    } else if (v instanceof GenericData.Fixed) {
      return ((GenericData.Fixed) v).bytes().clone();
    } else if (v instanceof byte[]) {
      return (byte[]) v;
    }
    throw new IllegalArgumentException("lakerules: not binary in a manifest: " + v.getClass().getName());
  }

  /** Iceberg writes maps with int keys as an array of key/value records (or, rarely, an Avro map). */
  @SuppressWarnings("unchecked")
  static Map<Integer, Object> intMap(Object v) {
    if (v == null) {
      return null;
    }
    Map<Integer, Object> out = new HashMap<>();
    if (v instanceof Map) {
      for (Map.Entry<Object, Object> e : ((Map<Object, Object>) v).entrySet()) {
        out.put(Integer.valueOf(e.getKey().toString()), e.getValue());
      }
    } else {
      for (Object kv : (List<Object>) v) {
        GenericRecord r = (GenericRecord) kv;
        out.put(((Number) r.get("key")).intValue(), r.get("value"));
      }
    }
    return out;
  }

  private static Map<Integer, Object> longValues(Map<Integer, Object> m) {
    if (m == null) {
      return null;
    }
    m.replaceAll((k, v) -> v == null ? null : ((Number) v).longValue());
    return m;
  }

  private static Map<Integer, Object> byteValues(Map<Integer, Object> m) {
    if (m == null) {
      return null;
    }
    Map<Integer, Object> out = new HashMap<>(m);
    out.replaceAll((k, v) -> bytes(v));
    return out;
  }

  @SuppressWarnings("unchecked")
  private static List<Object> longList(Object v) {
    if (v == null) {
      return null;
    }
    List<Object> out = new ArrayList<>();
    for (Object x : (List<Object>) v) {
      out.add(((Number) x).longValue());
    }
    return out;
  }

  @SuppressWarnings("unchecked")
  private static List<Object> intList(Object v) {
    if (v == null) {
      return null;
    }
    List<Object> out = new ArrayList<>();
    for (Object x : (List<Object>) v) {
      out.add(((Number) x).intValue());
    }
    return out;
  }

  private static Object scalaMap(Map<Integer, Object> m) {
    return m == null ? null : scala.jdk.javaapi.CollectionConverters.asScala(m);
  }

  private static Object scalaSeq(List<Object> l) {
    return l == null ? null : scala.jdk.javaapi.CollectionConverters.asScala(l).toSeq();
  }
}
