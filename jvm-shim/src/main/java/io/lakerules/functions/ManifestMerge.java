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
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;


/**
 * Merges Iceberg manifests into one, on the driver, without a Python object per entry: the
 * bulk half of lakerules.write.manifest_bulk. An entry of an input whose data file schema is the
 * new manifest's is read from its encoded bytes: its own fields are decoded, its data file's
 * bytes are carried over as they are (only the record count and partition values are read on
 * the way). An input written with another data file schema (a v1 manifest in an upgraded table)
 * is read as Avro records and its data files converted field by field, by name. Only the entry's
 * status, snapshot id and sequence numbers are set, as pyiceberg's manifest writer sets them
 * (lakerules.write.manifest_merge says which entries are kept and how):
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
    String[] inputs = Joined.strings(inputPaths);
    long[] manifestSequence = Joined.longs(sequences);
    long[] addedSnapshot = Joined.longs(snapshots);
    String[] pairs = Joined.strings(meta);
    String[] metaKeys = new String[pairs.length / 2];
    String[] metaValues = new String[pairs.length / 2];
    for (int i = 0; i < metaKeys.length; i++) {
      metaKeys[i] = pairs[2 * i];
      metaValues[i] = pairs[2 * i + 1];
    }
    return merge(session, inputs, manifestSequence, addedSnapshot, output, schemaJson, metaKeys, metaValues, codec,
        ownSnapshot);
  }

  private static String merge(SparkSession session, String[] inputs, long[] manifestSequence, long[] addedSnapshot,
                              String output, String schemaJson, String[] metaKeys, String[] metaValues, String codec,
                              long ownSnapshot) {
    java.util.function.Supplier<Configuration> conf = hadoopConf(session);
    Schema schema = new Schema.Parser().parse(schemaJson);
    Schema fileSchema = nonNull(schema.getField("data_file").schema());
    Schema partitionSchema = nonNull(fileSchema.getField("partition").schema());
    Merged merged = new Merged(partitionSchema.getFields().size());
    AvroBinary.Node outNode = AvroBinary.compile(schema);
    Map<Schema, Boolean> same = new IdentityHashMap<>();
    try (Output out = new Output(conf, output, schema.toString(), metaKeys, metaValues, codec)) {
      for (int m = 0; m < inputs.length; m++) {
        String input = inputs[m];
        Entry e = new Entry(manifestSequence[m], addedSnapshot[m], ownSnapshot);
        boolean copied;
        try (AvroBlocks.Blocks blocks = AvroBlocks.blocks(() -> open(conf, input))) {
          EncodedEntries encoded = EncodedEntries.of(blocks.schema(), schema, outNode);
          copied = encoded != null;
          if (copied) {
            blocks.eachRecord(in -> {
              encoded.read(in, e);
              if (e.decide()) {
                encoded.write(out.writer(), e, in.b);
                out.writer().endRecord();
                merged.add(e);
              }
            });
          }
        }
        if (!copied) {
          converted(conf, input, e, schema, fileSchema, same, out, merged);
        }
      }
      out.finish();
    } catch (IOException e) {
      throw new UncheckedIOException("lakerules: cannot merge manifests into " + output + ": " + e.getMessage(), e);
    }
    long length = merged.entries == 0 ? 0 : length(conf, output);
    return merged.json(length);
  }

  /**
   * The entries of an input written with another data file schema (a v1 manifest in an upgraded
   * table): each decoded as an Avro record, its data file converted by field name, encoded again.
   */
  private static void converted(java.util.function.Supplier<Configuration> conf, String input, Entry e, Schema schema,
                                Schema fileSchema, Map<Schema, Boolean> same, Output out, Merged merged)
      throws IOException {
    GenericDatumWriter<GenericRecord> encode = new GenericDatumWriter<>(schema);
    java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
    org.apache.avro.io.BinaryEncoder encoder = null;
    try (AvroBlocks.Records records = AvroBlocks.open(() -> open(conf, input))) {
      // each record is reused for the next: it is encoded before that
      for (GenericRecord entry = records.next(); entry != null; entry = records.next()) {
        e.status = ((Number) entry.get("status")).intValue();
        e.snapshot = asLong(field(entry, "snapshot_id"));
        e.sequence = asLong(field(entry, "sequence_number"));
        e.fileSequence = asLong(field(entry, "file_sequence_number"));
        if (!e.decide()) {
          continue;
        }
        GenericRecord file = (GenericRecord) entry.get("data_file");
        Schema from = file.getSchema();
        Boolean equal = same.computeIfAbsent(from, f -> f.equals(fileSchema));
        GenericRecord carried = equal ? file : (GenericRecord) convert(file, from, fileSchema);
        GenericData.Record written = new GenericData.Record(schema);
        written.put("status", e.status);
        written.put("snapshot_id", e.snapshot);
        written.put("sequence_number", e.sequence);
        written.put("file_sequence_number", e.fileSequence);
        written.put("data_file", carried);
        bytes.reset();
        encoder = org.apache.avro.io.EncoderFactory.get().binaryEncoder(bytes, encoder);
        encode.write(written, encoder);
        encoder.flush();
        out.writer().put(bytes.toByteArray(), 0, bytes.size());
        out.writer().endRecord();
        e.records = ((Number) carried.get("record_count")).longValue();
        GenericRecord partition = (GenericRecord) carried.get("partition");
        if (e.partition.length != merged.distinct.size()) {
          e.partition = new Object[merged.distinct.size()];
        }
        for (int i = 0; i < e.partition.length; i++) {
          e.partition[i] = partition == null || i >= partition.getSchema().getFields().size()
              ? null : normal(partition.get(i));
        }
        merged.add(e);
      }
    }
  }

  /**
   * The merged manifest's file, created with its first entry (a merge that keeps none writes no
   * file). {@link #finish} closes it; closing it unfinished (the merge failed) leaves the partial
   * file to the caller, which deletes it.
   */
  private static final class Output implements java.io.Closeable {
    private final java.util.function.Supplier<Configuration> conf;
    private final String location;
    private final String schema;
    private final String[] metaKeys;
    private final String[] metaValues;
    private final String codec;
    private AvroBlocks.Writer writer;

    Output(java.util.function.Supplier<Configuration> conf, String location, String schema, String[] metaKeys,
           String[] metaValues, String codec) {
      this.conf = conf;
      this.location = location;
      this.schema = schema;
      this.metaKeys = metaKeys;
      this.metaValues = metaValues;
      this.codec = codec;
    }

    AvroBlocks.Writer writer() throws IOException {
      if (writer == null) {
        writer = new AvroBlocks.Writer(create(conf, location), schema, metaKeys, metaValues, codec);
      }
      return writer;
    }

    void finish() throws IOException {
      AvroBlocks.Writer done = writer;
      writer = null;
      if (done != null) {
        done.close();
      }
    }

    @Override
    public void close() {
      if (writer != null) {
        try {
          writer.close();
        } catch (IOException ignored) {
          // the write failed already: the caller deletes the partial file
        }
      }
    }
  }

  /**
   * One entry as the merge writes it: read (status, snapshot id, sequence numbers as the input
   * has them, its data file's record count and partition values), then {@link #decide}d.
   */
  static final class Entry {
    final long manifestSequence;
    final long addedSnapshot;
    final long ownSnapshot;
    int status;
    Long snapshot;
    Long sequence;
    Long fileSequence;
    long records;
    Object[] partition = new Object[0];

    Entry(long manifestSequence, long addedSnapshot, long ownSnapshot) {
      this.manifestSequence = manifestSequence;
      this.addedSnapshot = addedSnapshot;
      this.ownSnapshot = ownSnapshot;
    }

    /** Sets the written status, snapshot id and sequence numbers; false: the entry is dropped. */
    boolean decide() {
      if (snapshot == null) {
        snapshot = addedSnapshot;
      }
      boolean inherits = manifestSequence == 0 || status == ADDED;
      if (sequence == null && inherits) {
        sequence = manifestSequence;
      }
      if (fileSequence == null && inherits) {
        fileSequence = manifestSequence;
      }
      if (status == DELETED) {
        if (snapshot != ownSnapshot) {
          return false;  // an earlier commit's removal: history, dropped
        }
        snapshot = ownSnapshot;
      } else if (status == ADDED && snapshot == ownSnapshot) {
        sequence = sequence != null && sequence == -1L ? null : sequence;  // unassigned yet
        fileSequence = null;
      } else {
        status = EXISTING;
      }
      return true;
    }
  }

  /** What the manifest-list entry of the merged manifest needs, added up entry by entry. */
  private static final class Merged {
    final List<LinkedHashSet<Object>> distinct = new ArrayList<>();
    final long[] files = new long[3];
    final long[] rows = new long[3];
    Long minSequence;
    long entries;

    Merged(int partitionFields) {
      for (int i = 0; i < partitionFields; i++) {
        distinct.add(new LinkedHashSet<>());
      }
    }

    void add(Entry e) {
      entries++;
      int k = e.status == ADDED ? 0 : e.status == EXISTING ? 1 : 2;
      files[k]++;
      rows[k] += e.records;
      if (e.status != DELETED && e.sequence != null && (minSequence == null || e.sequence < minSequence)) {
        minSequence = e.sequence;
      }
      for (int i = 0; i < distinct.size(); i++) {
        distinct.get(i).add(i < e.partition.length ? e.partition[i] : null);
      }
    }

    String json(long length) {
      StringBuilder json = new StringBuilder("{\"entries\":").append(entries).append(",\"length\":").append(length);
      json.append(",\"files\":[").append(files[0]).append(',').append(files[1]).append(',').append(files[2]).append(']');
      json.append(",\"rows\":[").append(rows[0]).append(',').append(rows[1]).append(',').append(rows[2]).append(']');
      json.append(",\"min_sequence\":").append(minSequence == null ? "null" : minSequence.toString());
      json.append(",\"partitions\":[");
      for (int i = 0; i < distinct.size(); i++) {
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
          Object value = source == null ? null : convert(in.get(source.pos()), source.schema(), f.schema());
          if (value == null && source == null && f.name().equals("content") && f.schema().getType() == Schema.Type.INT) {
            value = 0;  // a v1 data file: v1 has no content field, every file it lists holds data (0)
          }
          out.put(f.pos(), value);
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
  static Object normal(Object v) {
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
