package io.lakerules;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

/**
 * What the Python side answers. Implemented by a Python object through Py4J callbacks
 * (lakerules.backend.bridge.Backend). Every planning decision is made there; the shim only routes.
 *
 * <p>Methods return either their result or a {@link Throwable}, which the caller rethrows
 * unchanged, so that Spark's own exception types reach the user as they are.
 */
public interface LakeBackend {
  /** A statement whose text matched the registered route pattern: a plan, null (not ours), or a Throwable. */
  Object parse(Object session, String sqlText);

  /**
   * A plan that touches a lake table or catalog: the rewritten plan, or a Throwable. phase is
   * "analysis" (a resolved plan: a command becomes a {@link LakeCommand}, planned, not run) or
   * "optimizer" (scans are planned, with the filters Spark pushed down next to them).
   */
  Object rewrite(Object session, LogicalPlan plan, String phase);

  /**
   * A lake table read as a stream (io.lakerules.LakeStreamSource): op "latest" answers JSON
   * {"offset": ...}, op "batch" the JVM plan reading the files between two offsets; or a Throwable.
   */
  Object stream(Object session, String op, String argsJson);

  /** A catalog operation: JSON arguments in, JSON result out ({"error": kind, "message": text} on failure). */
  String catalog(String catalogName, String op, String argsJson);
}
