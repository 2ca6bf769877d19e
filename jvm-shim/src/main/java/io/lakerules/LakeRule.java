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

  @Override
  public String ruleName() {
    return optimizer ? "io.lakerules.LakeScanRule" : "io.lakerules.LakeRule";
  }
}
