package io.lakerules;

/**
 * A lake command the Python registry planned (lakerules.backend.bridge.PlannedCommand, through Py4J):
 * what {@link LakeCommand} runs when Spark executes the statement. Planning made it and ran
 * nothing; {@code run} writes and commits, once per execution.
 */
public interface LakeAction {
  /** The command's result rows as a LocalRelation, or a Throwable the caller rethrows unchanged. */
  Object run(Object session);
}
