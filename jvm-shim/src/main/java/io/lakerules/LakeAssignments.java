package io.lakerules;

import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.objects.AssertNotNull;
import org.apache.spark.sql.catalyst.plans.logical.Assignment;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.catalyst.plans.logical.UpdateTable;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.internal.SQLConf;

/**
 * The assignments of UPDATE and MERGE on a lake table, resolved as Spark resolves them for a
 * table it rewrites itself (ResolveRowLevelCommandAssignments on its rewritable path). A lake
 * table is not one Spark rewrites, so its analyzer gives each value only an ANSI cast to the
 * key's type and a NOT NULL assertion: a struct value whose fields come in another order (or
 * nest another order) is then an impossible cast, and a string for an INT a cast that fails per
 * row. {@link #unwrapped} takes those off while Spark analyzes the statement, so that the plan
 * resolves and the rule aligns the raw values once, by name and by
 * spark.sql.storeAssignmentPolicy ({@link #align}).
 */
public final class LakeAssignments {
  private LakeAssignments() {}

  /**
   * plan, or, where it is an UPDATE or MERGE INTO of a lake table, the same command with each
   * assignment's value as the user wrote it (without the analyzer's table-insertion cast and
   * NOT NULL assertion).
   */
  static LogicalPlan unwrapped(LogicalPlan plan) {
    LogicalPlan target;
    if (plan instanceof UpdateTable) {
      target = ((UpdateTable) plan).table();
    } else if (plan instanceof MergeIntoTable) {
      target = ((MergeIntoTable) plan).targetTable();
    } else {
      return plan;
    }
    while (target instanceof SubqueryAlias) {
      target = ((SubqueryAlias) target).child();
    }
    if (!(target instanceof DataSourceV2Relation)
        || !(((DataSourceV2Relation) target).table() instanceof LakeTable)) {
      return plan;
    }
    return (LogicalPlan) plan.transformExpressions(new scala.runtime.AbstractPartialFunction<Expression, Expression>() {
      @Override
      public boolean isDefinedAt(Expression e) {
        return e instanceof Assignment;
      }

      @Override
      public <A1 extends Expression, B1> B1 applyOrElse(A1 e, scala.Function1<A1, B1> otherwise) {
        if (!(e instanceof Assignment)) {
          return otherwise.apply(e);
        }
        Assignment a = (Assignment) e;
        @SuppressWarnings("unchecked")
        B1 out = (B1) new Assignment(a.key(), raw(a.value()));
        return out;
      }
    });
  }

  /**
   * A value without the cast and NOT NULL assertion Spark's analyzer put over it for its key
   * (the assertion outside the cast or inside it, as Spark versions differ). A cast the user
   * wrote carries no table-insertion tag and stays.
   */
  private static Expression raw(Expression value) {
    if (value instanceof AssertNotNull) {
      value = ((AssertNotNull) value).child();
    }
    if (value instanceof Cast && value.getTagValue(org.apache.spark.sql.catalyst.expressions.Cast$.MODULE$.BY_TABLE_INSERTION()).isDefined()) {
      value = ((Cast) value).child();
      if (value instanceof AssertNotNull) {
        value = ((AssertNotNull) value).child();
      }
    }
    return value;
  }

  /**
   * A row-level command's assignments as Spark aligns them for a table that supports row-level
   * operations: one value per column of {@code attrs}, in order; nested-field assignments
   * ({@code SET s.a = 1}) folded into their struct; struct values matched to the column's
   * fields by name, at every level; each value resolved for the column by Spark's table output
   * resolution under spark.sql.storeAssignmentPolicy (ANSI or STRICT casts, NOT NULL checks;
   * LEGACY refused, as Spark refuses it for data source v2 tables); duplicate and conflicting
   * assignments, missing and extra struct fields, and an INSERT that leaves a column without a
   * value or default, are Spark's own errors, naming {@code table} (Spark leaves the name empty
   * when it aligns row-level assignments).
   */
  public static java.util.List<Expression> align(
      java.util.List<Attribute> attrs, java.util.List<Expression> keys, java.util.List<Expression> values,
      boolean insert, java.util.List<String> table) {
    SQLConf conf = SQLConf.get();
    if (conf.storeAssignmentPolicy() == SQLConf.StoreAssignmentPolicy$.MODULE$.LEGACY()) {
      // SPARK-28730: data source v2 tables refuse the LEGACY policy (Spark's own error)
      throw Bridge.sneakyThrow(org.apache.spark.sql.errors.QueryCompilationErrors.legacyStoreAssignmentPolicyError());
    }
    java.util.List<Assignment> given = new java.util.ArrayList<>();
    for (int i = 0; i < keys.size(); i++) {
      given.add(new Assignment(keys.get(i), raw(values.get(i))));
    }
    scala.collection.immutable.Seq<Attribute> columns = scala.jdk.javaapi.CollectionConverters.asScala(attrs).toList();
    scala.collection.immutable.Seq<Assignment> assignments =
        scala.jdk.javaapi.CollectionConverters.asScala(given).toList();
    scala.collection.immutable.Seq<Assignment> aligned;
    try {
      aligned = insert
          ? org.apache.spark.sql.catalyst.analysis.AssignmentUtils.alignInsertAssignments(columns, assignments, false)
          : org.apache.spark.sql.catalyst.analysis.AssignmentUtils.alignUpdateAssignments(columns, assignments, false, false);
    } catch (Exception e) {
      throw Bridge.sneakyThrow(e instanceof AnalysisException ? named((AnalysisException) e, table) : e);
    }
    java.util.List<Expression> out = new java.util.ArrayList<>();
    scala.collection.Iterator<Assignment> it = aligned.iterator();
    while (it.hasNext()) {
      out.add(it.next().value());
    }
    return out;
  }

  /**
   * A MERGE condition as Spark 4 checks those of its own MERGE (RewriteMergeIntoTable): no
   * non-deterministic expression, no subquery, no aggregate; Spark's errors
   * (UNSUPPORTED_MERGE_CONDITION.*) otherwise. {@code condName}: SEARCH (the ON condition),
   * UPDATE, DELETE or INSERT (a WHEN clause's).
   */
  public static void checkMergeCondition(String condName, Expression cond) {
    org.apache.spark.sql.errors.QueryCompilationErrors$ errors =
        org.apache.spark.sql.errors.QueryCompilationErrors$.MODULE$;
    if (!cond.deterministic()) {
      throw Bridge.sneakyThrow(errors.nonDeterministicMergeCondition(condName, cond));
    }
    if (org.apache.spark.sql.catalyst.expressions.SubqueryExpression$.MODULE$.hasSubquery(cond)) {
      throw Bridge.sneakyThrow(errors.subqueryNotAllowedInMergeCondition(condName, cond));
    }
    if (cond.exists(new scala.runtime.AbstractFunction1<Expression, Object>() {
          @Override
          public Object apply(Expression e) {
            return e instanceof org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
          }
        })) {
      throw Bridge.sneakyThrow(errors.aggregationNotAllowedInMergeCondition(condName, cond));
    }
  }

  /** Spark's error with its empty table name replaced by the statement's table. */
  private static AnalysisException named(AnalysisException e, java.util.List<String> table) {
    java.util.Map<String, String> params = new java.util.LinkedHashMap<>(e.getMessageParameters());
    String name = params.get("tableName");
    if (e.getCondition() == null || name == null || !(name.isEmpty() || name.equals("``"))) {
      return e;
    }
    StringBuilder quoted = new StringBuilder();
    for (String part : table) {
      if (quoted.length() > 0) quoted.append('.');
      quoted.append('`').append(part.replace("`", "``")).append('`');
    }
    params.put("tableName", quoted.toString());
    AnalysisException renamed = new AnalysisException(e.getCondition(),
        scala.collection.immutable.Map$.MODULE$.from(scala.jdk.javaapi.CollectionConverters.asScala(params)),
        e.getQueryContext(), scala.Option.apply(e.getCause()));
    renamed.setStackTrace(e.getStackTrace());
    return renamed;
  }
}
