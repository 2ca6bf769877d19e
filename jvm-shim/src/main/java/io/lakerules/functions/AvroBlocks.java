package io.lakerules.functions;

import java.io.IOException;
import java.io.InputStream;
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
 * for manifests); a file with another codec is left to
 * Avro's own reader ({@link #read} returns false).
 *
 * <p>The record handed to {@link Visitor#visit} is reused for the next one: the visitor copies
 * what it keeps.
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

  interface Visitor {
    void visit(GenericRecord record);
  }

  private final BinaryDecoder in;
  private final Schema schema;
  private final String codec;
  private final byte[] sync = new byte[16];

  private AvroBlocks(InputStream stream) throws IOException {
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
    schema = SCHEMAS.computeIfAbsent(new String(rawSchema, StandardCharsets.UTF_8), text -> new Schema.Parser().parse(text));
    byte[] rawCodec = meta.get("avro.codec");
    codec = rawCodec == null ? "null" : new String(rawCodec, StandardCharsets.UTF_8);
  }

  private static boolean supports(String codec) {
    return "null".equals(codec) || "deflate".equals(codec);
  }

  /**
   * Each record of the file {@code stream} (closed by the caller), in order; false, with no
   * record visited, when the file's codec is not one this reader decompresses.
   */
  static boolean read(InputStream stream, Visitor visitor) throws IOException {
    AvroBlocks file = new AvroBlocks(stream);
    if (!supports(file.codec)) {
      return false;
    }
    file.records(visitor);
    return true;
  }

  private void records(Visitor visitor) throws IOException {
    GenericDatumReader<GenericRecord> reader = new GenericDatumReader<>(schema);
    boolean deflate = "deflate".equals(codec);
    Inflater inflater = deflate ? new Inflater(true) : null;
    byte[] block = new byte[1 << 12];
    byte[] plain = new byte[1 << 14];
    byte[] marker = new byte[16];
    BinaryDecoder decoder = null;
    GenericRecord record = null;
    try {
      while (true) {
        if (in.isEnd()) {
          return;
        }
        long count = in.readLong();
        int size = Math.toIntExact(in.readLong());
        if (block.length < size) {
          block = new byte[Math.max(size, block.length * 2)];
        }
        in.readFixed(block, 0, size);
        in.readFixed(marker);
        if (!Arrays.equals(marker, sync)) {
          throw new IOException("a block's sync marker does not match the file's: the file is damaged");
        }
        byte[] data = block;
        int length = size;
        if (deflate) {
          inflater.reset();
          inflater.setInput(block, 0, size);
          length = 0;
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
          data = plain;
        }
        decoder = DecoderFactory.get().binaryDecoder(data, 0, length, decoder);
        for (long i = 0; i < count; i++) {
          record = reader.read(record, decoder);
          visitor.visit(record);
        }
      }
    } catch (DataFormatException e) {
      throw new IOException("a block's deflate data is damaged: " + e.getMessage(), e);
    } finally {
      if (inflater != null) {
        inflater.end();
      }
    }
  }
}
