package io.lakerules.functions;

/** MurmurHash3 x86_32 with seed 0, over the byte forms the Iceberg spec gives for bucketing. */
final class Murmur3 {
  private static final int C1 = 0xcc9e2d51;
  private static final int C2 = 0x1b873593;

  private Murmur3() {}

  private static int mixK1(int k1) {
    k1 *= C1;
    k1 = Integer.rotateLeft(k1, 15);
    return k1 * C2;
  }

  private static int mixH1(int h1, int k1) {
    h1 ^= k1;
    h1 = Integer.rotateLeft(h1, 13);
    return h1 * 5 + 0xe6546b64;
  }

  private static int fmix(int h1, int length) {
    h1 ^= length;
    h1 ^= h1 >>> 16;
    h1 *= 0x85ebca6b;
    h1 ^= h1 >>> 13;
    h1 *= 0xc2b2ae35;
    h1 ^= h1 >>> 16;
    return h1;
  }

  /** The hash of a long as 8 little-endian bytes (int, long, date, time, timestamp). */
  static int hashLong(long value) {
    int h1 = mixH1(0, mixK1((int) value));
    h1 = mixH1(h1, mixK1((int) (value >>> 32)));
    return fmix(h1, 8);
  }

  static int hashBytes(byte[] bytes, int offset, int length) {
    int h1 = 0;
    int i = 0;
    for (; i + 4 <= length; i += 4) {
      int k1 = (bytes[offset + i] & 0xff) | (bytes[offset + i + 1] & 0xff) << 8
          | (bytes[offset + i + 2] & 0xff) << 16 | (bytes[offset + i + 3] & 0xff) << 24;
      h1 = mixH1(h1, mixK1(k1));
    }
    int k1 = 0;
    switch (length - i) {
      case 3: k1 ^= (bytes[offset + i + 2] & 0xff) << 16; // fall through
      case 2: k1 ^= (bytes[offset + i + 1] & 0xff) << 8; // fall through
      case 1: k1 ^= bytes[offset + i] & 0xff; h1 ^= mixK1(k1); break;
      default: break;
    }
    return fmix(h1, length);
  }
}
