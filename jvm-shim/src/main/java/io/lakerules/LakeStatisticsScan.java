package io.lakerules;

import java.util.Collections;
import java.util.Map;
import java.util.OptionalLong;

import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.connector.read.colstats.ColumnStatistics;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;

/**
 * What a lake table answers when Spark asks it for a scan outside the rules: its statistics, and
 * no read. Spark's DESCRIBE TABLE EXTENDED (DescribeTableExec.addTableStats) builds a scan of
 * the table only to print its row count and size; every read of a lake table is planned by the
 * Python rules instead (a relation they did not replace fails here, when Spark would read it).
 *
 * <p>The statistics are Iceberg's Spark scan's (SparkScan.estimateStatistics): the snapshot's
 * total-records (rows of its data files; rows that delete files remove are counted, as Iceberg
 * counts them), and as size that many rows of the schema's default size. A table with no
 * snapshot has 0 rows; one whose snapshot summary lacks total-records, unknown ones.
 */
final class LakeStatisticsScan implements ScanBuilder, Scan, SupportsReportStatistics {
  private final String name;
  private final StructType schema;
  private final long rows;

  /** rows: the snapshot's total-records, or -1: unknown. */
  LakeStatisticsScan(String name, StructType schema, long rows) {
    this.name = name;
    this.schema = schema;
    this.rows = rows;
  }

  @Override public Scan build() { return this; }
  @Override public StructType readSchema() { return schema; }
  @Override public String description() { return "statistics of " + name; }

  @Override
  public Statistics estimateStatistics() {
    final OptionalLong numRows = rows < 0 ? OptionalLong.empty() : OptionalLong.of(rows);
    final OptionalLong size;
    if (rows < 0) {
      size = OptionalLong.empty();
    } else {
      long bytes;
      try {
        bytes = Math.multiplyExact((long) schema.defaultSize(), rows);
      } catch (ArithmeticException e) {
        bytes = Long.MAX_VALUE;
      }
      size = OptionalLong.of(bytes);
    }
    return new Statistics() {
      @Override public OptionalLong sizeInBytes() { return size; }
      @Override public OptionalLong numRows() { return numRows; }
      @Override public Map<NamedReference, ColumnStatistics> columnStats() { return Collections.emptyMap(); }
    };
  }

  @Override
  public Batch toBatch() {
    throw notPlanned(name);
  }

  @Override
  public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
    throw notPlanned(name);
  }

  static RuntimeException notPlanned(String name) {
    return Bridge.sneakyThrow(Bridge.analysisError("lakerules: the read of " + name
        + " was not planned: is the lakerules registry attached (lakerules.attach(spark))?"));
  }
}
