package io.lakerules;

import org.apache.spark.sql.catalyst.analysis.ResolvedTable;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;

/**
 * Catalyst plans and expressions that Python builds in one call each (lakerules.spark.jvm calls
 * these through Py4J): projections that rename, cast or add columns, joins, CASE WHEN, IN over a
 * LocalRelation's values or rows, SELECT * FROM a named table, the relation over a resolved lake
 * table. One call instead of a Py4J round trip per column or per value, and every user name or
 * value stays an object (no SQL text). Stateless: it knows nothing of the registry (Bridge).
 */
public final class PlanBuilders {
  private PlanBuilders() {}

  /**
   * Attributes (a plan's output, an expression's references) as an array, for Python to take
   * each by its index (one Py4J call each, where iterating a Seq costs two).
   */
  public static Object[] attributeArray(scala.collection.Iterable<Attribute> attributes) {
    java.util.List<Object> out = new java.util.ArrayList<>();
    for (Attribute a : scala.jdk.javaapi.CollectionConverters.asJava(attributes)) {
      out.add(a);
    }
    return out.toArray();
  }

  /**
   * The expression ids and names of attributes in one string, {@code id,length,name} after one
   * another (length: the name's code points, as Python counts a string, so any name, with a comma
   * or a newline in it too, reads back): one call instead of two or three per attribute.
   */
  public static String attributeIds(scala.collection.Iterable<Attribute> attributes) {
    StringBuilder out = new StringBuilder();
    for (Attribute a : scala.jdk.javaapi.CollectionConverters.asJava(attributes)) {
      String name = a.name();
      out.append(a.exprId().id()).append(',').append(name.codePointCount(0, name.length())).append(',')
          .append(name);
    }
    return out.toString();
  }

  /**
   * Project(child.output(i) AS targets(i).name, keeping targets(i)'s exprId and metadata) for
   * each i: how a replacement subplan keeps the attributes its parents refer to. One call
   * instead of several Py4J round trips per column.
   */
  public static LogicalPlan renameProject(LogicalPlan child, java.util.List<Attribute> targets) {
    scala.collection.immutable.Seq<Attribute> sources = child.output();
    if (sources.size() < targets.size()) {
      throw new IllegalArgumentException("renameProject: " + sources.size() + " columns for "
          + targets.size() + " targets");
    }
    java.util.List<NamedExpression> exprs = new java.util.ArrayList<>();
    scala.collection.immutable.Seq<String> none = scala.collection.immutable.List$.MODULE$.empty();
    for (int i = 0; i < targets.size(); i++) {
      Attribute t = targets.get(i);
      exprs.add(new Alias(sources.apply(i), t.name(), t.exprId(), none,
          scala.Option.apply(t.metadata()), none));
    }
    for (int i = targets.size(); i < sources.size(); i++) {
      exprs.add(sources.apply(i));  // columns past the targets pass through as they are
    }
    return new Project(scala.jdk.javaapi.CollectionConverters.asScala(exprs).toList(), child);
  }

  /**
   * Project(CAST(child.output(i) AS types(i)) AS names(i) with metadata(i) (JSON) for each i, then
   * the rest of child's columns as they are): how a write gives a query's columns the table's
   * types, names and field ids. Built here, not with PySpark's Column API, which records the
   * Python line that called it as the expressions' origin: an error in the user's own expression
   * (a division by zero) would then point at lakerules' code instead of the user's query. The
   * casts take the session's ANSI setting and time zone as Column.cast does.
   */
  public static LogicalPlan castProject(LogicalPlan child, java.util.List<String> typesJson,
      java.util.List<String> names, java.util.List<String> metadataJson) {
    scala.collection.immutable.Seq<Attribute> sources = child.output();
    java.util.List<NamedExpression> exprs = new java.util.ArrayList<>();
    scala.collection.immutable.Seq<String> none = scala.collection.immutable.List$.MODULE$.empty();
    for (int i = 0; i < names.size(); i++) {
      org.apache.spark.sql.types.DataType type =
          org.apache.spark.sql.types.DataType$.MODULE$.fromJson(typesJson.get(i));
      // no cast to the type a column has: the optimizer would drop it, and the error context of
      // the expression under it with it (Spark's own error would name no query)
      org.apache.spark.sql.catalyst.expressions.Expression cast = sources.apply(i).dataType().equals(type)
          ? sources.apply(i)
          : new org.apache.spark.sql.catalyst.expressions.Cast(sources.apply(i), type, scala.Option.empty());
      exprs.add(new Alias(cast, names.get(i),
          org.apache.spark.sql.catalyst.expressions.NamedExpression$.MODULE$.newExprId(), none,
          scala.Option.apply(org.apache.spark.sql.types.Metadata$.MODULE$.fromJson(metadataJson.get(i))), none));
    }
    for (int i = names.size(); i < sources.size(); i++) {
      exprs.add(sources.apply(i));
    }
    return new Project(scala.jdk.javaapi.CollectionConverters.asScala(exprs).toList(), child);
  }

  /** Project(child's columns, then exprs(i) AS names(i)): columns added, the child's kept as they are. */
  public static LogicalPlan withColumns(LogicalPlan child,
      java.util.List<org.apache.spark.sql.catalyst.expressions.Expression> exprs,
      java.util.List<String> names) {
    java.util.List<NamedExpression> out = new java.util.ArrayList<>();
    scala.collection.Iterator<Attribute> it = child.output().iterator();
    while (it.hasNext()) {
      out.add(it.next());
    }
    addAliases(out, exprs, names);
    return new Project(scala.jdk.javaapi.CollectionConverters.asScala(out).toList(), child);
  }

  /** out += exprs(i) AS names(i), each with a fresh exprId. */
  private static void addAliases(java.util.List<NamedExpression> out,
      java.util.List<org.apache.spark.sql.catalyst.expressions.Expression> exprs,
      java.util.List<String> names) {
    scala.collection.immutable.Seq<String> none = scala.collection.immutable.List$.MODULE$.empty();
    for (int i = 0; i < exprs.size(); i++) {
      out.add(new Alias(exprs.get(i), names.get(i),
          org.apache.spark.sql.catalyst.expressions.NamedExpression$.MODULE$.newExprId(), none,
          scala.Option.empty(), none));
    }
  }

  /** Join(left, right, joinType ("inner", "leftouter", "rightouter", "fullouter"), condition). */
  public static LogicalPlan join(LogicalPlan left, LogicalPlan right, String joinType,
      org.apache.spark.sql.catalyst.expressions.Expression condition) {
    return new org.apache.spark.sql.catalyst.plans.logical.Join(left, right,
        org.apache.spark.sql.catalyst.plans.JoinType$.MODULE$.apply(joinType),
        scala.Option.apply(condition),
        org.apache.spark.sql.catalyst.plans.logical.JoinHint$.MODULE$.NONE());
  }

  /** CASE WHEN conds(0) THEN values(0) ... ELSE otherwise END (otherwise may be null: no ELSE). */
  public static org.apache.spark.sql.catalyst.expressions.Expression caseWhen(
      java.util.List<org.apache.spark.sql.catalyst.expressions.Expression> conds,
      java.util.List<org.apache.spark.sql.catalyst.expressions.Expression> values,
      org.apache.spark.sql.catalyst.expressions.Expression otherwise) {
    java.util.List<scala.Tuple2<org.apache.spark.sql.catalyst.expressions.Expression,
        org.apache.spark.sql.catalyst.expressions.Expression>> branches = new java.util.ArrayList<>();
    for (int i = 0; i < conds.size(); i++) {
      branches.add(new scala.Tuple2<>(conds.get(i), values.get(i)));
    }
    return new org.apache.spark.sql.catalyst.expressions.CaseWhen(
        scala.jdk.javaapi.CollectionConverters.asScala(branches).toList(), scala.Option.apply(otherwise));
  }

  /** Project(exprs(i) AS names(i)) over child, each with a fresh exprId: one call. */
  public static LogicalPlan projectAs(LogicalPlan child,
      java.util.List<org.apache.spark.sql.catalyst.expressions.Expression> exprs,
      java.util.List<String> names) {
    java.util.List<NamedExpression> out = new java.util.ArrayList<>();
    addAliases(out, exprs, names);
    return new Project(scala.jdk.javaapi.CollectionConverters.asScala(out).toList(), child);
  }

  /**
   * child IN (the values of a one-column LocalRelation, each a Literal of that column's type):
   * a long IN list built in one call from values that crossed to the JVM in bulk (Arrow), with no
   * SQL text for the parser to read again and no Py4J call per value.
   */
  public static org.apache.spark.sql.catalyst.expressions.Expression inValues(
      org.apache.spark.sql.catalyst.expressions.Expression child, LogicalPlan values) {
    if (!(values instanceof org.apache.spark.sql.catalyst.plans.logical.LocalRelation)
        || values.output().size() != 1) {
      throw new IllegalArgumentException("inValues: a one-column LocalRelation, not " + values.nodeName());
    }
    org.apache.spark.sql.types.DataType type = values.output().head().dataType();
    java.util.List<org.apache.spark.sql.catalyst.expressions.Expression> literals = new java.util.ArrayList<>();
    scala.collection.Iterator<org.apache.spark.sql.catalyst.InternalRow> rows =
        ((org.apache.spark.sql.catalyst.plans.logical.LocalRelation) values).data().iterator();
    while (rows.hasNext()) {
      org.apache.spark.sql.catalyst.InternalRow row = rows.next();
      Object v = row.isNullAt(0) ? null
          : org.apache.spark.sql.catalyst.InternalRow$.MODULE$.copyValue(row.get(0, type));
      literals.add(new org.apache.spark.sql.catalyst.expressions.Literal(v, type));
    }
    return new org.apache.spark.sql.catalyst.expressions.In(child,
        scala.jdk.javaapi.CollectionConverters.asScala(literals).toList());
  }

  /**
   * named_struct(children) IN (the rows of a LocalRelation with one column per child, each row a
   * struct Literal): a multi-column key set built in one call from rows that crossed in bulk.
   * The struct is never NULL and In compares structs field by field with NULL equal to NULL
   * (and NaN to NaN), so the test is a null-safe equality on every column, as an Iceberg equality
   * delete's; with more than a few rows the optimizer makes it an InSet (a sorted set, no nesting
   * of one OR per row).
   */
  public static org.apache.spark.sql.catalyst.expressions.Expression inRows(
      java.util.List<org.apache.spark.sql.catalyst.expressions.Expression> children, LogicalPlan values) {
    if (!(values instanceof org.apache.spark.sql.catalyst.plans.logical.LocalRelation)
        || values.output().size() != children.size() || children.isEmpty()) {
      throw new IllegalArgumentException("inRows: a LocalRelation with one column per key column, not "
          + values.nodeName() + " of " + values.output().size() + " columns for " + children.size());
    }
    java.util.List<Attribute> output = scala.jdk.javaapi.CollectionConverters.asJava(values.output());
    java.util.List<org.apache.spark.sql.catalyst.expressions.Expression> nameValues = new java.util.ArrayList<>();
    for (int i = 0; i < output.size(); i++) {
      nameValues.add(org.apache.spark.sql.catalyst.expressions.Literal.create(output.get(i).name(),
          org.apache.spark.sql.types.DataTypes.StringType));
      nameValues.add(children.get(i));
    }
    org.apache.spark.sql.catalyst.expressions.Expression key =
        new org.apache.spark.sql.catalyst.expressions.CreateNamedStruct(
            scala.jdk.javaapi.CollectionConverters.asScala(nameValues).toList());
    org.apache.spark.sql.types.StructType type =
        org.apache.spark.sql.catalyst.types.DataTypeUtils.fromAttributes(values.output());
    java.util.List<org.apache.spark.sql.catalyst.expressions.Expression> literals = new java.util.ArrayList<>();
    scala.collection.Iterator<org.apache.spark.sql.catalyst.InternalRow> rows =
        ((org.apache.spark.sql.catalyst.plans.logical.LocalRelation) values).data().iterator();
    while (rows.hasNext()) {
      literals.add(new org.apache.spark.sql.catalyst.expressions.Literal(rows.next().copy(), type));
    }
    return new org.apache.spark.sql.catalyst.expressions.In(key,
        scala.jdk.javaapi.CollectionConverters.asScala(literals).toList());
  }

  /**
   * The relation over a command's resolved lake table (TRUNCATE TABLE's), as a query of the
   * table would name it, keeping the columns' exprIds.
   */
  @SuppressWarnings("unchecked")
  public static LogicalPlan relationOf(ResolvedTable resolved) {
    return new DataSourceV2Relation(resolved.table(),
        (scala.collection.immutable.Seq<org.apache.spark.sql.catalyst.expressions.AttributeReference>)
            (scala.collection.immutable.Seq<?>) resolved.outputAttributes(),
        scala.Option.apply(resolved.catalog()), scala.Option.apply(resolved.identifier()),
        org.apache.spark.sql.util.CaseInsensitiveStringMap.empty(), scala.Option.empty());
  }

  /**
   * LocalRelation(schema's attributes, the rows of an Arrow IPC stream written with that schema):
   * Python's rows cross as one byte array in one call (pyspark's createDataFrame of an Arrow
   * table costs dozens of Py4J round trips). The stream's own schema must be schema's, names and
   * types (its nullability and metadata come from schema).
   */
  public static LogicalPlan localRelation(String schemaJson, byte[] ipcStream) {
    org.apache.spark.sql.types.StructType schema =
        (org.apache.spark.sql.types.StructType) org.apache.spark.sql.types.DataType.fromJson(schemaJson);
    // Arrow's own stream reader and Spark's ColumnarBatch: ArrowConverters.fromIPCStream changed
    // its signature between Spark 4.0 and 4.1, these did not.
    java.util.List<org.apache.spark.sql.catalyst.InternalRow> rows = new java.util.ArrayList<>();
    try (org.apache.arrow.memory.BufferAllocator allocator =
             org.apache.spark.sql.util.ArrowUtils.rootAllocator().newChildAllocator("localRelation", 0, Long.MAX_VALUE);
         org.apache.arrow.vector.ipc.ArrowStreamReader reader = new org.apache.arrow.vector.ipc.ArrowStreamReader(
             new java.io.ByteArrayInputStream(ipcStream), allocator)) {
      org.apache.arrow.vector.VectorSchemaRoot root = reader.getVectorSchemaRoot();
      org.apache.spark.sql.types.StructType streamed =
          org.apache.spark.sql.util.ArrowUtils.fromArrowSchema(root.getSchema());
      if (!streamed.sameType(schema)) {
        throw new IllegalArgumentException(
            "localRelation: the Arrow stream's schema " + streamed.simpleString() + " is not " + schema.simpleString());
      }
      java.util.List<org.apache.arrow.vector.FieldVector> vectors = root.getFieldVectors();
      org.apache.spark.sql.vectorized.ColumnVector[] columns = new org.apache.spark.sql.vectorized.ColumnVector[vectors.size()];
      for (int i = 0; i < columns.length; i++) {
        columns[i] = new org.apache.spark.sql.vectorized.ArrowColumnVector(vectors.get(i));
      }
      while (reader.loadNextBatch()) {
        org.apache.spark.sql.vectorized.ColumnarBatch batch =
            new org.apache.spark.sql.vectorized.ColumnarBatch(columns, root.getRowCount());
        java.util.Iterator<org.apache.spark.sql.catalyst.InternalRow> it = batch.rowIterator();
        while (it.hasNext()) {
          rows.add(it.next().copy());  // copied out of the Arrow buffers, freed with the reader
        }
      }
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("localRelation: cannot read the Arrow stream: " + e.getMessage(), e);
    }
    scala.collection.immutable.Seq<Attribute> output = scala.jdk.javaapi.CollectionConverters.asScala(
        new java.util.ArrayList<Attribute>(scala.jdk.javaapi.CollectionConverters.asJava(
            org.apache.spark.sql.catalyst.types.DataTypeUtils$.MODULE$.toAttributes(schema)))).toList();
    return new org.apache.spark.sql.catalyst.plans.logical.LocalRelation(
        output, scala.jdk.javaapi.CollectionConverters.asScala(rows).toList(), false, scala.Option.empty());
  }

  /**
   * plan's rows, computed once now (a Spark job), as a LocalRelation with plan's own output
   * attributes (their exprIds kept, so expressions over plan still resolve): what a MERGE does
   * with a source Spark estimates small enough to broadcast, instead of computing it again for
   * each join that reads it.
   */
  public static LogicalPlan materialized(org.apache.spark.sql.classic.SparkSession session, LogicalPlan plan) {
    org.apache.spark.sql.catalyst.InternalRow[] rows =
        org.apache.spark.sql.classic.Dataset.ofRows(session, plan).queryExecution().executedPlan().executeCollect();
    return new org.apache.spark.sql.catalyst.plans.logical.LocalRelation(
        plan.output(), scala.jdk.javaapi.CollectionConverters.asScala(java.util.Arrays.asList(rows)).toList(), false,
        scala.Option.empty());
  }

  /**
   * The first {@code keys} columns of a plan that is local rows (Spark's optimizer folds its
   * projections into a LocalRelation), summed up here with no Spark job, when they are all INT
   * or BIGINT columns; null otherwise. As text: {@code rows;min,max;...;unique;v,v,...}: per key
   * its minimum and maximum non-NULL value (both empty when it has none), then whether the rows
   * whose keys are all non-NULL have distinct keys ({@code 1} or {@code 0}), then the first key's
   * distinct non-NULL values, sorted. A MERGE's small source (materialized): pruning by its keys
   * took a job of its own before (~50-80 ms of a 10,000-row MERGE's ~1 s).
   */
  public static String localKeys(org.apache.spark.sql.classic.SparkSession session, LogicalPlan plan, int keys) {
    org.apache.spark.sql.execution.QueryExecution qe = org.apache.spark.sql.classic.Dataset.ofRows(session, plan).queryExecution();
    if (!(qe.optimizedPlan() instanceof org.apache.spark.sql.catalyst.plans.logical.LocalRelation)) {
      return null;
    }
    java.util.List<Attribute> output = scala.jdk.javaapi.CollectionConverters.asJava(qe.optimizedPlan().output());
    boolean[] ints = new boolean[keys];
    for (int k = 0; k < keys; k++) {
      org.apache.spark.sql.types.DataType type = output.get(k).dataType();
      if (!(type instanceof org.apache.spark.sql.types.LongType || type instanceof org.apache.spark.sql.types.IntegerType)) {
        return null;
      }
      ints[k] = type instanceof org.apache.spark.sql.types.IntegerType;
    }
    org.apache.spark.sql.catalyst.InternalRow[] rows = qe.executedPlan().executeCollect();
    long[] min = new long[keys];
    long[] max = new long[keys];
    boolean[] seen = new boolean[keys];
    java.util.TreeSet<Long> first = new java.util.TreeSet<>();
    java.util.Set<java.util.List<Long>> tuples = new java.util.HashSet<>();
    int complete = 0;
    for (org.apache.spark.sql.catalyst.InternalRow row : rows) {
      Long[] tuple = new Long[keys];
      boolean whole = true;
      for (int k = 0; k < keys; k++) {
        if (row.isNullAt(k)) {
          whole = false;
          continue;
        }
        long v = ints[k] ? row.getInt(k) : row.getLong(k);
        tuple[k] = v;
        min[k] = seen[k] ? Math.min(min[k], v) : v;
        max[k] = seen[k] ? Math.max(max[k], v) : v;
        seen[k] = true;
        if (k == 0) {
          first.add(v);
        }
      }
      if (whole) {
        complete++;
        tuples.add(java.util.Arrays.asList(tuple));
      }
    }
    StringBuilder out = new StringBuilder().append(rows.length);
    for (int k = 0; k < keys; k++) {
      out.append(';');
      if (seen[k]) {
        out.append(min[k]).append(',').append(max[k]);
      } else {
        out.append(',');
      }
    }
    out.append(';').append(tuples.size() == complete ? '1' : '0').append(';');
    boolean comma = false;
    for (long v : first) {
      if (comma) {
        out.append(',');
      }
      out.append(v);
      comma = true;
    }
    return out.toString();
  }
}
