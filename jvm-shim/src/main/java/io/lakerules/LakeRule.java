package io.lakerules;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

/** Hands every resolved plan that touches a lake table to the Python rule registry. */
final class LakeRule extends Rule<LogicalPlan> {
  private final SparkSession session;

  LakeRule(SparkSession session) {
    this.session = session;
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    if (!plan.resolved() || !Bridge.touchesLake(plan)) {
      return plan;
    }
    Object out = Bridge.unwrap(Bridge.backend().rewrite(session, plan, Bridge.explaining()));
    return out == null ? plan : (LogicalPlan) out;
  }

  @Override
  public String ruleName() {
    return "io.lakerules.LakeRule";
  }
}
