package io.lakerules;

import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;

/**
 * What a lake table answers Spark's streaming planner (DataStreamWriter.toTable / start): a
 * write in append or complete (truncate) mode. It writes nothing itself: the Python registry
 * replaces each micro-batch's write with a {@link LakeStreamWrite} before Spark plans it; a
 * write that reaches these methods was not planned by lakerules (a continuous trigger, or no
 * registry), and fails with a message saying so.
 */
final class LakeStreamingWriteBuilder implements WriteBuilder, SupportsTruncate {
  private final String table;

  LakeStreamingWriteBuilder(String table) {
    this.table = table;
  }

  @Override
  public WriteBuilder truncate() {
    return this;  // complete mode: lakerules.streaming.sink replaces the table's rows per batch
  }

  @Override
  public Write build() {
    return new Write() {
      @Override
      public String description() {
        return "lakerules streaming write to " + table;
      }

      @Override
      public StreamingWrite toStreaming() {
        return new NotPlanned(table);
      }
    };
  }

  private static final class NotPlanned implements StreamingWrite {
    private final String table;

    NotPlanned(String table) {
      this.table = table;
    }

    private RuntimeException refused() {
      return Bridge.sneakyThrow(Bridge.analysisError("lakerules: this streaming write to " + table
          + " was not planned by lakerules: lake tables take micro-batch streaming writes "
          + "(processingTime, once or availableNow triggers), not continuous ones"));
    }

    @Override
    public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
      throw refused();
    }

    @Override
    public void commit(long epochId, WriterCommitMessage[] messages) {
      throw refused();
    }

    @Override
    public void abort(long epochId, WriterCommitMessage[] messages) {
    }
  }
}
