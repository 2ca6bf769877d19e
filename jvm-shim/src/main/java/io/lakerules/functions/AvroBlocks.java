package io.lakerules.functions;

import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;

/**
 * The records of an Avro container file (a manifest), read block by block with one Inflater and
 * one buffer for the whole file. Avro's DataFileStream allocates a decompression stream and an
 * 8 KiB buffer per block, and pyiceberg writes a manifest as one block per entry: for such a file
 * that was most of the decoding's time. Codecs "null" and "deflate" (what Iceberg's writers use
 * for manifests) are decompressed here, any other by Avro's Codec. {@link #open} gives the
 * records as Avro's GenericRecords; {@link #blocks} gives the decompressed blocks' bytes, for a
 * reader that decodes Avro's binary encoding itself (ManifestColumns).
 */
final class AvroBlocks {
  private static final byte[] MAGIC = {'O', 'b', 'j', 1};
  /** Parsed schemas by their text: a table's manifests share a handful (parsing one costs more than its entries). */
  private static final Map<String, Schema> SCHEMAS = java.util.Collections.synchronizedMap(
      new java.util.LinkedHashMap<String, Schema>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Schema> eldest) {
          return size() > 64;
        }
      });

  private AvroBlocks() {
  }

  /** Opens the file (again, when its codec is left to Avro's reader). */
  interface Opener {
    InputStream open() throws IOException;
  }

  /**
   * A file's records in order: {@link #next} returns null after the last one, and reuses the
   * record it returned before (a caller copies what it keeps).
   */
  interface Records extends Closeable {
    GenericRecord next() throws IOException;
  }

  /** Avro's codec named {@code name} (snappy, zstandard, ...), as Avro's own file reader and writer make it. */
  private static org.apache.avro.file.Codec avroCodec(String name) throws IOException {
    try {  // CodecFactory's createInstance is protected; DataFileStream and DataFileWriter call it
      java.lang.reflect.Method create = org.apache.avro.file.CodecFactory.class.getDeclaredMethod("createInstance");
      create.setAccessible(true);
      return (org.apache.avro.file.Codec) create.invoke(org.apache.avro.file.CodecFactory.fromString(name));
    } catch (ReflectiveOperationException | org.apache.avro.AvroRuntimeException e) {
      throw new IOException("an Avro codec this reader does not know: " + name, e);
    }
  }

  /** The records of the file {@code opener} opens. */
  static Records open(Opener opener) throws IOException {
    return container(opener);
  }

  /**
   * A file's blocks, decompressed: {@link #advance} moves to the next block and returns how many
   * records it holds (-1 after the last block); their encoded bytes are {@code data()[0, length())}.
   */
  interface Blocks extends Closeable {
    Schema schema();

    long advance() throws IOException;

    byte[] data();

    int length();

    /**
     * Calls {@code read} once per record of every block, over a cursor on the block's bytes that
     * it moves past the record; a block that holds more bytes than its records is damaged.
     */
    default void eachRecord(RecordReader read) throws IOException {
      for (long count = advance(); count >= 0; count = advance()) {
        AvroBinary.In in = new AvroBinary.In(data(), 0, length());
        for (long i = 0; i < count; i++) {
          read.record(in);
        }
        if (in.pos != in.end) {
          throw new IOException("an Avro block holds more bytes than its records: the file is damaged");
        }
      }
    }
  }

  /** What reads one record from a block's bytes (see {@link Blocks#eachRecord}). */
  interface RecordReader {
    void record(AvroBinary.In in) throws IOException;
  }

  /** The blocks of the file {@code opener} opens. */
  static Blocks blocks(Opener opener) throws IOException {
    return container(opener);
  }

  private static Container container(Opener opener) throws IOException {
    InputStream stream = opener.open();
    try {
      return new Container(stream);
    } catch (IOException | RuntimeException e) {
      stream.close();
      throw e;
    }
  }

  /** A container file: codec null or deflate read here, any other through Avro's Codec. */
  private static final class Container implements Records, Blocks {
    private final InputStream stream;
    private final BinaryDecoder in;
    private final Schema schema;
    private final String codec;
    private org.apache.avro.file.Codec other;  // a codec besides null and deflate
    private final byte[] sync = new byte[16];
    private final byte[] marker = new byte[16];
    private GenericDatumReader<GenericRecord> reader;
    private Inflater inflater;
    private byte[] block = new byte[1 << 12];
    private byte[] plain = new byte[1 << 14];
    private BinaryDecoder decoder;
    private byte[] data;  // the current block, decompressed
    private int length;
    private GenericRecord record;
    private long left;  // records left in the current block

    private Container(InputStream stream) throws IOException {
      this.stream = stream;
      in = DecoderFactory.get().binaryDecoder(stream, null);
      byte[] magic = new byte[4];
      in.readFixed(magic);
      if (!Arrays.equals(magic, MAGIC)) {
        throw new IOException("not an Avro container file");
      }
      Map<String, byte[]> meta = new HashMap<>();
      for (long n = in.readMapStart(); n != 0; n = in.mapNext()) {
        for (long i = 0; i < n; i++) {
          String key = in.readString();
          java.nio.ByteBuffer value = in.readBytes(null);
          byte[] b = new byte[value.remaining()];
          value.get(b);
          meta.put(key, b);
        }
      }
      in.readFixed(sync);
      byte[] rawSchema = meta.get("avro.schema");
      if (rawSchema == null) {
        throw new IOException("no avro.schema in the file's header");
      }
      schema = SCHEMAS.computeIfAbsent(new String(rawSchema, StandardCharsets.UTF_8),
          text -> new Schema.Parser().parse(text));
      byte[] rawCodec = meta.get("avro.codec");
      codec = rawCodec == null ? "null" : new String(rawCodec, StandardCharsets.UTF_8);
      if (!"null".equals(codec) && !"deflate".equals(codec)) {
        other = avroCodec(codec);
      }
    }

    @Override
    public Schema schema() {
      return schema;
    }

    @Override
    public byte[] data() {
      return data;
    }

    @Override
    public int length() {
      return length;
    }

    @Override
    public long advance() throws IOException {
      if (in.isEnd()) {
        return -1;
      }
      long count = in.readLong();
      if (count < 0) {
        throw new IOException("a block of a negative count of records: the file is damaged");
      }
      nextBlock();
      return count;
    }

    @Override
    public GenericRecord next() throws IOException {
      while (left == 0) {
        if (in.isEnd()) {
          return null;
        }
        left = in.readLong();
        nextBlock();
        if (reader == null) {
          reader = new GenericDatumReader<>(schema);
        }
        decoder = DecoderFactory.get().binaryDecoder(data, 0, length, decoder);
      }
      left--;
      record = reader.read(record, decoder);
      return record;
    }

    private void nextBlock() throws IOException {
      int size = Math.toIntExact(in.readLong());
      if (size < 0) {
        throw new IOException("a block of negative size: the file is damaged");
      }
      if (block.length < size) {
        block = new byte[Math.max(size, block.length * 2)];
      }
      in.readFixed(block, 0, size);
      in.readFixed(marker);
      if (!Arrays.equals(marker, sync)) {
        throw new IOException("a block's sync marker does not match the file's: the file is damaged");
      }
      if ("null".equals(codec)) {
        data = block;
        length = size;
      } else if (other != null) {
        java.nio.ByteBuffer plainBlock = other.decompress(java.nio.ByteBuffer.wrap(block, 0, size));
        data = new byte[plainBlock.remaining()];
        plainBlock.get(data);
        length = data.length;
      } else {
        inflate(size);
      }
    }

    private void inflate(int size) throws IOException {
      if (inflater == null) {
        inflater = new Inflater(true);
      }
      inflater.reset();
      inflater.setInput(block, 0, size);
      int n = 0;
      try {
        while (!inflater.finished()) {
          if (n == plain.length) {
            plain = Arrays.copyOf(plain, plain.length * 2);
          }
          int got = inflater.inflate(plain, n, plain.length - n);
          n += got;
          if (got == 0 && (inflater.needsInput() || inflater.needsDictionary())) {
            throw new IOException("a block's deflate data ends early: the file is damaged");
          }
        }
      } catch (DataFormatException e) {
        throw new IOException("a block's deflate data is damaged: " + e.getMessage(), e);
      }
      data = plain;
      length = n;
    }

    @Override
    public void close() throws IOException {
      if (inflater != null) {
        inflater.end();
        inflater = null;
      }
      stream.close();
    }
  }

  /**
   * An Avro container file written from records already encoded (Avro's binary encoding of the
   * file's schema): the header (magic, the schema, the codec, the caller's metadata, a sync
   * marker), then blocks of about 64,000 bytes as Avro's DataFileWriter cuts them, each
   * compressed with the codec (deflate here, any other through Avro's Codec).
   */
  static final class Writer implements Closeable {
    private static final int BLOCK = 64000;  // Avro's DataFileConstants.DEFAULT_SYNC_INTERVAL
    private final OutputStream out;
    private final org.apache.avro.file.Codec other;
    private final java.util.zip.Deflater deflater;
    private final byte[] sync = new byte[16];
    private byte[] buffer = new byte[BLOCK + 4096];
    private int used;
    private long count;
    private byte[] packed = new byte[BLOCK + 4096];
    private final byte[] varint = new byte[10];

    Writer(OutputStream file, String schema, String[] metaKeys, String[] metaValues, String codec) throws IOException {
      out = new java.io.BufferedOutputStream(file, 1 << 16);  // the header is many small writes
      if ("deflate".equals(codec)) {
        deflater = new java.util.zip.Deflater(java.util.zip.Deflater.DEFAULT_COMPRESSION, true);
        other = null;
      } else if ("null".equals(codec)) {
        deflater = null;
        other = null;
      } else {
        deflater = null;
        other = avroCodec(codec);
      }
      new java.security.SecureRandom().nextBytes(sync);
      out.write(MAGIC);
      java.util.LinkedHashMap<String, byte[]> meta = new java.util.LinkedHashMap<>();
      meta.put("avro.schema", schema.getBytes(StandardCharsets.UTF_8));
      meta.put("avro.codec", codec.getBytes(StandardCharsets.UTF_8));
      for (int i = 0; i < metaKeys.length; i++) {
        meta.put(metaKeys[i], metaValues[i].getBytes(StandardCharsets.UTF_8));
      }
      writeLong(meta.size());
      for (Map.Entry<String, byte[]> e : meta.entrySet()) {
        byte[] key = e.getKey().getBytes(StandardCharsets.UTF_8);
        writeLong(key.length);
        out.write(key);
        writeLong(e.getValue().length);
        out.write(e.getValue());
      }
      writeLong(0);
      out.write(sync);
    }

    private void writeLong(long v) throws IOException {
      out.write(varint, 0, encode(v, varint, 0));
    }

    /** Avro's zigzag varint of {@code v} into {@code b} at {@code at}; returns its length. */
    static int encode(long v, byte[] b, int at) {
      long n = (v << 1) ^ (v >> 63);
      int i = at;
      while ((n & ~0x7FL) != 0) {
        b[i++] = (byte) ((n & 0x7f) | 0x80);
        n >>>= 7;
      }
      b[i++] = (byte) n;
      return i - at;
    }

    /** Room for {@code n} more bytes of the record being appended. */
    private void room(int n) {
      if (used + n > buffer.length) {
        buffer = Arrays.copyOf(buffer, Math.max(used + n, 2 * buffer.length));
      }
    }

    void putLong(long v) {
      room(10);
      used += encode(v, buffer, used);
    }

    void put(byte[] b, int off, int len) {
      room(len);
      System.arraycopy(b, off, buffer, used, len);
      used += len;
    }

    /** Ends the record appended since the last call; cuts a block when it is large enough. */
    void endRecord() throws IOException {
      count++;
      if (used >= BLOCK) {
        flush();
      }
    }

    private void flush() throws IOException {
      if (count == 0) {
        return;
      }
      byte[] data = buffer;
      int length = used;
      if (deflater != null) {
        deflater.reset();
        deflater.setInput(buffer, 0, used);
        deflater.finish();
        length = 0;
        while (!deflater.finished()) {
          if (length == packed.length) {
            packed = Arrays.copyOf(packed, packed.length * 2);
          }
          length += deflater.deflate(packed, length, packed.length - length);
        }
        data = packed;
      } else if (other != null) {
        java.nio.ByteBuffer c = other.compress(java.nio.ByteBuffer.wrap(buffer, 0, used));
        data = new byte[c.remaining()];
        c.get(data);
        length = data.length;
      }
      writeLong(count);
      writeLong(length);
      out.write(data, 0, length);
      out.write(sync);
      count = 0;
      used = 0;
    }

    @Override
    public void close() throws IOException {
      try {
        flush();
        out.flush();
      } finally {
        if (deflater != null) {
          deflater.end();
        }
        out.close();
      }
    }
  }
}
