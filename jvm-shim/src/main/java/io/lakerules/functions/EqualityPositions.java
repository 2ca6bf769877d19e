package io.lakerules.functions;

import java.util.HashMap;
import java.util.LinkedHashMap;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

/**
 * Equality deletes resolved to the positions of the rows they delete, per data file, kept in the
 * driver's JVM across queries: a data file, its sequence number and a set of equality delete
 * files never change, so neither do the rows those deletes remove from it. A table that a
 * delete_by_key stream changes all day is then read as if its deletes were deletion vectors:
 * each file's deleted positions dropped inside the reader (PositionDeletesParquetFormat), no
 * per-row probe of a hash table of every deleted key.
 *
 * <p>Kept per (set, data file name), where the caller's {@code set} names the delete files and
 * their sequence numbers; at most {@link #KEPT_ROWS} positions in all (8 bytes each), least
 * recently used dropped first.
 */
public final class EqualityPositions {
  private EqualityPositions() {}

  /** Positions kept at most, in all. */
  public static final long KEPT_ROWS = 8_000_000L;

  /** The name (no file's) of resolve's answer when the positions pass its limit. */
  public static final String TOO_MANY = "";

  private static final LinkedHashMap<String, long[]> KEPT = new LinkedHashMap<>(256, 0.75f, true);
  private static long keptRows = 0;

  private static String key(String set, String name) {
    return set + "\u0000" + name;
  }

  private static String[] split(String joined) {
    return joined.isEmpty() ? new String[0] : joined.split("\u0000", -1);
  }

  /** For each of {@code names} (NUL-separated data file names), '1' if its positions under {@code set} are kept, else '0'. */
  public static synchronized String kept(String set, String names) {
    StringBuilder out = new StringBuilder();
    for (String name : split(names)) {
      out.append(KEPT.containsKey(key(set, name)) ? '1' : '0');
    }
    return out.toString();
  }

  /**
   * The positions the set's deletes remove from each of the files {@code names} (NUL-separated),
   * by name: those kept, and for the files {@code missing} names, those of {@code rows} (the
   * data file name and position of each deleted row of those files; null when none is missing),
   * computed by one job and kept (a file with none: an empty array). When they pass
   * {@code maxRows} (the executors then send only counts), nothing is kept and the map holds only
   * {@link #TOO_MANY}. Null when a file's positions were dropped since the caller asked
   * {@link #kept}.
   */
  public static HashMap<String, long[]> resolve(org.apache.spark.sql.classic.SparkSession session, LogicalPlan rows,
                                                String set, String names, String missing, long maxRows) {
    HashMap<String, long[]> found = new HashMap<>();
    if (rows != null) {
      PositionDeleteFiles.Collected collected = PositionDeleteFiles.collect(session, rows, maxRows);
      if (!collected.complete()) {
        HashMap<String, long[]> tooMany = new HashMap<>();
        tooMany.put(TOO_MANY, new long[0]);
        return tooMany;
      }
      for (String name : split(missing)) {
        long[] p = collected.byName.get(name);
        found.put(name, p == null ? new long[0] : p);
      }
    }
    synchronized (EqualityPositions.class) {
      for (String name : split(names)) {
        if (!found.containsKey(name)) {
          long[] kept = KEPT.get(key(set, name));
          if (kept == null) {
            return null;
          }
          found.put(name, kept);
        }
      }
      for (String name : split(missing)) {
        long[] old = KEPT.put(key(set, name), found.get(name));
        keptRows += found.get(name).length - (old == null ? 0 : old.length);
      }
      var it = KEPT.entrySet().iterator();
      while (keptRows > KEPT_ROWS && it.hasNext()) {
        keptRows -= it.next().getValue().length;
        it.remove();
      }
    }
    return found;
  }

  /**
   * The PositionDeleteSet of a group of files read together: for the files {@code eqNames}
   * names, their positions in {@code resolved} united with those of {@code base} (a set of
   * position deletes or deletion vectors, or null); for the files {@code otherNames} names,
   * base's. Null when no file has a deleted position.
   */
  public static PositionDeleteSet united(org.apache.spark.sql.classic.SparkSession session, PositionDeleteSet base,
                                       HashMap<String, long[]> resolved, String eqNames, String otherNames) {
    HashMap<String, long[]> byName = new HashMap<>();
    for (String name : split(eqNames)) {
      long[] eq = resolved.get(name);
      long[] old = base == null ? null : base.positionsOf(name);
      long[] union = old == null ? eq : union(old, eq);
      if (union.length > 0) {
        byName.put(name, union);
      }
    }
    for (String name : split(otherNames)) {
      long[] old = base == null ? null : base.positionsOf(name);
      if (old != null && old.length > 0) {
        byName.put(name, old);
      }
    }
    return byName.isEmpty() ? null : PositionDeleteSet.of(session, byName);
  }

  /** Kept positions in all (tests). */
  public static synchronized long keptRows() {
    return keptRows;
  }

  /** Forgets every kept position (tests, benchmarks measuring a first read). */
  public static synchronized void clear() {
    KEPT.clear();
    keptRows = 0;
  }

  /** Two sorted arrays' values in one sorted array, each value once. */
  static long[] union(long[] a, long[] b) {
    long[] out = new long[a.length + b.length];
    int i = 0;
    int j = 0;
    int n = 0;
    while (i < a.length || j < b.length) {
      long v = j >= b.length || (i < a.length && a[i] <= b[j]) ? a[i++] : b[j++];
      if (n == 0 || out[n - 1] != v) {
        out[n++] = v;
      }
    }
    return java.util.Arrays.copyOf(out, n);
  }
}
