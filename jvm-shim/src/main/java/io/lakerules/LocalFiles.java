package io.lakerules;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (checksum files and all) for the files lakerules writes, with one
 * change: a permission is set by a system call ({@code java.nio}), where Hadoop's raw local file
 * system, lacking the native Hadoop library (as with pyspark's jars), starts a {@code chmod}
 * process for every file and folder it creates: measured ~50 ms of a 10,000-row Spark write
 * job's ~100 ms, and ~60 ms of the driver's ~70 ms writing a small delete file. The modes are the
 * ones Hadoop sets (its defaults under {@code fs.permissions.umask-mode}); a sticky bit, which
 * nothing lakerules creates asks for, and file systems without POSIX modes go to Hadoop's own way.
 * {@link #configure} points a Hadoop configuration's {@code file:} scheme at it.
 */
public final class LocalFiles extends LocalFileSystem {
  public LocalFiles() {
    super(new Raw());
  }

  /** Uses this file system for {@code file:} paths in {@code conf} (a copy the caller owns). */
  public static Configuration configure(Configuration conf) {
    for (String[] kv : SETTINGS) {
      conf.set(kv[0], kv[1]);
    }
    return conf;
  }

  /** {@code conf}, or a copy of it using this file system, when {@code target} is local. */
  public static Configuration forWriting(Configuration conf, String target) throws IOException {
    return local(conf, target) ? configure(new Configuration(conf)) : conf;
  }

  /** Whether {@code target} is on the local file system (under {@code conf}'s default one). */
  public static boolean local(Configuration conf, String target) throws IOException {
    return "file".equals(new Path(target).getFileSystem(conf).getScheme());
  }

  /**
   * The Hadoop settings {@link #configure} sets, NUL-separated, for a Spark write job's options
   * (which its Hadoop configuration takes), when {@code target} is local; else empty.
   */
  public static String settingsFor(org.apache.spark.sql.SparkSession session, String target) throws IOException {
    if (!local(session.sparkContext().hadoopConfiguration(), target)) {
      return "";
    }
    StringBuilder out = new StringBuilder();
    for (String[] kv : SETTINGS) {
      out.append(out.length() > 0 ? "\0" : "").append(kv[0]).append('\0').append(kv[1]);
    }
    return out.toString();
  }

  // the cache would hand out the default local file system it already made
  private static final String[][] SETTINGS = {
      {"fs.file.impl", LocalFiles.class.getName()}, {"fs.file.impl.disable.cache", "true"}};

  static final class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      if (permission.getStickyBit()) {
        super.setPermission(p, permission);
        return;
      }
      String mode = permission.getUserAction().SYMBOL + permission.getGroupAction().SYMBOL
          + permission.getOtherAction().SYMBOL;
      try {
        Files.setPosixFilePermissions(pathToFile(p).toPath(), PosixFilePermissions.fromString(mode));
      } catch (UnsupportedOperationException e) {
        super.setPermission(p, permission);
      }
    }
  }
}
