package io.lakerules;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.SparkSessionExtensionsProvider;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * spark.sql.extensions=io.lakerules.LakeRulesExtensions. The injections, in the order Spark
 * consults them:
 */
public final class LakeRulesExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit>
    implements SparkSessionExtensionsProvider {
  @Override
  public BoxedUnit apply(SparkSessionExtensions ext) {
    // 1. Parser: statements Spark's grammar lacks (OPTIMIZE, partition evolution, ...) go to
    //    Python; the pattern of what to route is given by Python at attach time.
    ext.injectParser((session, delegate) -> LakeParser.wrap(session, delegate));
    // 2. Post-hoc resolution: after Spark resolved names, types and subqueries, hand plans that
    //    touch lake tables to the Python rule registry: writes and row-level commands are
    //    planned there into a LakeCommand node, which Spark runs once when it executes the
    //    statement.
    ext.injectPostHocResolutionRule(LakeRule::analysis);
    // 3. Operator optimization: this batch's own rules run first, so the filters Spark can
    //    push down (from SQL, DataFrame chains, joins, inferred constraints) are next to each
    //    lake relation when the registry plans its scan: pruned manifests and files, deletes.
    ext.injectOptimizerRule(LakeRule::optimizer);
    // 4. Planner: a micro-batch write the registry planned (LakeStreamWrite) runs the batch's
    //    query and hands its rows to Python, which writes and commits them.
    ext.injectPlannerStrategy(session -> new LakeStreamStrategy());
    // 5. Planner: a lake table's file scan is Spark's own, its read tasks weighed by the rows the
    //    manifests record instead of bytes (LakeScanExec).
    ext.injectPlannerStrategy(session -> new LakeScanExec.Strategy());
    return BoxedUnit.UNIT;
  }
}
