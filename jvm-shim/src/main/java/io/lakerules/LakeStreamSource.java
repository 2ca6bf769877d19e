package io.lakerules;

import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.streaming.Offset;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.types.StructType;

import scala.Option;

/**
 * A lake table read as a stream (readStream.table / format("iceberg").load): the files each
 * appended snapshot added, in order. Every decision is Python's (lakerules.streaming.source): which
 * offset comes next (with the per-batch limits), and the read of the files between two offsets;
 * this class only routes, and marks the read as a stream's.
 */
final class LakeStreamSource implements Source, SupportsTriggerAvailableNow {
  private final SparkSession session;
  private final String catalog;
  private final String[] ident;
  private final Map<String, String> options;
  private final StructType schema;
  private volatile String cap;  // availableNow: the offset the query stops at

  LakeStreamSource(SparkSession session, String catalog, String[] ident, Map<String, String> options,
      StructType schema) {
    this.session = session;
    this.catalog = catalog;
    this.ident = ident;
    this.options = options;
    this.schema = schema;
  }

  /**
   * The stream's columns: the table's; with the option streaming-changelog=true, then the change
   * columns lakerules.procedures.changelog adds (_change_type, _change_ordinal, _commit_snapshot_id).
   */
  static StructType streamSchema(StructType table, Map<String, String> options) {
    String changelog = null;
    for (Map.Entry<String, String> e : options.entrySet()) {
      if (e.getKey().equalsIgnoreCase("streaming-changelog")) {
        changelog = e.getValue();
      }
    }
    if (changelog == null || !changelog.trim().equalsIgnoreCase("true")) {
      return table;
    }
    return table.add("_change_type", org.apache.spark.sql.types.DataTypes.StringType, true)
        .add("_change_ordinal", org.apache.spark.sql.types.DataTypes.IntegerType, true)
        .add("_commit_snapshot_id", org.apache.spark.sql.types.DataTypes.LongType, true);
  }

  private ObjectNode args() {
    ObjectNode a = LakeCatalog.JSON.createObjectNode();
    a.put("catalog", catalog);
    ArrayNode parts = a.putArray("table");
    for (String p : ident) parts.add(p);
    ObjectNode o = a.putObject("options");
    options.forEach((k, v) -> o.put(k.toLowerCase(java.util.Locale.ROOT), v));
    return a;
  }

  private Object call(String op, ObjectNode args) {
    try {
      return Bridge.unwrap(Bridge.backend(session).stream(session, op, LakeCatalog.JSON.writeValueAsString(args)));
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException(e);
    } catch (RuntimeException e) {
      throw PythonBackend.orDied(e);
    }
  }

  private String offset(String start, String upTo) {
    ObjectNode a = args();
    a.put("start", start);
    a.put("cap", upTo);
    try {
      JsonNode out = LakeCatalog.JSON.readTree((String) call("latest", a));
      return out.path("offset").isNull() || out.path("offset").isMissingNode() ? null : out.get("offset").asText();
    } catch (java.io.IOException e) {
      throw new IllegalStateException("lakerules: malformed answer for the latest offset", e);
    }
  }

  @Override
  public StructType schema() {
    return schema;
  }

  @Override
  public Option<Offset> getOffset() {
    String o = offset(null, cap);
    return o == null ? Option.empty() : Option.apply(new LakeOffset(o));
  }

  @Override
  public org.apache.spark.sql.connector.read.streaming.Offset latestOffset(
      org.apache.spark.sql.connector.read.streaming.Offset start, ReadLimit limit) {
    String o = offset(start == null ? null : start.json(), cap);
    return o == null ? null : new LakeOffset(o);
  }

  @Override
  public void prepareForTriggerAvailableNow() {
    cap = offset("max", null);
  }

  @Override
  public Dataset<Row> getBatch(Option<Offset> start, Offset end) {
    ObjectNode a = args();
    a.put("start", start.isDefined() ? start.get().json() : null);
    a.put("end", end.json());
    LogicalPlan plan = (LogicalPlan) call("batch", a);
    LogicalPlan streaming;
    if (plan instanceof LogicalRelation) {
      LogicalRelation r = (LogicalRelation) plan;
      streaming = r.copy(r.relation(), r.output(), r.catalogTable(), true, r.stream());
    } else if (plan instanceof LocalRelation) {
      LocalRelation r = (LocalRelation) plan;
      streaming = r.copy(r.output(), r.data(), true, r.stream());
    } else {
      // a changelog batch (joins, windows): its rows as a stream's RDD, as Spark's own sources make them
      org.apache.spark.sql.classic.Dataset<Row> rows = org.apache.spark.sql.classic.Dataset.ofRows(session, plan);
      return session.internalCreateDataFrame(rows.queryExecution().toRdd(), schema, true);
    }
    return org.apache.spark.sql.classic.Dataset.ofRows(session, streaming);
  }

  @Override
  public void stop() {
  }

  @Override
  public String toString() {
    return "LakeStreamSource[" + catalog + "." + String.join(".", ident) + "]";
  }
}
