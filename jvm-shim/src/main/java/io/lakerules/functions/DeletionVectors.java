package io.lakerules.functions;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.HashMap;
import java.util.zip.CRC32;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.roaringbitmap.RoaringBitmap;

/**
 * Iceberg's deletion vectors (format version 3): a data file's deleted row positions as a
 * {@code deletion-vector-v1} blob of a Puffin file. The blob, as the Puffin spec lays it out:
 * the length of what follows up to the checksum (4 bytes, big-endian), the magic {@code D1 D3 39
 * 64}, the positions as a portable 64-bit roaring bitmap (the number of 32-bit bitmaps, 8 bytes
 * little-endian; then for each, in ascending order of key, its key, the positions' high 32 bits, 4
 * bytes little-endian, and the 32-bit roaring bitmap of their low 32 bits in RoaringBitmap's
 * portable format), then the CRC-32 of the magic and the bitmap (4 bytes, big-endian).
 */
public final class DeletionVectors {
  private static final byte[] MAGIC = {(byte) 0xD1, (byte) 0xD3, 0x39, 0x64};

  private DeletionVectors() {}

  /** The blob of the deletion vector of {@code positions} (any order; duplicates ignored). */
  public static byte[] blob(long[] positions) {
    long[] sorted = positions.clone();
    Arrays.sort(sorted);
    java.util.List<Integer> keys = new java.util.ArrayList<>();
    java.util.List<RoaringBitmap> maps = new java.util.ArrayList<>();
    for (long p : sorted) {
      if (p < 0) {
        throw new IllegalArgumentException("a deleted row position is negative: " + p);
      }
      int key = (int) (p >>> 32);
      if (keys.isEmpty() || keys.get(keys.size() - 1) != key) {
        keys.add(key);
        maps.add(new RoaringBitmap());
      }
      maps.get(maps.size() - 1).add((int) p);
    }
    int size = 8;
    for (RoaringBitmap m : maps) {
      m.runOptimize();
      size += 4 + m.serializedSizeInBytes();
    }
    ByteBuffer out = ByteBuffer.allocate(4 + MAGIC.length + size + 4);
    out.order(ByteOrder.BIG_ENDIAN).putInt(MAGIC.length + size).put(MAGIC);
    out.order(ByteOrder.LITTLE_ENDIAN).putLong(maps.size());
    for (int i = 0; i < maps.size(); i++) {
      out.putInt(keys.get(i));
      maps.get(i).serialize(out);
    }
    CRC32 crc = new CRC32();
    crc.update(out.array(), 4, MAGIC.length + size);
    out.order(ByteOrder.BIG_ENDIAN).putInt((int) crc.getValue());
    return out.array();
  }

  /** The positions a blob deletes, ascending; an IllegalArgumentException naming what is wrong
   * when its length, magic or checksum is not the spec's. */
  public static long[] positions(byte[] blob, String where) {
    ByteBuffer in = ByteBuffer.wrap(blob).order(ByteOrder.BIG_ENDIAN);
    if (blob.length < 4 + MAGIC.length + 8 + 4) {
      throw new IllegalArgumentException(where + ": a deletion vector of " + blob.length + " bytes is too short");
    }
    int length = in.getInt(0);
    if (length != blob.length - 8) {
      throw new IllegalArgumentException(where + ": the deletion vector says it is " + length
          + " bytes long, the blob holds " + (blob.length - 8));
    }
    for (int i = 0; i < MAGIC.length; i++) {
      if (blob[4 + i] != MAGIC[i]) {
        throw new IllegalArgumentException(where + ": not a deletion vector (wrong magic)");
      }
    }
    CRC32 crc = new CRC32();
    crc.update(blob, 4, length);
    if ((int) crc.getValue() != in.getInt(4 + length)) {
      throw new IllegalArgumentException(where + ": the deletion vector's CRC-32 does not match its bytes");
    }
    ByteBuffer bitmaps = ByteBuffer.wrap(blob, 4 + MAGIC.length, length - MAGIC.length).slice()
        .order(ByteOrder.LITTLE_ENDIAN);
    long count = bitmaps.getLong();
    long[] out = new long[64];
    int n = 0;
    long last = -1;
    for (long i = 0; i < count; i++) {
      long key = bitmaps.getInt() & 0xFFFFFFFFL;
      if (key <= last) {
        throw new IllegalArgumentException(where + ": the deletion vector's keys are not ascending");
      }
      last = key;
      RoaringBitmap m = new RoaringBitmap();
      try {
        m.deserialize(bitmaps.slice().order(ByteOrder.LITTLE_ENDIAN));
      } catch (IOException e) {
        throw new IllegalArgumentException(where + ": a bitmap of the deletion vector is damaged: " + e, e);
      }
      bitmaps.position(bitmaps.position() + m.serializedSizeInBytes());
      int cardinality = m.getCardinality();
      if (n + cardinality > out.length) {
        out = Arrays.copyOf(out, Math.max(out.length * 2, n + cardinality));
      }
      org.roaringbitmap.IntIterator it = m.getIntIterator();
      while (it.hasNext()) {
        out[n++] = (key << 32) | (it.next() & 0xFFFFFFFFL);
      }
    }
    return Arrays.copyOf(out, n);
  }

  /** Reads {@code length} bytes at {@code offset} of the file at {@code path}. */
  public static byte[] read(Configuration conf, String path, long offset, long length) throws IOException {
    if (length > Integer.MAX_VALUE - 16) {
      throw new IOException(path + ": a deletion vector of " + length + " bytes is too large");
    }
    Path p = new Path(path);
    FileSystem fs = p.getFileSystem(conf);
    byte[] out = new byte[(int) length];
    try (FSDataInputStream in = fs.open(p)) {
      in.readFully(offset, out);
    }
    return out;
  }

  /**
   * The deleted positions of the data files Spark names {@code names}, from the deletion vectors
   * at ({@code paths}, {@code offsets}, {@code lengths}) (one per data file), read here once and
   * broadcast to the executors as a {@link PositionDeleteSet}.
   */
  public static PositionDeleteSet deleteSet(org.apache.spark.sql.classic.SparkSession session, String[] names,
                                            String[] paths, long[] offsets, long[] lengths) throws IOException {
    Configuration conf = session.sessionState().newHadoopConf();
    HashMap<String, long[]> byName = new HashMap<>();
    for (int i = 0; i < names.length; i++) {
      String where = paths[i] + " at " + offsets[i];
      byName.put(names[i], positions(read(conf, paths[i], offsets[i], lengths[i]), where));
    }
    return PositionDeleteSet.of(session, byName);
  }

  /**
   * Writes the deletion vectors of a statement as one Puffin file at {@code puffinPath}: for each
   * data file of {@code rows} (data file path STRING, position BIGINT), its positions merged with
   * those of its current deletion vector ({@code basePaths[i]}'s, at ({@code dvPaths[i]},
   * {@code offsets[i]}, {@code lengths[i]})) in one {@code deletion-vector-v1} blob with the
   * properties {@code referenced-data-file} and {@code cardinality}. Returns, as JSON, the file's
   * size and each blob's data file, offset, length and cardinality.
   */
  public static String writePuffin(org.apache.spark.sql.classic.SparkSession session, LogicalPlan rows,
                                   String puffinPath, String createdBy, String[] basePaths, String[] dvPaths,
                                   long[] offsets, long[] lengths) throws IOException {
    return writePuffin(session.sessionState().newHadoopConf(), PositionDeleteSet.positionsByName(session, rows),
        puffinPath, createdBy, basePaths, dvPaths, offsets, lengths);
  }

  /**
   * {@link #writePuffin} of positions already on the driver: those of {@code collected}
   * (io.lakerules.functions.PositionDeleteFiles.collect, names {@code <kind>\0<group>\0<data file
   * path>}) whose kind is one of {@code kinds}, but for the data files of {@code skip}
   * (NUL-separated paths: files the statement removes whole). No Spark job.
   */
  public static String writePuffin(org.apache.spark.sql.classic.SparkSession session,
                                   PositionDeleteFiles.Collected collected, String kinds, String skip,
                                   String puffinPath, String createdBy, String[] basePaths, String[] dvPaths,
                                   long[] offsets, long[] lengths) throws IOException {
    return writePuffin(session.sessionState().newHadoopConf(), collected.byFile(kinds, skip), puffinPath, createdBy,
        basePaths, dvPaths, offsets, lengths);
  }

  private static String writePuffin(Configuration conf, HashMap<String, long[]> byFile, String puffinPath,
                                    String createdBy, String[] basePaths, String[] dvPaths, long[] offsets,
                                    long[] lengths) throws IOException {
    for (int i = 0; i < basePaths.length; i++) {
      long[] added = byFile.get(basePaths[i]);
      if (added == null) {
        continue;
      }
      long[] base = positions(read(conf, dvPaths[i], offsets[i], lengths[i]), dvPaths[i] + " at " + offsets[i]);
      long[] all = Arrays.copyOf(base, base.length + added.length);
      System.arraycopy(added, 0, all, base.length, added.length);
      byFile.put(basePaths[i], all);
    }
    java.util.List<String> files = new java.util.ArrayList<>(byFile.keySet());
    java.util.Collections.sort(files);
    com.fasterxml.jackson.databind.ObjectMapper json = new com.fasterxml.jackson.databind.ObjectMapper();
    com.fasterxml.jackson.databind.node.ArrayNode blobs = json.createArrayNode();
    com.fasterxml.jackson.databind.node.ArrayNode written = json.createArrayNode();
    Path p = new Path(puffinPath);
    // local files without a chmod process per file and folder (io.lakerules.LocalFiles)
    FileSystem fs = p.getFileSystem(io.lakerules.LocalFiles.forWriting(conf, puffinPath));
    long size;
    try (org.apache.hadoop.fs.FSDataOutputStream out = fs.create(p, false)) {
      byte[] magic = {'P', 'F', 'A', '1'};
      out.write(magic);
      for (String file : files) {
        long[] positions = byFile.get(file);
        byte[] blob = blob(positions);
        long cardinality = Arrays.stream(positions).distinct().count();
        long offset = out.getPos();
        out.write(blob);
        com.fasterxml.jackson.databind.node.ObjectNode meta = blobs.addObject();
        meta.put("type", "deletion-vector-v1");
        meta.putArray("fields").add(2147483545);  // _pos, the row position
        meta.put("snapshot-id", -1L).put("sequence-number", -1L).put("offset", offset).put("length", blob.length);
        meta.putObject("properties").put("referenced-data-file", file).put("cardinality", Long.toString(cardinality));
        written.addObject().put("file", file).put("offset", offset).put("length", blob.length)
            .put("cardinality", cardinality);
      }
      com.fasterxml.jackson.databind.node.ObjectNode footer = json.createObjectNode();
      footer.set("blobs", blobs);
      footer.putObject("properties").put("created-by", createdBy);
      byte[] payload = json.writeValueAsBytes(footer);
      out.write(magic);
      out.write(payload);
      ByteBuffer tail = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putInt(payload.length).putInt(0);
      out.write(tail.array());
      out.write(magic);
      size = out.getPos();
    }
    com.fasterxml.jackson.databind.node.ObjectNode result = json.createObjectNode();
    result.put("size", size);
    result.set("blobs", written);
    return json.writeValueAsString(result);
  }

  /** The positions of the deletion vector at ({@code path}, {@code offset}, {@code length}). */
  public static long[] readPositions(org.apache.spark.sql.classic.SparkSession session, String path, long offset,
                                     long length) throws IOException {
    return positions(read(session.sessionState().newHadoopConf(), path, offset, length), path + " at " + offset);
  }
}
