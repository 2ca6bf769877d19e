package io.lakerules;

import org.apache.spark.sql.AnalysisException;

/**
 * A lakerules error as Spark sees it: an AnalysisException whose message says what is wrong and
 * what to do, with no stack trace. Where it was built (the Py4J callback that returned it from
 * Python) says nothing to a user, and a Spark Connect client prints the server's stack trace of an
 * error under its message: 80-odd lines of it. Spark re-fills the stack trace of an error thrown
 * from a lazily computed plan (Utils.getTryWithCallerStacktrace), so the trace is kept empty here
 * rather than cleared once.
 */
public final class LakeAnalysisException extends AnalysisException {
  private static final long serialVersionUID = 1L;

  public LakeAnalysisException(String message) {
    super(message, scala.Option.empty(), scala.Option.empty(), scala.Option.empty(), scala.Option.empty(),
        scala.collection.immutable.Map$.MODULE$.empty(), new org.apache.spark.QueryContext[0]);
  }

  @Override
  public synchronized Throwable fillInStackTrace() {
    return this;
  }

  @Override
  public void setStackTrace(StackTraceElement[] stackTrace) {
    // kept empty (see the class comment)
  }
}
