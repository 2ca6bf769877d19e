package io.lakerules;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

/**
 * Hands plans that touch a lake table to the Python rule registry: resolved plans after
 * analysis (commands, planned into a {@link LakeCommand}), and plans in the optimizer (scans),
 * each with its phase. Both only plan: nothing is written or committed while Spark analyzes or
 * optimizes, however many times it does.
 */
final class LakeRule extends Rule<LogicalPlan> {
  private final SparkSession session;
  private final boolean optimizer;

  private LakeRule(SparkSession session, boolean optimizer) {
    this.session = session;
    this.optimizer = optimizer;
  }

  static LakeRule analysis(SparkSession session) {
    return new LakeRule(session, false);
  }

  static LakeRule optimizer(SparkSession session) {
    return new LakeRule(session, true);
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    refuseTruncatePartition(plan);
    refuseCheckpointAtTable(plan);
    // An UPDATE or MERGE of a lake table resolves with its assignments' values as written: the
    // registry aligns them as Spark does for tables it rewrites (LakeAssignments).
    LogicalPlan given = optimizer ? plan : LakeAssignments.unwrapped(plan);
    if (!given.resolved() || !Bridge.touchesLake(given)) {
      return plan;
    }
    String phase = optimizer ? "optimizer" : "analysis";
    Object out = Bridge.unwrap(Bridge.backend(session).rewrite(session, given, phase));
    return out == null ? plan : (LogicalPlan) out;
  }

  /**
   * TRUNCATE TABLE t PARTITION (...) is left unresolved by Spark on a table without partition
   * management (Iceberg's tables have none, and Iceberg's Spark catalog refuses it the same way),
   * so the registry never sees it: refused here with the statement that does it.
   */
  private static void refuseTruncatePartition(LogicalPlan plan) {
    if (plan instanceof org.apache.spark.sql.catalyst.plans.logical.TruncatePartition) {
      LogicalPlan target = ((org.apache.spark.sql.catalyst.plans.logical.TruncatePartition) plan).table();
      if (target instanceof org.apache.spark.sql.catalyst.analysis.ResolvedTable
          && ((org.apache.spark.sql.catalyst.analysis.ResolvedTable) target).table() instanceof LakeTable) {
        String name = ((org.apache.spark.sql.catalyst.analysis.ResolvedTable) target).table().name();
        throw Bridge.sneakyThrow(Bridge.analysisError("lakerules: TRUNCATE TABLE " + name
            + " PARTITION (...) is not supported: Iceberg tables have no partition management (Iceberg's "
            + "Spark catalog refuses it too). Remove the partition's rows with DELETE FROM " + name
            + " WHERE <partition column> = <value> (whole files are dropped when the condition selects "
            + "partitions), or every row with TRUNCATE TABLE " + name));
      }
    }
  }

  /**
   * A stream into a lake table whose checkpoint location is the table's own folder: Spark would
   * read the table's metadata/ folder as the stream's metadata file and fail with a stack trace
   * when the query starts. Refused while the query is analyzed, before anything is read.
   */
  private static void refuseCheckpointAtTable(LogicalPlan plan) {
    if (!(plan instanceof org.apache.spark.sql.catalyst.streaming.WriteToStream)) {
      return;
    }
    org.apache.spark.sql.catalyst.streaming.WriteToStream write =
        (org.apache.spark.sql.catalyst.streaming.WriteToStream) plan;
    if (!(write.sink() instanceof LakeTable)) {
      return;
    }
    String location = write.sink().properties().get("location");
    String checkpoint = write.resolvedCheckpointLocation();
    if (location != null && checkpoint != null && folder(location).equals(folder(checkpoint))) {
      throw Bridge.sneakyThrow(Bridge.analysisError("lakerules: the streaming query into " + write.sink().name()
          + " has its checkpoint location at the table's own folder " + location + ": Spark would read the "
          + "table's metadata/ folder as the stream's metadata file. Give the stream a checkpoint location "
          + "outside the table's folder (option(\"checkpointLocation\", ...))"));
    }
  }

  /** A location as one spelling: scheme and authority (file: for a local path) and the path, no trailing slash. */
  private static String folder(String location) {
    java.net.URI uri = new org.apache.hadoop.fs.Path(location).toUri();
    String scheme = uri.getScheme() == null ? "file" : uri.getScheme();
    String path = uri.getPath() == null ? "" : uri.getPath().replaceAll("/+$", "");
    return scheme + "://" + (uri.getAuthority() == null ? "" : uri.getAuthority()) + path;
  }

  @Override
  public String ruleName() {
    return optimizer ? "io.lakerules.LakeScanRule" : "io.lakerules.LakeRule";
  }
}
