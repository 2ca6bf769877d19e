package io.lakerules.functions;

import java.io.DataOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.List;

/**
 * Growable columns of values, written as the raw little-endian buffers of Arrow's columnar layout
 * (a validity bitmap, then the values, or the int32 offsets and the bytes of variable-width
 * values), which Python wraps with pyarrow's {@code Array.from_buffers} without a copy
 * (lakerules.spark.manifest_io reads them). Arrow's Java library is not needed for that, and
 * loading and running it JIT-cold cost more than the values did in a process's first planning.
 *
 * <p>The stream: per column, each buffer as its length (int64, little-endian) then its bytes,
 * padded with zeros to a multiple of 8. A column's validity buffer is empty when it has no null.
 */
final class ColumnBuffers {
  static final int INT = 1;
  static final int LONG = 2;
  static final int FLOAT = 3;
  static final int DOUBLE = 4;
  static final int BOOLEAN = 5;
  static final int STRING = 6;
  static final int BINARY = 7;

  private ColumnBuffers() {
  }

  /** The column kind of a kind name the Python side passes (int, long, ...; anything else: binary). */
  static int kind(String name) {
    switch (name) {
      case "int":
        return INT;
      case "long":
        return LONG;
      case "float":
        return FLOAT;
      case "double":
        return DOUBLE;
      case "boolean":
        return BOOLEAN;
      case "string":
        return STRING;
      default:
        return BINARY;
    }
  }

  /** One column: {@link #size} values, appended one at a time (null, or one of its kind). */
  static final class Column {
    final int kind;
    int size;
    private byte[] valid = new byte[64];  // a byte per value until written
    private boolean anyNull;
    private int[] ints;  // INT, FLOAT (bits), BOOLEAN
    private long[] longs;  // LONG, DOUBLE (bits)
    private int[] offsets;  // STRING, BINARY
    private byte[] bytes;
    private int used;  // bytes used

    Column(int kind) {
      this.kind = kind;
      if (kind == LONG || kind == DOUBLE) {
        longs = new long[64];
      } else if (kind == STRING || kind == BINARY) {
        offsets = new int[65];
        bytes = new byte[1024];
      } else {
        ints = new int[64];
      }
    }

    private void grow() {
      if (size + 1 < valid.length) {
        return;
      }
      int n = valid.length * 2;
      valid = Arrays.copyOf(valid, n);
      if (longs != null) {
        longs = Arrays.copyOf(longs, n);
      } else if (offsets != null) {
        offsets = Arrays.copyOf(offsets, n + 1);
      } else {
        ints = Arrays.copyOf(ints, n);
      }
    }

    boolean isNull(int i) {
      return valid[i] == 0;
    }

    void addNull() {
      grow();
      valid[size] = 0;
      anyNull = true;
      if (offsets != null) {
        offsets[size + 1] = used;
      }
      size++;
    }

    void addInt(int v) {
      grow();
      valid[size] = 1;
      ints[size++] = v;
    }

    void addLong(long v) {
      grow();
      valid[size] = 1;
      longs[size++] = v;
    }

    void addFloat(float v) {
      addInt(Float.floatToRawIntBits(v));
    }

    void addDouble(double v) {
      addLong(Double.doubleToRawLongBits(v));
    }

    void addBoolean(boolean v) {
      addInt(v ? 1 : 0);
    }

    void addBytes(byte[] b, int off, int len) {
      begin();
      put(b, off, len);
      end();
    }

    /** Starts a variable-width value appended by {@link #put}, {@link #putInt}, {@link #putLong}. */
    void begin() {
      grow();
    }

    private void room(int n) {
      if (used + n > bytes.length) {
        long want = Math.max((long) used + n, 2L * bytes.length);
        if (want > Integer.MAX_VALUE - 8) {
          throw new IllegalStateException("lakerules: more than 2 GiB of values in one manifest's column");
        }
        bytes = Arrays.copyOf(bytes, (int) want);
      }
    }

    void put(byte[] b, int off, int len) {
      room(len);
      System.arraycopy(b, off, bytes, used, len);
      used += len;
    }

    void putInt(int v) {
      room(4);  // byte by byte: a VarHandle costs more until the JIT inlines it, and this runs JIT-cold
      bytes[used] = (byte) v;
      bytes[used + 1] = (byte) (v >>> 8);
      bytes[used + 2] = (byte) (v >>> 16);
      bytes[used + 3] = (byte) (v >>> 24);
      used += 4;
    }

    void putLong(long v) {
      room(8);
      putInt((int) v);
      putInt((int) (v >>> 32));
    }

    void end() {
      valid[size] = 1;
      offsets[size + 1] = used;
      size++;
    }

    /** Drops the values from the {@code n}th on. */
    void truncate(int n) {
      if (n < size && offsets != null) {
        used = offsets[n];
      }
      size = Math.min(size, n);
    }
  }

  private static void buffer(DataOutputStream out, byte[] b, int len) throws IOException {
    out.writeLong(Long.reverseBytes(len));
    out.write(b, 0, len);
    int pad = (8 - (len & 7)) & 7;
    for (int i = 0; i < pad; i++) {
      out.write(0);
    }
  }

  /**
   * Writes the columns of {@code parts} (each an array of the same columns, e.g. one per
   * manifest) to {@code out}, column by column, each column's values of every part one after the
   * other: one column of all their rows.
   */
  static void write(List<Column[]> parts, OutputStream out) throws IOException {
    DataOutputStream data = new DataOutputStream(out);
    int columns = parts.isEmpty() ? 0 : parts.get(0).length;
    int rows = 0;
    for (Column[] part : parts) {
      rows += part[0].size;
    }
    for (int c = 0; c < columns; c++) {
      write(parts, c, rows, data);
    }
    data.flush();
  }

  private static void write(List<Column[]> parts, int c, int rows, DataOutputStream out) throws IOException {
    Column first = parts.get(0)[c];
    boolean anyNull = false;
    for (Column[] part : parts) {
      anyNull |= part[c].anyNull;
    }
    if (anyNull) {
      byte[] bits = new byte[(rows + 7) / 8];
      int at = 0;
      for (Column[] part : parts) {
        Column col = part[c];
        for (int i = 0; i < col.size; i++, at++) {
          if (col.valid[i] != 0) {
            bits[at >> 3] |= (byte) (1 << (at & 7));
          }
        }
      }
      buffer(out, bits, bits.length);
    } else {
      buffer(out, new byte[0], 0);
    }
    switch (first.kind) {
      case LONG:
      case DOUBLE: {
        ByteBuffer b = ByteBuffer.allocate(rows * 8).order(ByteOrder.LITTLE_ENDIAN);
        for (Column[] part : parts) {
          b.asLongBuffer().put(part[c].longs, 0, part[c].size);
          b.position(b.position() + part[c].size * 8);
        }
        buffer(out, b.array(), rows * 8);
        break;
      }
      case BOOLEAN: {
        byte[] bits = new byte[(rows + 7) / 8];
        int at = 0;
        for (Column[] part : parts) {
          for (int i = 0; i < part[c].size; i++, at++) {
            if (part[c].ints[i] != 0) {
              bits[at >> 3] |= (byte) (1 << (at & 7));
            }
          }
        }
        buffer(out, bits, bits.length);
        break;
      }
      case STRING:
      case BINARY: {
        ByteBuffer b = ByteBuffer.allocate((rows + 1) * 4).order(ByteOrder.LITTLE_ENDIAN);
        long base = 0;
        for (Column[] part : parts) {
          for (int i = 0; i < part[c].size; i++) {
            b.putInt((int) (base + part[c].offsets[i]));
          }
          base += part[c].used;
          if (base > Integer.MAX_VALUE) {
            throw new IllegalStateException("lakerules: more than 2 GiB of values in one column of manifests");
          }
        }
        b.putInt((int) base);
        buffer(out, b.array(), (rows + 1) * 4);
        out.writeLong(Long.reverseBytes(base));
        for (Column[] part : parts) {
          out.write(part[c].bytes, 0, part[c].used);
        }
        for (long pad = (8 - (base & 7)) & 7; pad > 0; pad--) {
          out.write(0);
        }
        break;
      }
      default: {
        ByteBuffer b = ByteBuffer.allocate(rows * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (Column[] part : parts) {
          b.asIntBuffer().put(part[c].ints, 0, part[c].size);
          b.position(b.position() + part[c].size * 4);
        }
        buffer(out, b.array(), rows * 4);
      }
    }
  }
}
