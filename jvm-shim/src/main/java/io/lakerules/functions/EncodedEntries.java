package io.lakerules.functions;

import java.io.IOException;

import org.apache.avro.Schema;

import static io.lakerules.functions.EntryFields.DATA_FILE;
import static io.lakerules.functions.EntryFields.FILE_SEQUENCE;
import static io.lakerules.functions.EntryFields.SEQUENCE;
import static io.lakerules.functions.EntryFields.SKIP;
import static io.lakerules.functions.EntryFields.SNAPSHOT;
import static io.lakerules.functions.EntryFields.STATUS;

/**
 * A manifest merge's reader and writer of the entries of an input whose data file schema is the
 * merged manifest's (ManifestMerge), from their encoded bytes: the entry's own fields decoded, its data file's bytes carried over as they
 * are (only its record count and partition values read on the way), and written with the
 * merged manifest's field order and the decided status, snapshot id and sequence numbers.
 * Avro's generic records cost most of a merge run JIT-cold (a process's first DELETE on a table
 * of many manifests).
 */
final class EncodedEntries {
  private final AvroBinary.Node in;
  private final int[] inActions;
  private final AvroBinary.Node out;
  private final int[] outActions;
  private AvroBinary.Node file;  // the data file record last met
  private int records;
  private int partition;
  private int fileStart;
  private int fileEnd;

  private EncodedEntries(AvroBinary.Node in, int[] inActions, AvroBinary.Node out, int[] outActions) {
    this.in = in;
    this.inActions = inActions;
    this.out = out;
    this.outActions = outActions;
  }

  /** The reader of an input written with {@code writer}, or null when its entries must be converted. */
  static EncodedEntries of(Schema writer, Schema merged, AvroBinary.Node out) {
    Schema.Field from = writer.getType() == Schema.Type.RECORD ? writer.getField("data_file") : null;
    if (from == null || !from.schema().equals(merged.getField("data_file").schema())) {
      return null;
    }
    int[] outActions = EntryFields.of(out);
    for (int i = 0; i < outActions.length; i++) {
      if (outActions[i] == SKIP || !writable(outActions[i], out.fields[i])) {
        return null;  // a field the merge does not set
      }
    }
    AvroBinary.Node in = AvroBinary.compile(writer);
    return new EncodedEntries(in, EntryFields.of(in), out, outActions);
  }

  private static boolean writable(int action, AvroBinary.Node n) {
    if (action == DATA_FILE) {
      return true;
    }
    if (n.type == AvroBinary.UNION) {
      for (AvroBinary.Node b : n.branches) {
        if (b.type != AvroBinary.NULL && b.type != AvroBinary.INT && b.type != AvroBinary.LONG) {
          return false;
        }
      }
      return true;
    }
    return n.type == AvroBinary.INT || n.type == AvroBinary.LONG;
  }

  void read(AvroBinary.In at, ManifestMerge.Entry e) throws IOException {
    e.status = -1;
    e.snapshot = null;
    e.sequence = null;
    e.fileSequence = null;
    for (int i = 0; i < inActions.length; i++) {
      switch (inActions[i]) {
        case STATUS: {
          Long v = number(in.fields[i], at);
          e.status = v == null ? -1 : v.intValue();
          break;
        }
        case SNAPSHOT:
          e.snapshot = number(in.fields[i], at);
          break;
        case SEQUENCE:
          e.sequence = number(in.fields[i], at);
          break;
        case FILE_SEQUENCE:
          e.fileSequence = number(in.fields[i], at);
          break;
        case DATA_FILE:
          fileStart = at.pos;
          dataFile(in.fields[i], at, e);
          fileEnd = at.pos;
          break;
        default:
          AvroBinary.skip(in.fields[i], at);
      }
    }
    if (e.status < 0) {
      throw new IOException("a manifest entry without a status");
    }
  }

  private static Long number(AvroBinary.Node n, AvroBinary.In at) throws IOException {
    n = at.branch(n);
    if (n.type == AvroBinary.NULL) {
      return null;
    }
    if (n.type != AvroBinary.INT && n.type != AvroBinary.LONG) {
      throw new IllegalArgumentException("lakerules: a manifest field of Avro type " + n.type + ", not a number");
    }
    return at.readLong();
  }

  private void dataFile(AvroBinary.Node n, AvroBinary.In at, ManifestMerge.Entry e) throws IOException {
    n = at.branch(n);
    if (n.type != AvroBinary.RECORD) {
      throw new IllegalArgumentException("lakerules: a manifest whose data_file is not a record");
    }
    if (n != file) {
      file = n;
      records = n.field("record_count");
      partition = n.field("partition");
    }
    for (int i = 0; i < n.fields.length; i++) {
      if (i == records) {
        Long v = number(n.fields[i], at);
        e.records = v == null ? 0 : v;
      } else if (i == partition) {
        partitionValues(at.branch(n.fields[i]), at, e);
      } else {
        AvroBinary.skip(n.fields[i], at);
      }
    }
  }

  private static void partitionValues(AvroBinary.Node n, AvroBinary.In at, ManifestMerge.Entry e) throws IOException {
    int fields = n.type == AvroBinary.RECORD ? n.fields.length : 0;
    if (e.partition.length != fields) {
      e.partition = new Object[fields];
    }
    for (int i = 0; i < fields; i++) {
      AvroBinary.Node v = at.branch(n.fields[i]);
      Object value;
      switch (v.type) {
        case AvroBinary.NULL:
          value = null;
          break;
        case AvroBinary.BOOLEAN:
          value = at.readBoolean();
          break;
        case AvroBinary.INT:
          value = at.readInt();
          break;
        case AvroBinary.LONG:
          value = at.readLong();
          break;
        case AvroBinary.FLOAT:
          value = Float.intBitsToFloat(at.readFixedInt());
          break;
        case AvroBinary.DOUBLE:
          value = Double.longBitsToDouble(at.readFixedLong());
          break;
        case AvroBinary.STRING: {
          int len = at.readLength();
          value = new String(at.b, at.pos, len, java.nio.charset.StandardCharsets.UTF_8);
          at.pos += len;
          break;
        }
        case AvroBinary.BYTES:
        case AvroBinary.FIXED: {
          int len = v.type == AvroBinary.FIXED ? v.size : at.readLength();
          int from = at.pos;
          at.advance(len);
          value = ManifestMerge.normal(java.util.Arrays.copyOfRange(at.b, from, from + len));
          break;
        }
        default:
          throw new IllegalArgumentException("lakerules: a partition value of Avro type " + v.type);
      }
      e.partition[i] = value;
    }
  }

  void write(AvroBlocks.Writer w, ManifestMerge.Entry e, byte[] block) {
    for (int i = 0; i < outActions.length; i++) {
      switch (outActions[i]) {
        case STATUS:
          nullable(w, out.fields[i], (long) e.status);
          break;
        case SNAPSHOT:
          nullable(w, out.fields[i], e.snapshot);
          break;
        case SEQUENCE:
          nullable(w, out.fields[i], e.sequence);
          break;
        case FILE_SEQUENCE:
          nullable(w, out.fields[i], e.fileSequence);
          break;
        default:
          w.put(block, fileStart, fileEnd - fileStart);
      }
    }
  }

  private static void nullable(AvroBlocks.Writer w, AvroBinary.Node n, Long v) {
    if (n.type == AvroBinary.UNION) {
      for (int b = 0; b < n.branches.length; b++) {
        if ((v == null) == (n.branches[b].type == AvroBinary.NULL)) {
          w.putLong(b);
          if (v != null) {
            w.putLong(v);
          }
          return;
        }
      }
    } else if (v != null) {
      w.putLong(v);
      return;
    }
    throw new IllegalArgumentException("lakerules: a merged manifest's schema has no place for " + v);
  }
}
