package io.lakerules.functions;

import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;

import org.apache.avro.Schema;
import org.apache.avro.file.DataFileStream;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;

/**
 * The records of an Avro container file (a manifest), read block by block with one Inflater and
 * one buffer for the whole file. Avro's DataFileStream allocates a decompression stream and an
 * 8 KiB buffer per block, and pyiceberg writes a manifest as one block per entry: for such a file
 * that was most of the decoding's time. Codecs "null" and "deflate" (what Iceberg's writers use
 * for manifests) are read here; a file with another codec is read by Avro's DataFileStream.
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

  /** The records of the file {@code opener} opens. */
  static Records open(Opener opener) throws IOException {
    InputStream stream = opener.open();
    Container file;
    try {
      file = new Container(stream);
    } catch (IOException | RuntimeException e) {
      stream.close();
      throw e;
    }
    if ("null".equals(file.codec) || "deflate".equals(file.codec)) {
      return file;
    }
    file.close();
    return avro(opener.open());
  }

  /** Avro's own reader, for the codecs this one leaves to it. */
  private static Records avro(InputStream stream) throws IOException {
    DataFileStream<GenericRecord> records;
    try {
      records = new DataFileStream<>(stream, new GenericDatumReader<>());
    } catch (IOException | RuntimeException e) {
      stream.close();
      throw e;
    }
    return new Records() {
      private GenericRecord last;

      @Override
      public GenericRecord next() throws IOException {
        if (!records.hasNext()) {
          return null;
        }
        last = records.next(last);
        return last;
      }

      @Override
      public void close() throws IOException {
        records.close();
      }
    };
  }

  /** A container file read here: codec null or deflate. */
  private static final class Container implements Records {
    private final InputStream stream;
    private final BinaryDecoder in;
    private final Schema schema;
    private final String codec;
    private final byte[] sync = new byte[16];
    private final byte[] marker = new byte[16];
    private GenericDatumReader<GenericRecord> reader;
    private Inflater inflater;
    private byte[] block = new byte[1 << 12];
    private byte[] plain = new byte[1 << 14];
    private BinaryDecoder decoder;
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
    }

    @Override
    public GenericRecord next() throws IOException {
      while (left == 0) {
        if (in.isEnd()) {
          return null;
        }
        left = in.readLong();
        nextBlock();
      }
      left--;
      record = reader.read(record, decoder);
      return record;
    }

    private void nextBlock() throws IOException {
      int size = Math.toIntExact(in.readLong());
      if (block.length < size) {
        block = new byte[Math.max(size, block.length * 2)];
      }
      in.readFixed(block, 0, size);
      in.readFixed(marker);
      if (!Arrays.equals(marker, sync)) {
        throw new IOException("a block's sync marker does not match the file's: the file is damaged");
      }
      if (reader == null) {
        reader = new GenericDatumReader<>(schema);
      }
      if (!"deflate".equals(codec)) {
        decoder = DecoderFactory.get().binaryDecoder(block, 0, size, decoder);
        return;
      }
      if (inflater == null) {
        inflater = new Inflater(true);
      }
      inflater.reset();
      inflater.setInput(block, 0, size);
      int length = 0;
      try {
        while (!inflater.finished()) {
          if (length == plain.length) {
            plain = Arrays.copyOf(plain, plain.length * 2);
          }
          int n = inflater.inflate(plain, length, plain.length - length);
          length += n;
          if (n == 0 && (inflater.needsInput() || inflater.needsDictionary())) {
            throw new IOException("a block's deflate data ends early: the file is damaged");
          }
        }
      } catch (DataFormatException e) {
        throw new IOException("a block's deflate data is damaged: " + e.getMessage(), e);
      }
      decoder = DecoderFactory.get().binaryDecoder(plain, 0, length, decoder);
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
}
