package io.lakerules.functions;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The driver's cache of decoded position delete files: per delete file (its path and length),
 * the positions it deletes in each data file (data file path in normal form -> sorted positions).
 * Delete files never change once written, so a table that gains a few delete files a commit (a
 * CDC stream's MERGE batches) reads only those at its next statement, not all of them again.
 * Least recently used files go first beyond {@link #MAX_POSITIONS} positions (8 bytes each).
 */
final class DeleteFileRows {
  static final long MAX_POSITIONS = 8_000_000L;

  private static final LinkedHashMap<String, Map<String, long[]>> FILES = new LinkedHashMap<>(16, 0.75f, true);
  private static long positions;

  private DeleteFileRows() {
  }

  /** A delete file's key: its path and its length (a path written again holds other rows). */
  static String key(String path, String length) {
    return length + "\0" + path;
  }

  static synchronized Map<String, long[]> get(String key) {
    return FILES.get(key);
  }

  static synchronized void put(String key, Map<String, long[]> rows) {
    Map<String, long[]> old = FILES.put(key, rows);
    if (old != null) {
      positions -= count(old);
    }
    positions += count(rows);
    Iterator<Map.Entry<String, Map<String, long[]>>> it = FILES.entrySet().iterator();
    while (positions > MAX_POSITIONS && FILES.size() > 1 && it.hasNext()) {
      Map.Entry<String, Map<String, long[]>> e = it.next();
      if (e.getKey().equals(key)) {
        continue;
      }
      positions -= count(e.getValue());
      it.remove();
    }
  }

  static synchronized void clear() {
    FILES.clear();
    positions = 0;
  }

  private static long count(Map<String, long[]> rows) {
    long n = 0;
    for (long[] p : rows.values()) {
      n += p.length;
    }
    return n;
  }
}
