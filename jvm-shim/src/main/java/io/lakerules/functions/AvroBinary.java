package io.lakerules.functions;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

import org.apache.avro.Schema;

/**
 * Avro's binary encoding read straight from a block's bytes, by a writer's schema compiled into
 * {@link Node}s: no GenericRecord, no per-value object. A reader walks the nodes of the values it
 * wants and {@link #skip}s the others. Every read is bounded by the block: a value running past
 * its end is an IOException naming the file as damaged, never a read of another block's bytes.
 */
final class AvroBinary {
  static final int NULL = 0;
  static final int BOOLEAN = 1;
  static final int INT = 2;
  static final int LONG = 3;
  static final int FLOAT = 4;
  static final int DOUBLE = 5;
  static final int BYTES = 6;
  static final int STRING = 7;
  static final int FIXED = 8;
  static final int ENUM = 9;
  static final int ARRAY = 10;
  static final int MAP = 11;
  static final int UNION = 12;
  static final int RECORD = 13;

  private static final VarHandle INTS = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

  private AvroBinary() {
  }

  /** One schema node: its type, and what a reader needs of it. */
  static final class Node {
    final int type;
    int size;  // FIXED: its size
    Node item;  // ARRAY: the item; MAP: the value
    Node[] branches;  // UNION
    Node[] fields;  // RECORD
    String[] names;  // RECORD: field names
    byte[][] symbols;  // ENUM: the symbols' UTF-8 bytes

    Node(int type) {
      this.type = type;
    }

    /** The position of field {@code name} of a RECORD (-1: none). */
    int field(String name) {
      for (int i = 0; i < names.length; i++) {
        if (names[i].equals(name)) {
          return i;
        }
      }
      return -1;
    }
  }

  /** The nodes of {@code schema} (a named type met again is the same node). */
  static Node compile(Schema schema) {
    return compile(schema, new IdentityHashMap<>());
  }

  private static Node compile(Schema s, Map<Schema, Node> seen) {
    Node known = seen.get(s);
    if (known != null) {
      return known;
    }
    switch (s.getType()) {
      case NULL:
        return new Node(NULL);
      case BOOLEAN:
        return new Node(BOOLEAN);
      case INT:
        return new Node(INT);
      case LONG:
        return new Node(LONG);
      case FLOAT:
        return new Node(FLOAT);
      case DOUBLE:
        return new Node(DOUBLE);
      case BYTES:
        return new Node(BYTES);
      case STRING:
        return new Node(STRING);
      case FIXED: {
        Node n = new Node(FIXED);
        n.size = s.getFixedSize();
        seen.put(s, n);
        return n;
      }
      case ENUM: {
        Node n = new Node(ENUM);
        List<String> symbols = s.getEnumSymbols();
        n.symbols = new byte[symbols.size()][];
        for (int i = 0; i < n.symbols.length; i++) {
          n.symbols[i] = symbols.get(i).getBytes(java.nio.charset.StandardCharsets.UTF_8);
        }
        seen.put(s, n);
        return n;
      }
      case ARRAY: {
        Node n = new Node(ARRAY);
        n.item = compile(s.getElementType(), seen);
        return n;
      }
      case MAP: {
        Node n = new Node(MAP);
        n.item = compile(s.getValueType(), seen);
        return n;
      }
      case UNION: {
        Node n = new Node(UNION);
        List<Schema> types = s.getTypes();
        n.branches = new Node[types.size()];
        for (int i = 0; i < n.branches.length; i++) {
          n.branches[i] = compile(types.get(i), seen);
        }
        return n;
      }
      case RECORD: {
        Node n = new Node(RECORD);
        seen.put(s, n);  // before its fields: a record may hold itself
        List<Schema.Field> fields = s.getFields();
        n.fields = new Node[fields.size()];
        n.names = new String[fields.size()];
        for (int i = 0; i < n.fields.length; i++) {
          n.names[i] = fields.get(i).name();
          n.fields[i] = compile(fields.get(i).schema(), seen);
        }
        return n;
      }
      default:
        throw new IllegalArgumentException("lakerules: an Avro type this reader does not know: " + s.getType());
    }
  }

  /** A cursor over one block's encoded bytes {@code [pos, end)}. */
  static final class In {
    final byte[] b;
    int pos;
    final int end;

    In(byte[] b, int pos, int end) {
      this.b = b;
      this.pos = pos;
      this.end = end;
    }

    long readLong() throws IOException {
      long raw = 0;
      int shift = 0;
      while (true) {
        if (pos >= end) {
          throw damaged();
        }
        int x = b[pos++];
        raw |= (long) (x & 0x7f) << shift;
        if ((x & 0x80) == 0) {
          break;
        }
        shift += 7;
        if (shift > 63) {
          throw damaged();
        }
      }
      return (raw >>> 1) ^ -(raw & 1);
    }

    int readInt() throws IOException {
      return (int) readLong();
    }

    /** The length of a bytes or string value; {@link #pos} is then at its first byte. */
    int readLength() throws IOException {
      long n = readLong();
      if (n < 0 || n > end - pos) {
        throw damaged();
      }
      return (int) n;
    }

    void advance(long n) throws IOException {
      if (n < 0 || n > end - pos) {
        throw damaged();
      }
      pos += (int) n;
    }

    int readFixedInt() throws IOException {
      int at = pos;
      advance(4);
      return (int) INTS.get(b, at);
    }

    long readFixedLong() throws IOException {
      int at = pos;
      advance(8);
      return (long) LONGS.get(b, at);
    }

    boolean readBoolean() throws IOException {
      advance(1);
      return b[pos - 1] != 0;
    }

    /** The node a union's value takes (itself when it is not a union). */
    Node branch(Node n) throws IOException {
      while (n.type == UNION) {
        int i = readInt();
        if (i < 0 || i >= n.branches.length) {
          throw damaged();
        }
        n = n.branches[i];
      }
      return n;
    }

    /**
     * The count of the next block of an array's or map's items (0: no more). A negative count is
     * followed by the block's size in bytes, which a reader of the items does not need.
     */
    long blockCount() throws IOException {
      long count = readLong();
      if (count < 0) {
        readLong();
        count = -count;
      }
      return count;
    }

    static IOException damaged() {
      return new IOException("a value runs past the end of its Avro block: the file is damaged");
    }
  }

  /** Reads over the value {@code n} at the cursor. */
  static void skip(Node n, In in) throws IOException {
    switch (n.type) {
      case NULL:
        return;
      case BOOLEAN:
        in.advance(1);
        return;
      case INT:
      case LONG:
      case ENUM:
        in.readLong();
        return;
      case FLOAT:
        in.advance(4);
        return;
      case DOUBLE:
        in.advance(8);
        return;
      case BYTES:
      case STRING:
        in.advance(in.readLength());
        return;
      case FIXED:
        in.advance(n.size);
        return;
      case ARRAY:
      case MAP:
        for (long count = in.readLong(); count != 0; count = in.readLong()) {
          if (count < 0) {
            in.advance(in.readLong());  // the block's size in bytes: skipped whole
            continue;
          }
          for (long i = 0; i < count; i++) {
            if (n.type == MAP) {
              in.advance(in.readLength());
            }
            skip(n.item, in);
          }
        }
        return;
      case UNION:
        skip(in.branch(n), in);
        return;
      case RECORD:
        for (Node f : n.fields) {
          skip(f, in);
        }
        return;
      default:
        throw new IllegalStateException("lakerules: Avro node of type " + n.type);
    }
  }

  /** A little-endian int of {@code b} at {@code at} (Iceberg's single-value serialization). */
  static int intAt(byte[] b, int at) {
    return (int) INTS.get(b, at);
  }

  /** A little-endian long of {@code b} at {@code at}. */
  static long longAt(byte[] b, int at) {
    return (long) LONGS.get(b, at);
  }
}
