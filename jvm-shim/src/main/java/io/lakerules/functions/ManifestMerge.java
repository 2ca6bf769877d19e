package io.lakerules.functions;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;

import org.apache.avro.Schema;
import org.apache.avro.file.CodecFactory;
import org.apache.avro.file.DataFileWriter;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;

/**
 * Merges Iceberg manifests into one, on the driver, without a Python object per entry: the
 * bulk half of lakerules.write.manifest_bulk. Each entry of the input manifests is read as an
 * Avro record and written to the new manifest with its data file record carried over as it is
 * (converted field by field, by name, only when the input was written with another schema);
 * only the entry's status, snapshot id and sequence numbers are set, as pyiceberg's manifest
 * writer sets them (lakerules.write.manifest_merge says which entries are kept and how):
 * <ul>
 *   <li>a DELETED entry of another snapshot is dropped; one of this snapshot is kept as DELETED
 *       with this snapshot's id and its sequence numbers;</li>
 *   <li>an ADDED entry of this snapshot stays ADDED with null sequence numbers (inherited when the
 *       snapshot is committed);</li>
 *   <li>any other entry becomes EXISTING, keeping its snapshot id and sequence numbers (inherited
 *       from its manifest where the entry leaves them null, as the Iceberg spec says).</li>
 * </ul>
 * The caller gives the new manifest's Avro schema and key-value metadata (those pyiceberg's
 * writer would write) and gets back, as JSON, what its manifest-list entry needs: the counts,
 * the smallest sequence number and, per partition field, the distinct values written (the
 * partition summaries are computed from them on the Python side, by pyiceberg's own code).
 */
public final class ManifestMerge {
  private static final int EXISTING = 0;
  private static final int ADDED = 1;
  private static final int DELETED = 2;

  private ManifestMerge() {
  }

  /**
   * Merges the manifests {@code inputs} (NUL-separated; their sequence numbers and added snapshot
   * ids comma-separated, in the same order) into a new manifest at {@code output}, with the Avro
   * schema {@code schemaJson} and the key-value metadata {@code meta} (keys and values alternating,
   * NUL-separated), for snapshot {@code ownSnapshot}. Strings, not arrays: one Py4J call.
   */
  public static String merge(SparkSession session, String inputPaths, String sequences, String snapshots,
                             String output, String schemaJson, String meta, String codec, long ownSnapshot) {
    String[] inputs = inputPaths.split("\0", -1);
    long[] manifestSequence = longs(sequences);
    long[] addedSnapshot = longs(snapshots);
    String[] pairs = meta.isEmpty() ? new String[0] : meta.split("\0", -1);
    String[] metaKeys = new String[pairs.length / 2];
    String[] metaValues = new String[pairs.length / 2];
    for (int i = 0; i < metaKeys.length; i++) {
      metaKeys[i] = pairs[2 * i];
      metaValues[i] = pairs[2 * i + 1];
    }
    return merge(session, inputs, manifestSequence, addedSnapshot, output, schemaJson, metaKeys, metaValues, codec,
        ownSnapshot);
  }

  private static long[] longs(String text) {
    String[] parts = text.split(",");
    long[] out = new long[parts.length];
    for (int i = 0; i < parts.length; i++) {
      out[i] = Long.parseLong(parts[i].trim());
    }
    return out;
  }

  private static String merge(SparkSession session, String[] inputs, long[] manifestSequence, long[] addedSnapshot,
                              String output, String schemaJson, String[] metaKeys, String[] metaValues, String codec,
                              long ownSnapshot) {
    java.util.function.Supplier<Configuration> conf = hadoopConf(session);
    Schema schema = new Schema.Parser().parse(schemaJson);
    Schema fileSchema = nonNull(schema.getField("data_file").schema());
    Schema partitionSchema = nonNull(fileSchema.getField("partition").schema());
    int partitionFields = partitionSchema.getFields().size();
    List<LinkedHashSet<Object>> distinct = new ArrayList<>();
    for (int i = 0; i < partitionFields; i++) {
      distinct.add(new LinkedHashSet<>());
    }
    long[] files = new long[3];
    long[] rows = new long[3];
    Long minSequence = null;
    long entries = 0;
    Map<Schema, Boolean> same = new IdentityHashMap<>();
    DataFileWriter<GenericRecord> writer = null;
    OutputStream out = null;
    try {
      for (int m = 0; m < inputs.length; m++) {
        String input = inputs[m];
        try (AvroBlocks.Records records = AvroBlocks.open(() -> open(conf, input))) {
          // each record is reused for the next: it is serialized by append() before that
          for (GenericRecord entry = records.next(); entry != null; entry = records.next()) {
            int status = ((Number) entry.get("status")).intValue();
            Long snapshot = asLong(field(entry, "snapshot_id"));
            if (snapshot == null) {
              snapshot = addedSnapshot[m];
            }
            boolean inherits = manifestSequence[m] == 0 || status == ADDED;
            Long sequence = asLong(field(entry, "sequence_number"));
            Long fileSequence = asLong(field(entry, "file_sequence_number"));
            if (sequence == null && inherits) {
              sequence = manifestSequence[m];
            }
            if (fileSequence == null && inherits) {
              fileSequence = manifestSequence[m];
            }
            int newStatus;
            if (status == DELETED) {
              if (snapshot != ownSnapshot) {
                continue;  // an earlier commit's removal: history, dropped
              }
              newStatus = DELETED;
              snapshot = ownSnapshot;
            } else if (status == ADDED && snapshot == ownSnapshot) {
              newStatus = ADDED;
              sequence = sequence != null && sequence == -1L ? null : sequence;  // unassigned yet
              fileSequence = null;
            } else {
              newStatus = EXISTING;
            }
            GenericRecord file = (GenericRecord) entry.get("data_file");
            Schema from = file.getSchema();
            Boolean equal = same.get(from);
            if (equal == null) {
              equal = from.equals(fileSchema);
              same.put(from, equal);
            }
            GenericRecord carried = equal ? file : (GenericRecord) convert(file, from, fileSchema);
            GenericData.Record written = new GenericData.Record(schema);
            written.put("status", newStatus);
            written.put("snapshot_id", snapshot);
            written.put("sequence_number", sequence);
            written.put("file_sequence_number", fileSequence);
            written.put("data_file", carried);
            if (writer == null) {
              writer = new DataFileWriter<>(new GenericDatumWriter<GenericRecord>(schema));
              writer.setCodec(CodecFactory.fromString(codec));
              for (int i = 0; i < metaKeys.length; i++) {
                writer.setMeta(metaKeys[i], metaValues[i]);
              }
              out = create(conf, output);
              writer.create(schema, out);
            }
            writer.append(written);
            entries++;
            long records1 = ((Number) carried.get("record_count")).longValue();
            int k = newStatus == ADDED ? 0 : newStatus == EXISTING ? 1 : 2;
            files[k]++;
            rows[k] += records1;
            if (newStatus != DELETED && sequence != null && (minSequence == null || sequence < minSequence)) {
              minSequence = sequence;
            }
            GenericRecord partition = (GenericRecord) carried.get("partition");
            for (int i = 0; i < partitionFields; i++) {
              distinct.get(i).add(normal(partition == null ? null : partition.get(i)));
            }
          }
        }
      }
      if (writer != null) {
        writer.close();
        writer = null;
      }
    } catch (IOException e) {
      throw new UncheckedIOException("lakerules: cannot merge manifests into " + output + ": " + e.getMessage(), e);
    } finally {
      if (writer != null) {
        try {
          writer.close();
        } catch (IOException ignored) {
          // the write failed already: the caller deletes the partial file
        }
      }
    }
    long length = entries == 0 ? 0 : length(conf, output);
    StringBuilder json = new StringBuilder("{\"entries\":").append(entries).append(",\"length\":").append(length);
    json.append(",\"files\":[").append(files[0]).append(',').append(files[1]).append(',').append(files[2]).append(']');
    json.append(",\"rows\":[").append(rows[0]).append(',').append(rows[1]).append(',').append(rows[2]).append(']');
    json.append(",\"min_sequence\":").append(minSequence == null ? "null" : minSequence.toString());
    json.append(",\"partitions\":[");
    for (int i = 0; i < partitionFields; i++) {
      json.append(i == 0 ? "[" : ",[");
      boolean first = true;
      for (Object v : distinct.get(i)) {
        json.append(first ? "" : ",");
        first = false;
        appendJson(json, v);
      }
      json.append(']');
    }
    return json.append("]}").toString();
  }

  static Schema nonNull(Schema s) {
    if (s.getType() != Schema.Type.UNION) {
      return s;
    }
    for (Schema branch : s.getTypes()) {
      if (branch.getType() != Schema.Type.NULL) {
        return branch;
      }
    }
    return s;
  }

  /** A value read with one schema as the other schema has it, matching record fields by name. */
  @SuppressWarnings("unchecked")
  static Object convert(Object v, Schema from, Schema to) {
    if (v == null) {
      return null;
    }
    if (from.getType() == Schema.Type.UNION) {
      from = from.getTypes().get(GenericData.get().resolveUnion(from, v));
    }
    to = nonNull(to);
    switch (to.getType()) {
      case RECORD: {
        GenericRecord in = (GenericRecord) v;
        GenericData.Record out = new GenericData.Record(to);
        for (Schema.Field f : to.getFields()) {
          Schema.Field source = from.getField(f.name());
          out.put(f.pos(), source == null ? null : convert(in.get(source.pos()), source.schema(), f.schema()));
        }
        return out;
      }
      case ARRAY: {
        List<Object> out = new ArrayList<>();
        for (Object x : (List<Object>) v) {
          out.add(convert(x, from.getElementType(), to.getElementType()));
        }
        return out;
      }
      case MAP: {
        Map<Object, Object> out = new HashMap<>();
        for (Map.Entry<Object, Object> e : ((Map<Object, Object>) v).entrySet()) {
          out.put(e.getKey(), convert(e.getValue(), from.getValueType(), to.getValueType()));
        }
        return out;
      }
      case FIXED:
        return new GenericData.Fixed(to, ManifestEntries.bytes(v));
      case LONG:
        return ((Number) v).longValue();
      case DOUBLE:
        return ((Number) v).doubleValue();
      default:
        return v;
    }
  }

  private static Object field(GenericRecord record, String name) {
    Schema.Field f = record.getSchema().getField(name);
    return f == null ? null : record.get(f.pos());
  }

  private static Long asLong(Object v) {
    return v == null ? null : ((Number) v).longValue();
  }

  /** A partition value in a form that compares by value: text as String, bytes as hex. */
  private static Object normal(Object v) {
    if (v == null || v instanceof Number || v instanceof Boolean) {
      return v;
    } else if (v instanceof ByteBuffer || v instanceof GenericData.Fixed || v instanceof byte[]) {
      StringBuilder hex = new StringBuilder("0x");
      for (byte b : ManifestEntries.bytes(v)) {
        hex.append(String.format("%02x", b));
      }
      return new Hex(hex.toString());
    }
    return v.toString();
  }

  /** Bytes, written to JSON as a hex string with a 0x prefix and told apart from text by this type. */
  private static final class Hex {
    final String text;

    Hex(String text) {
      this.text = text;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Hex && ((Hex) o).text.equals(text);
    }

    @Override
    public int hashCode() {
      return text.hashCode();
    }
  }

  private static void appendJson(StringBuilder json, Object v) {
    if (v == null) {
      json.append("null");
    } else if (v instanceof Hex) {
      json.append("{\"hex\":\"").append(((Hex) v).text.substring(2)).append("\"}");
    } else if (v instanceof Double || v instanceof Float) {
      double d = ((Number) v).doubleValue();  // a float widened exactly, as pyiceberg reads it
      if (Double.isNaN(d) || Double.isInfinite(d)) {
        json.append("{\"float\":\"").append(Double.isNaN(d) ? "nan" : d > 0 ? "inf" : "-inf").append("\"}");
      } else {
        json.append("{\"float\":\"").append(Double.toString(d)).append("\"}");
      }
    } else if (v instanceof Number || v instanceof Boolean) {
      json.append(v.toString());
    } else {
      String s = v.toString();
      json.append('"');
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        if (c == '"' || c == '\\') {
          json.append('\\').append(c);
        } else if (c < 0x20 || c > 0x7e) {
          json.append(String.format("\\u%04x", (int) c));
        } else {
          json.append(c);
        }
      }
      json.append('"');
    }
  }

  /**
   * A location's scheme, or null: read off its start, not parsed as a URI (table locations hold
   * characters a URI refuses: %, brackets, quotes, spaces).
   */
  private static String scheme(String location) {
    java.util.regex.Matcher m = SCHEME.matcher(location);
    return m.lookingAt() ? m.group(1) : null;
  }

  private static final java.util.regex.Pattern SCHEME =
      java.util.regex.Pattern.compile("([A-Za-z][A-Za-z0-9+.-]*):");

  private static boolean local(String location) {
    String scheme = scheme(location);
    return scheme == null || scheme.equals("file");
  }

  private static java.nio.file.Path localPath(String location) {
    return scheme(location) == null ? Paths.get(location) : Paths.get(new Path(location).toUri().getPath());
  }

  /** The session's Hadoop configuration, made on first use (local files need none; making one costs). */
  static java.util.function.Supplier<Configuration> hadoopConf(SparkSession session) {
    Configuration[] made = new Configuration[1];
    return () -> {
      if (made[0] == null) {
        made[0] = session.sessionState().newHadoopConf();
      }
      return made[0];
    };
  }

  static InputStream open(java.util.function.Supplier<Configuration> conf, String location) throws IOException {
    if (local(location)) {
      return Files.newInputStream(localPath(location));
    }
    Path path = new Path(location);
    return path.getFileSystem(conf.get()).open(path);
  }

  /** A new file (never one that exists); local files without Hadoop's .crc side files. */
  private static OutputStream create(java.util.function.Supplier<Configuration> conf, String location)
      throws IOException {
    if (local(location)) {
      java.nio.file.Path p = localPath(location);
      if (p.getParent() != null) {
        Files.createDirectories(p.getParent());
      }
      return Files.newOutputStream(p, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
    }
    Path path = new Path(location);
    FileSystem fs = path.getFileSystem(conf.get());
    return fs.create(path, false);
  }

  private static long length(java.util.function.Supplier<Configuration> conf, String location) {
    try {
      if (local(location)) {
        return Files.size(localPath(location));
      }
      Path path = new Path(location);
      return path.getFileSystem(conf.get()).getFileStatus(path).getLen();
    } catch (IOException e) {
      throw new UncheckedIOException("lakerules: cannot read the length of " + location + ": " + e.getMessage(), e);
    }
  }
}
