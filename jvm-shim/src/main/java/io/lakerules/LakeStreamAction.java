package io.lakerules;

/**
 * A streaming write the Python registry planned for one micro-batch
 * (lakerules.backend.bridge.PlannedStreamWrite, through Py4J): what {@link LakeStreamWriteExec} runs when
 * Spark executes the batch. It writes the batch's rows and commits them as one snapshot, or skips
 * a batch the table already holds.
 */
public interface LakeStreamAction {
  /** null when done, or a Throwable the caller rethrows unchanged. df: the batch's rows. */
  Object write(Object session, Object df);
}
