package io.lakerules.functions;

/**
 * Lists as Python hands them over in one Py4J call (a Py4J array is filled one call an element):
 * strings joined by NUL, numbers by commas.
 */
public final class Joined {
  private Joined() {}

  /** The NUL-joined strings of {@code joined} as an array (none for ""). */
  public static String[] strings(String joined) {
    return joined.isEmpty() ? new String[0] : joined.split("\0", -1);
  }

  /** The comma-joined numbers of {@code joined} as an array (none for ""). */
  public static long[] longs(String joined) {
    if (joined.isEmpty()) {
      return new long[0];
    }
    String[] parts = joined.split(",", -1);
    long[] out = new long[parts.length];
    for (int i = 0; i < parts.length; i++) {
      out[i] = Long.parseLong(parts[i]);
    }
    return out;
  }
}
