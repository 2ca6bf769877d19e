package lakerules.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;

import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.spark.TaskContext;
import org.apache.spark.internal.io.FileCommitProtocol;
import org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol;

/**
 * Test only: Spark's file commit protocol, except that the first attempt of every write task
 * fails after it wrote its files and before it commits them; Spark then runs the task again
 * (with spark.task.maxFailures, or local[N,F], above 1). Each injected failure is logged as one
 * line "<output path> <partition>" to the file named by env LAKERULES_TEST_FAULT_LOG.
 */
public class FailFirstCommit extends SQLHadoopMapReduceCommitProtocol {
  private final String outputPath;

  public FailFirstCommit(String jobId, String path, boolean dynamicPartitionOverwrite) {
    super(jobId, path, dynamicPartitionOverwrite);
    this.outputPath = path;
  }

  @Override
  public FileCommitProtocol.TaskCommitMessage commitTask(TaskAttemptContext context) {
    TaskContext task = TaskContext.get();
    if (task != null && task.attemptNumber() == 0) {
      String log = System.getenv("LAKERULES_TEST_FAULT_LOG");
      if (log != null) {
        try {
          Files.write(Paths.get(log),
              (outputPath + " " + task.partitionId() + "\n").getBytes(StandardCharsets.UTF_8),
              StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
          throw new RuntimeException(e);
        }
      }
      throw new RuntimeException("lakerules test: injected failure of task attempt 0 after it wrote its files");
    }
    return super.commitTask(context);
  }
}
