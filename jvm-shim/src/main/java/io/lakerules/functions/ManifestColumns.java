package io.lakerules.functions;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;

import static io.lakerules.functions.EntryFields.DATA_FILE;
import static io.lakerules.functions.EntryFields.SKIP;
import static io.lakerules.functions.EntryFields.STATUS;

/**
 * Decodes Iceberg manifests on the driver into columns, one row per live entry, for scan
 * planning's manifest cache (lakerules.scan.manifest_columns): no Python object per entry. The
 * entries are decoded from Avro's binary encoding by the file's own schema (AvroBinary), with no
 * GenericRecord per entry: a process's first planning of a table runs this code JIT-cold, and
 * Avro's generic reader spent most of that time. The entry's scalar fields are columns of their
 * own; its metric maps travel as one binary value each (little-endian: per key an int key, then a
 * long value, or an int length and the bytes); split offsets and equality ids as little-endian
 * longs and ints. Partition values are columns p0.. of the kinds asked for (int, long, float,
 * double, boolean, string; anything else as its bytes), and the lower and upper bounds of the
 * columns asked for are decoded from Iceberg's single-value serialization (as
 * ManifestEntries.decode does) into lower_ID and upper_ID. A manifest whose schema holds a field
 * of another type than Iceberg's is refused (IllegalArgumentException): pyiceberg reads it.
 */
public final class ManifestColumns {
  private static final int DELETED = 2;
  private static final byte[] MAGIC = {'L', 'R', 'M', 'C', 1, 0, 0, 0};

  private ManifestColumns() {
  }

  /**
   * Writes the live entries of the manifests {@code paths} (NUL-separated, all of one partition
   * spec) as columns to the local file {@code out} (a temporary file of the Python process: Py4J's
   * transfer of a byte array costs more than the decoding): after 8 bytes of magic, the columns
   * of all the manifests' entries, manifest after manifest, as ColumnBuffers writes them. Returns
   * how many rows each manifest has, comma-separated. The manifests are read in parallel. {@code partitionKinds}: the
   * kinds of the spec's partition fields, comma-separated; {@code bounds}: the columns whose
   * bounds to decode, "id:kind", comma-separated.
   */
  public static String read(SparkSession session, String paths, String partitionKinds, String bounds, String out)
      throws Exception {
    String[] manifests = Joined.strings(paths);
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
    StringBuilder counts = new StringBuilder();
    List<ColumnBuffers.Column[]> parts = new ArrayList<>();
    try {
      List<java.util.concurrent.Future<ColumnBuffers.Column[]>> done = new ArrayList<>();
      for (String manifest : manifests) {
        done.add(pool.submit(() -> live(conf, manifest, kinds, boundIds, boundKinds)));
      }
      for (java.util.concurrent.Future<ColumnBuffers.Column[]> f : done) {
        try {
          parts.add(f.get());
        } catch (java.util.concurrent.ExecutionException e) {
          throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        }
        counts.append(counts.length() == 0 ? "" : ",").append(parts.get(parts.size() - 1)[0].size);
      }
    } finally {
      pool.shutdownNow();
    }
    try (java.io.OutputStream file = new java.io.BufferedOutputStream(
        java.nio.file.Files.newOutputStream(java.nio.file.Paths.get(out)), 1 << 16)) {
      file.write(MAGIC);
      ColumnBuffers.write(parts, file);
    } catch (IOException e) {
      throw new UncheckedIOException("lakerules: cannot write the columns of manifests: " + e.getMessage(), e);
    }
    return counts.toString();
  }

  /** The live entries of one manifest as columns (on a pool thread). */
  private static ColumnBuffers.Column[] live(java.util.function.Supplier<Configuration> conf, String path,
                                             String[] kinds, int[] boundIds, String[] boundKinds) {
    try (AvroBlocks.Blocks blocks = AvroBlocks.blocks(() -> ManifestMerge.open(conf, path))) {
      Decoder decoder = new Decoder(AvroBinary.compile(blocks.schema()), kinds, boundIds, boundKinds);
      blocks.eachRecord(decoder::entry);
      return decoder.columns;
    } catch (IOException e) {
      throw new UncheckedIOException("lakerules: cannot read manifest " + path + ": " + e.getMessage(), e);
    }
  }

  private static final String[] MAPS = {"column_sizes", "value_counts", "null_value_counts", "nan_value_counts",
      "lower_bounds", "upper_bounds"};
  private static final int LOWER = 4;
  private static final int UPPER = 5;

  // what a field of the data_file record is read into (after EntryFields' codes of the entry's own)
  private static final int CONTENT = 6;
  private static final int PATH = 7;
  private static final int FORMAT = 8;
  private static final int RECORDS = 9;
  private static final int SIZE = 10;
  private static final int KEY_METADATA = 11;
  private static final int SORT_ORDER = 12;
  private static final int SPLITS = 13;
  private static final int EQUALITY_IDS = 14;
  private static final int PARTITION = 15;
  private static final int MAP0 = 16;  // MAP0 + k: MAPS[k]
  private static final String[] FILE_FIELDS = {null, null, null, null, null, null, "content", "file_path",
      "file_format", "record_count", "file_size_in_bytes", "key_metadata", "sort_order_id", "split_offsets",
      "equality_ids", "partition"};
  /** The column each action fills (the order of the columns the Python side reads). */
  private static final int[] COLUMN_OF = {-1, 0, 1, 2, 3, -1, 4, 5, 6, 7, 8, 9, 10, 11, 12, -1};
  private static final int[] FIXED_KINDS = {ColumnBuffers.INT, ColumnBuffers.LONG, ColumnBuffers.LONG,
      ColumnBuffers.LONG, ColumnBuffers.INT, ColumnBuffers.STRING, ColumnBuffers.STRING, ColumnBuffers.LONG,
      ColumnBuffers.LONG, ColumnBuffers.BINARY, ColumnBuffers.INT, ColumnBuffers.BINARY, ColumnBuffers.BINARY};
  private static final int CONTENT_COLUMN = 4;

  /**
   * Decodes manifest entries from Avro's binary encoding by the file's schema into columns: the
   * entry's fields (FIXED_KINDS, then the six metric maps packed as the class comment says), the
   * partition values p0.., then lower and upper bounds of each column asked for. A field the
   * schema lacks is null (content: 0, data); a deleted entry's row is dropped.
   */
  private static final class Decoder {
    final ColumnBuffers.Column[] columns;
    private final int[] entryActions;
    private final AvroBinary.Node entry;
    private AvroBinary.Node file;
    private int[] fileActions;
    private final ColumnBuffers.Column[] partition;
    private final ColumnBuffers.Column[] lower;
    private final ColumnBuffers.Column[] upper;
    private final int[] boundIds;
    private final boolean[] seen;  // bounds set for the row, lower then upper
    private int status;  // the row's
    private AvroBinary.Node keyValue;  // a metric map's item record, checked

    Decoder(AvroBinary.Node entry, String[] kinds, int[] boundIds, String[] boundKinds) {
      if (entry.type != AvroBinary.RECORD) {
        throw new IllegalArgumentException("lakerules: a manifest whose entries are not records");
      }
      this.entry = entry;
      this.boundIds = boundIds;
      entryActions = EntryFields.of(entry);
      int fixed = FIXED_KINDS.length;
      columns = new ColumnBuffers.Column[fixed + MAPS.length + kinds.length + 2 * boundIds.length];
      int c = 0;
      for (int kind : FIXED_KINDS) {
        columns[c++] = new ColumnBuffers.Column(kind);
      }
      for (int k = 0; k < MAPS.length; k++) {
        columns[c++] = new ColumnBuffers.Column(ColumnBuffers.BINARY);
      }
      partition = new ColumnBuffers.Column[kinds.length];
      for (int k = 0; k < kinds.length; k++) {
        partition[k] = columns[c++] = new ColumnBuffers.Column(ColumnBuffers.kind(kinds[k]));
      }
      lower = new ColumnBuffers.Column[boundIds.length];
      upper = new ColumnBuffers.Column[boundIds.length];
      for (int k = 0; k < boundIds.length; k++) {
        lower[k] = columns[c++] = new ColumnBuffers.Column(ColumnBuffers.kind(boundKinds[k]));
        upper[k] = columns[c++] = new ColumnBuffers.Column(ColumnBuffers.kind(boundKinds[k]));
      }
      seen = new boolean[2 * boundIds.length];
    }

    /** Per field of a data_file record, what it is read into (SKIP: nothing). */
    private static int[] fileActions(AvroBinary.Node record) {
      int[] out = new int[record.names.length];
      for (int i = 0; i < out.length; i++) {
        for (int a = CONTENT; a < FILE_FIELDS.length; a++) {
          if (FILE_FIELDS[a].equals(record.names[i])) {
            out[i] = a;
          }
        }
        for (int k = 0; k < MAPS.length; k++) {
          if (MAPS[k].equals(record.names[i])) {
            out[i] = MAP0 + k;
          }
        }
      }
      return out;
    }

    void entry(AvroBinary.In in) throws IOException {
      int row = columns[0].size;
      java.util.Arrays.fill(seen, false);
      for (int i = 0; i < entryActions.length; i++) {
        int action = entryActions[i];
        if (action == SKIP) {
          AvroBinary.skip(entry.fields[i], in);
        } else if (action == DATA_FILE) {
          dataFile(in.branch(entry.fields[i]), in);
        } else {
          number(entry.fields[i], in, columns[COLUMN_OF[action]]);
        }
      }
      if (columns[0].size == row || columns[0].isNull(row)) {
        throw new IOException("a manifest entry without a status");
      }
      for (int c = 0; c < columns.length; c++) {
        if (columns[c].size == row) {
          if (c == CONTENT_COLUMN) {
            columns[c].addInt(0);  // data, as a v1 manifest's entries are
          } else {
            columns[c].addNull();
          }
        }
      }
      if (status == DELETED) {
        for (ColumnBuffers.Column c : columns) {
          c.truncate(row);
        }
      }
    }

    private void dataFile(AvroBinary.Node record, AvroBinary.In in) throws IOException {
      if (record.type == AvroBinary.NULL) {
        return;
      }
      if (record.type != AvroBinary.RECORD) {
        throw new IllegalArgumentException("lakerules: a manifest whose data_file is not a record");
      }
      if (record != file) {
        file = record;
        fileActions = fileActions(record);
      }
      for (int i = 0; i < fileActions.length; i++) {
        AvroBinary.Node n = record.fields[i];
        int action = fileActions[i];
        switch (action) {
          case SKIP:
            AvroBinary.skip(n, in);
            break;
          case CONTENT:
          case RECORDS:
          case SIZE:
          case SORT_ORDER:
            number(n, in, columns[COLUMN_OF[action]]);
            break;
          case PATH:
          case FORMAT:
          case KEY_METADATA:
            bytes(n, in, columns[COLUMN_OF[action]]);
            break;
          case SPLITS:
          case EQUALITY_IDS:
            numbers(n, in, columns[COLUMN_OF[action]], action == SPLITS);
            break;
          case PARTITION:
            partition(in.branch(n), in);
            break;
          default:
            metrics(n, in, action - MAP0);
        }
      }
    }

    /** An int or long (or a union of one with null) into an INT or LONG column. */
    private void number(AvroBinary.Node n, AvroBinary.In in, ColumnBuffers.Column c) throws IOException {
      n = in.branch(n);
      if (n.type == AvroBinary.NULL) {
        c.addNull();
        return;
      }
      if (n.type != AvroBinary.INT && n.type != AvroBinary.LONG) {
        throw new IllegalArgumentException("lakerules: a manifest field of Avro type " + n.type + ", not a number");
      }
      long v = in.readLong();
      if (c == columns[0]) {
        status = (int) v;
      }
      if (c.kind == ColumnBuffers.INT) {
        c.addInt((int) v);
      } else {
        c.addLong(v);
      }
    }

    /** A string, bytes, fixed or enum value as its bytes. */
    private static void bytes(AvroBinary.Node n, AvroBinary.In in, ColumnBuffers.Column c) throws IOException {
      n = in.branch(n);
      switch (n.type) {
        case AvroBinary.NULL:
          c.addNull();
          return;
        case AvroBinary.STRING:
        case AvroBinary.BYTES: {
          int len = in.readLength();
          c.addBytes(in.b, in.pos, len);
          in.pos += len;
          return;
        }
        case AvroBinary.FIXED: {
          int at = in.pos;
          in.advance(n.size);
          c.addBytes(in.b, at, n.size);
          return;
        }
        case AvroBinary.ENUM: {
          int i = in.readInt();
          if (i < 0 || i >= n.symbols.length) {
            throw AvroBinary.In.damaged();
          }
          c.addBytes(n.symbols[i], 0, n.symbols[i].length);
          return;
        }
        default:
          throw new IllegalArgumentException("lakerules: a manifest field of Avro type " + n.type + ", not bytes");
      }
    }

    /** An array of longs (split offsets) or ints (equality ids), packed little-endian. */
    private static void numbers(AvroBinary.Node n, AvroBinary.In in, ColumnBuffers.Column c, boolean longs)
        throws IOException {
      n = in.branch(n);
      if (n.type == AvroBinary.NULL) {
        c.addNull();
        return;
      }
      if (n.type != AvroBinary.ARRAY) {
        throw new IllegalArgumentException("lakerules: a manifest field of Avro type " + n.type + ", not an array");
      }
      c.begin();
      for (long count = in.blockCount(); count != 0; count = in.blockCount()) {
        for (long i = 0; i < count; i++) {
          AvroBinary.Node item = in.branch(n.item);
          if (item.type != AvroBinary.INT && item.type != AvroBinary.LONG) {
            throw new IllegalArgumentException("lakerules: an array item of Avro type " + item.type + ", not a number");
          }
          long v = in.readLong();
          if (longs) {
            c.putLong(v);
          } else {
            c.putInt((int) v);
          }
        }
      }
      c.end();
    }

    private void partition(AvroBinary.Node record, AvroBinary.In in) throws IOException {
      if (record.type == AvroBinary.NULL) {
        return;
      }
      if (record.type != AvroBinary.RECORD) {
        throw new IllegalArgumentException("lakerules: a manifest whose partition is not a record");
      }
      for (int i = 0; i < record.fields.length; i++) {
        if (i >= partition.length) {
          AvroBinary.skip(record.fields[i], in);
          continue;
        }
        ColumnBuffers.Column c = partition[i];
        AvroBinary.Node n = in.branch(record.fields[i]);
        switch (n.type) {
          case AvroBinary.NULL:
            c.addNull();
            break;
          case AvroBinary.INT:
          case AvroBinary.LONG:
            numberAs(c, in.readLong());
            break;
          case AvroBinary.FLOAT:
            realAs(c, Float.intBitsToFloat(in.readFixedInt()));
            break;
          case AvroBinary.DOUBLE:
            realAs(c, Double.longBitsToDouble(in.readFixedLong()));
            break;
          case AvroBinary.BOOLEAN:
            if (c.kind != ColumnBuffers.BOOLEAN) {
              throw mismatch(c, n);
            }
            c.addBoolean(in.readBoolean());
            break;
          case AvroBinary.STRING:
          case AvroBinary.BYTES:
          case AvroBinary.FIXED:
            if (c.kind != ColumnBuffers.STRING && c.kind != ColumnBuffers.BINARY) {
              throw mismatch(c, n);
            }
            bytes(n, in, c);
            break;
          default:
            throw mismatch(c, n);
        }
      }
    }

    private static IllegalArgumentException mismatch(ColumnBuffers.Column c, AvroBinary.Node n) {
      return new IllegalArgumentException("lakerules: a partition value of Avro type " + n.type
          + " for a column of kind " + c.kind);
    }

    private static void numberAs(ColumnBuffers.Column c, long v) {
      switch (c.kind) {
        case ColumnBuffers.INT:
          c.addInt((int) v);
          return;
        case ColumnBuffers.LONG:
          c.addLong(v);
          return;
        case ColumnBuffers.FLOAT:
          c.addFloat(v);
          return;
        case ColumnBuffers.DOUBLE:
          c.addDouble(v);
          return;
        default:
          throw new IllegalArgumentException("lakerules: a number as a partition value of kind " + c.kind);
      }
    }

    private static void realAs(ColumnBuffers.Column c, double v) {
      switch (c.kind) {
        case ColumnBuffers.INT:
          c.addInt((int) v);
          return;
        case ColumnBuffers.LONG:
          c.addLong((long) v);
          return;
        case ColumnBuffers.FLOAT:
          c.addFloat((float) v);
          return;
        case ColumnBuffers.DOUBLE:
          c.addDouble(v);
          return;
        default:
          throw new IllegalArgumentException("lakerules: a number as a partition value of kind " + c.kind);
      }
    }

    /**
     * An int-keyed metric map (Iceberg writes an array of key/value records; an Avro map with
     * the keys as strings is read too) packed as the column holds it: per key an int key, then a
     * long value, or an int length and the bytes; a key with no value is left out. The bounds of
     * the columns asked for are decoded on the way.
     */
    private void metrics(AvroBinary.Node n, AvroBinary.In in, int k) throws IOException {
      ColumnBuffers.Column c = columns[FIXED_KINDS.length + k];
      n = in.branch(n);
      if (n.type == AvroBinary.NULL) {
        c.addNull();
        return;
      }
      boolean binary = k >= LOWER;
      ColumnBuffers.Column[] bounds = k == LOWER ? lower : k == UPPER ? upper : null;
      int seenAt = k == UPPER ? boundIds.length : 0;
      c.begin();
      if (n.type == AvroBinary.MAP) {
        for (long count = in.blockCount(); count != 0; count = in.blockCount()) {
          for (long i = 0; i < count; i++) {
            int len = in.readLength();
            int key;
            try {
              key = Integer.parseInt(new String(in.b, in.pos, len, java.nio.charset.StandardCharsets.UTF_8));
            } catch (NumberFormatException e) {
              throw new IllegalArgumentException("lakerules: a metric map whose key is not a field id");
            }
            in.pos += len;
            value(in.branch(n.item), in, c, key, binary, bounds, seenAt);
          }
        }
      } else if (n.type == AvroBinary.ARRAY) {
        for (long count = in.blockCount(); count != 0; count = in.blockCount()) {
          for (long i = 0; i < count; i++) {
            AvroBinary.Node kv = in.branch(n.item);
            if (kv != keyValue) {
              if (kv.type != AvroBinary.RECORD || kv.fields.length != 2 || !"key".equals(kv.names[0])
                  || !"value".equals(kv.names[1])) {
                throw new IllegalArgumentException("lakerules: a metric map whose items are not key/value records");
              }
              keyValue = kv;
            }
            AvroBinary.Node keyNode = in.branch(kv.fields[0]);
            if (keyNode.type != AvroBinary.INT && keyNode.type != AvroBinary.LONG) {
              throw new IllegalArgumentException("lakerules: a metric map whose keys are not ints");
            }
            int key = in.readInt();
            value(in.branch(kv.fields[1]), in, c, key, binary, bounds, seenAt);
          }
        }
      } else {
        throw new IllegalArgumentException("lakerules: a metric map of Avro type " + n.type);
      }
      c.end();
    }

    private void value(AvroBinary.Node v, AvroBinary.In in, ColumnBuffers.Column c, int key, boolean binary,
                       ColumnBuffers.Column[] bounds, int seenAt) throws IOException {
      if (v.type == AvroBinary.NULL) {
        return;  // a key with no value: left out
      }
      if (!binary) {
        if (v.type != AvroBinary.INT && v.type != AvroBinary.LONG) {
          throw new IllegalArgumentException("lakerules: a count metric of Avro type " + v.type);
        }
        c.putInt(key);
        c.putLong(in.readLong());
        return;
      }
      int len;
      if (v.type == AvroBinary.BYTES) {
        len = in.readLength();
      } else if (v.type == AvroBinary.FIXED) {
        len = v.size;
      } else {
        throw new IllegalArgumentException("lakerules: a bound of Avro type " + v.type);
      }
      int at = in.pos;
      in.advance(len);
      c.putInt(key);
      c.putInt(len);
      c.put(in.b, at, len);
      for (int j = 0; j < boundIds.length; j++) {
        if (boundIds[j] == key && !seen[seenAt + j]) {
          seen[seenAt + j] = true;
          bound(bounds[j], in.b, at, len);
        }
      }
    }
  }

  /** A bound in Iceberg's single-value serialization into a column of its kind (ManifestEntries.decode). */
  private static void bound(ColumnBuffers.Column c, byte[] b, int at, int len) {
    switch (c.kind) {
      case ColumnBuffers.INT:
      case ColumnBuffers.FLOAT:  // its bits, as the column keeps them
        if (len < 4) {
          c.addNull();
        } else {
          c.addInt(AvroBinary.intAt(b, at));
        }
        return;
      case ColumnBuffers.LONG:
      case ColumnBuffers.DOUBLE:  // a double's bits, as the column keeps them
        if (len == 4) {  // a column promoted from int or float keeps its 4-byte bounds
          int four = AvroBinary.intAt(b, at);
          if (c.kind == ColumnBuffers.LONG) {
            c.addLong(four);
          } else {
            c.addDouble(Float.intBitsToFloat(four));
          }
        } else if (len < 8) {
          c.addNull();
        } else {
          c.addLong(AvroBinary.longAt(b, at));
        }
        return;
      case ColumnBuffers.STRING:
        for (int i = at; i < at + len; i++) {
          if (b[i] < 0) {  // not ASCII: as a Java string reads it (malformed bytes replaced)
            byte[] text = new String(b, at, len, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8);
            c.addBytes(text, 0, text.length);
            return;
          }
        }
        c.addBytes(b, at, len);
        return;
      default:
        c.addBytes(b, at, len);
    }
  }
}
