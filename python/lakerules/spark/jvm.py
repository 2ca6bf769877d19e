"""Small helpers at the Py4J edge: Scala collections and Options, class names, Datasets over
JVM plans, and the small result plans commands return. The shim's static entry points are reached
only through here (and lakerules.spark.attributes): io.lakerules.Bridge (the registry: attach,
detach, a catalog's options, touchesLake) and io.lakerules.PlanBuilders (built in one call)."""

from __future__ import annotations

from typing import Any, Iterable

from py4j.java_gateway import JavaClass
from pyspark.sql import Column, DataFrame, SparkSession

from lakerules.errors import LakeError
from lakerules.spark import attributes
from lakerules.spark.jclasses import import_pyspark_names, jclass


def to_seq(spark: SparkSession, items: Iterable[Any]):
    """A Python iterable as an immutable Scala Seq."""
    return jclass(spark, "scala.jdk.javaapi.CollectionConverters").asScala(to_java_list(spark, items)).toList()


def to_java_list(spark: SparkSession, items: Iterable[Any]):
    lst = jclass(spark, "java.util.ArrayList")()
    for item in items:
        lst.add(item)
    return lst


def nul_joined(texts) -> str:
    """Strings (file paths) as one NUL-separated string: how lists cross to the JVM in one call."""
    texts = list(texts)
    for t in texts:
        if "\0" in t:
            raise LakeError(f"lakerules: a file path contains a NUL character: {t!r}")
    return "\0".join(texts)


def from_seq(seq) -> list:
    """A Scala Seq (or any Scala iterable, or a java.util.List) as a Python list. Not Python's
    iteration of a Java collection: Py4J ends it with the JVM's NoSuchElementException, which
    pyspark converts by asking the JVM about a dozen classes (measured ~20 ms an iteration)."""
    it = seq.iterator()
    out = []
    while it.hasNext():
        out.append(it.next())
    return out


def scala_map(m) -> dict:
    """A Scala Map[String, String] as a Python dict."""
    return {t._1(): t._2() for t in from_seq(m.toList())}


def option_value(opt):
    """The value of a Scala Option, or None."""
    return opt.get() if opt.isDefined() else None


def class_name(obj) -> str:
    return obj.getClass().getName()


def simple_name(obj) -> str:
    return obj.getClass().getSimpleName()


def dataframe(spark: SparkSession, plan) -> DataFrame:
    """A DataFrame over an (analyzed or not) JVM logical plan."""
    jdf = jclass(spark, "org.apache.spark.sql.classic.Dataset").ofRows(spark._jsparkSession, plan)
    return DataFrame(jdf, spark)


def analyzed(df: DataFrame):
    """The analyzed JVM logical plan of a DataFrame."""
    return df._jdf.queryExecution().analyzed()


def empty_result(spark: SparkSession):
    """The plan a command returns when it has no rows to show (what Spark's v2 writes return)."""
    from pyspark.sql.types import StructType

    return analyzed(local_frame(spark, [], StructType([])))


def result_rows(spark: SparkSession, rows: list[tuple], schema: str):
    """A LocalRelation of a few result rows, e.g. DML's num_affected_rows (``schema``: lakerules'
    own fixed DDL, never a user's name)."""
    from pyspark.sql.types import StructType

    return analyzed(local_frame(spark, rows, StructType.fromDDL(schema)))


def local_frame(spark: SparkSession, rows: list, schema) -> DataFrame:
    """A DataFrame of driver-side Python rows (tuples in ``schema``'s column order, any types) as
    a LocalRelation built in the JVM from one Arrow IPC stream: values cross as data, never as SQL text.
    ``spark.createDataFrame(rows)`` makes a Python RDD instead, which runs Python workers on the
    executors: lakerules needs none. Naive datetimes of TIMESTAMP columns are local times, as
    PySpark gives and takes them."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import TimestampType

    # pyspark 4.1 spells UTC timestamps timestamp_utc=True (its default); 4.2 and later, timezone=.
    try:
        arrow_schema = to_arrow_schema(schema, timezone="UTC")
    except TypeError:
        arrow_schema = to_arrow_schema(schema)
    columns = [list(c) for c in zip(*rows)] if rows else [[] for _ in schema.fields]
    for c, f in zip(columns, schema.fields):
        if isinstance(f.dataType, TimestampType):
            c[:] = [v.astimezone() if v is not None and v.tzinfo is None else v for v in c]
    table = pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, arrow_schema)],
                                 schema=arrow_schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, arrow_schema) as stream:
        stream.write_table(table)
    # one call (PlanBuilders.localRelation); pyspark's createDataFrame of the table costs dozens
    return dataframe(spark, _builders(spark).localRelation(schema.json(), sink.getvalue().to_pybytes()))


def one_row(spark: SparkSession) -> DataFrame:
    """A DataFrame of one row and no columns (SELECT without FROM), to evaluate expressions on."""
    return dataframe(spark, jclass(spark, "org.apache.spark.sql.catalyst.plans.logical.OneRowRelation")())


def quote(name: str) -> str:
    """A name as one backtick-quoted identifier part (backticks doubled), whatever it holds."""
    return "`" + name.replace("`", "``") + "`"


def column(*path: str) -> Column:
    """The column (a struct field, with more parts) named by ``path``, each part exactly as it
    is: quoted here, so no name is read as anything else."""
    from pyspark.sql import functions as F

    return F.col(".".join(quote(p) for p in path))


def select(df: DataFrame, names: Iterable[str]) -> DataFrame:
    """``df.select(*[column(n) for n in names])`` for top-level names, in one JVM call: Spark's
    ``Dataset.select(String...)`` reads each backtick-quoted name as one part, as column() does,
    without the Py4J calls (and call-site capture) column() costs per name: about a millisecond
    each, which a 60-column scan planned twice pays hundreds of times."""
    quoted = [quote(n) for n in names]
    if not quoted:
        return df.select()
    spark = df.sparkSession
    rest = jclass(spark, "org.apache.spark.api.python.PythonUtils").toSeq(quoted[1:])  # the list crosses as one
    return DataFrame(df._jdf.select(quoted[0], rest), spark)


def _builders(spark: SparkSession):
    """io.lakerules.PlanBuilders: Catalyst plans and expressions the shim builds in one call."""
    return jclass(spark, "io.lakerules.PlanBuilders")


def is_in(spark: SparkSession, col: Column, values: list, data_type) -> Column:
    """``col IN (values)``, the values as literals of ``data_type`` (a Spark DataType), built in
    the JVM in one call (io.lakerules.PlanBuilders.inValues) from a LocalRelation that carried them
    as Arrow data: no SQL text, and no Py4J call per value however many there are."""
    from pyspark.sql.classic.column import Column as ClassicColumn
    from pyspark.sql.types import StructField, StructType

    relation = analyzed(local_frame(spark, [(v,) for v in values], StructType([StructField("v", data_type)])))
    utils = jclass(spark, "org.apache.spark.sql.classic.ExpressionUtils")
    expr = _builders(spark).inValues(utils.expression(col._jc), relation)
    return ClassicColumn(utils.column(expr))


def in_rows(spark: SparkSession, cols: list[Column], rows: list[tuple], schema) -> Column:
    """``(cols...)`` matching one of ``rows`` (tuples in ``schema``'s field order, a Spark
    StructType with one field per column), each column compared null-safely (NULL matches NULL),
    built in the JVM in one call (io.lakerules.PlanBuilders.inRows) from rows that crossed as Arrow data:
    no Py4J call per value and no OR nested once per row (which overflows the JVM's stack on
    thousands of rows)."""
    from pyspark.sql.classic.column import Column as ClassicColumn

    relation = analyzed(local_frame(spark, rows, schema))
    utils = jclass(spark, "org.apache.spark.sql.classic.ExpressionUtils")
    children = to_java_list(spark, [utils.expression(c._jc) for c in cols])
    expr = _builders(spark).inRows(children, relation)
    return ClassicColumn(utils.column(expr))


def statement_node(spark: SparkSession, table: list[str] | None, payload: str):
    """io.lakerules.LakeStatement: a parsed statement's data (``payload``, JSON) over its table
    as named (``table``'s name parts, which Spark resolves as for its own statements), or over no
    table (None: a statement on a catalog)."""
    parts = to_java_list(spark, table) if table is not None else None
    return jclass(spark, "io.lakerules.LakeStatement").of(parts, payload)


def statement_of(plan):
    """(payload, child) of an io.lakerules.LakeStatement."""
    return str(plan.payload()), plan.child()


def command_node(spark: SparkSession, action, result_schema: str, description: str):
    """io.lakerules.LakeCommand: the JVM command node that runs ``action`` (a Python
    io.lakerules.LakeAction) when Spark executes the statement; ``result_schema`` is lakerules'
    own fixed DDL of its result columns."""
    return jclass(spark, "io.lakerules.LakeCommand").create(action, result_schema, description)


def stream_write_node(spark: SparkSession, action, query, description: str):
    """io.lakerules.LakeStreamWrite: one micro-batch's write to a lake table, ``query`` (the
    batch's JVM plan) as its child; ``action`` (a Python io.lakerules.LakeStreamAction) gets
    the batch's rows when Spark executes it."""
    return jclass(spark, "io.lakerules.LakeStreamWrite").create(action, query, description)


def can_up_cast(spark: SparkSession, source, target) -> bool:
    """Whether Spark casts a value of type ``source`` to ``target`` without loss (Cast.canUpCast;
    both pyspark DataTypes)."""
    types = jclass(spark, "org.apache.spark.sql.types.DataType")
    return bool(jclass(spark, "org.apache.spark.sql.catalyst.expressions.Cast").canUpCast(
        types.fromJson(source.json()), types.fromJson(target.json())))


# ---- Catalyst objects lakerules builds (so the rest of the package does not reach into _jvm) ----


def _expr(spark: SparkSession, name: str):
    """A class of Catalyst's expressions package (org.apache.spark.sql.catalyst.expressions)."""
    return jclass(spark, f"org.apache.spark.sql.catalyst.expressions.{name}")


def is_null(spark: SparkSession, expr):
    """IsNull(expr)."""
    return _expr(spark, "IsNull")(expr)


def is_not_null(spark: SparkSession, expr):
    """IsNotNull(expr)."""
    return _expr(spark, "IsNotNull")(expr)


def all_of(spark: SparkSession, conditions):
    """And(c1, And(c2, ...)): every condition (at least one)."""
    from functools import reduce

    return reduce(lambda a, b: _expr(spark, "And")(a, b), list(conditions))


def not_true(spark: SparkSession, condition):
    """NOT (condition <=> TRUE): what a row keeps when SQL's WHERE drops it (FALSE or NULL)."""
    return _expr(spark, "Not")(_expr(spark, "EqualNullSafe")(condition, true_literal(spark)))


def literal(spark: SparkSession, value, data_type=None):
    """A Catalyst Literal of a Python value (of ``data_type``, a JVM DataType, when given)."""
    lit = getattr(_expr(spark, "Literal$"), "MODULE$")
    return lit.create(value, data_type) if data_type is not None else lit.apply(value)


def equi_keys(condition, left_ids: set, right_ids: set) -> list:
    """The ``left = right`` conjuncts of a join condition (EqualTo, not the null-safe <=>): (left
    expression, right expression) pairs, each side referring only to columns of its own side
    (``left_ids`` / ``right_ids``: exprIds); the sides of a pair are swapped to put the left first."""
    out, todo = [], [condition]
    while todo:
        e = todo.pop()
        name = simple_name(e)
        if name == "And":
            todo += [e.right(), e.left()]
            continue
        if name != "EqualTo":
            continue
        a, b = e.left(), e.right()
        refs_a, refs_b = reference_ids(a), reference_ids(b)
        if refs_a and refs_b and refs_a <= left_ids and refs_b <= right_ids:
            out.append((a, b))
        elif refs_a and refs_b and refs_b <= left_ids and refs_a <= right_ids:
            out.append((b, a))
    return out


def equal_to(spark: SparkSession, left, right):
    """EqualTo(left, right)."""
    return _expr(spark, "EqualTo")(left, right)


def project(spark: SparkSession, plan, attributes):
    """Project(attributes, plan): plan's columns ``attributes`` (of its output) as they are."""
    return jclass(spark, "org.apache.spark.sql.catalyst.plans.logical.Project")(to_seq(spark, attributes), plan)


def broadcast_threshold(spark: SparkSession) -> int:
    """The session's spark.sql.autoBroadcastJoinThreshold in bytes (-1: never broadcast)."""
    return int(spark._jsparkSession.sessionState().conf().autoBroadcastJoinThreshold())


def estimated_bytes(df: DataFrame) -> int:
    """Spark's estimate of a DataFrame's size in bytes (its optimized plan's statistics, what Spark
    itself broadcasts by)."""
    return int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))  # a BigInt


def reference_ids(expr) -> set:
    """The exprIds of the attributes an expression refers to (one call)."""
    return set(attributes.expr_ids(expr.references().toSeq()))


def true_literal(spark: SparkSession):
    return getattr(_expr(spark, "Literal$"), "MODULE$").TrueLiteral()


def filter_plan(spark: SparkSession, condition, plan):
    """Filter(condition, plan)."""
    return jclass(spark, "org.apache.spark.sql.catalyst.plans.logical.Filter")(condition, plan)


def rename_project(spark: SparkSession, plan, attributes):
    """plan's columns under ``attributes``' names and exprIds (io.lakerules.PlanBuilders.renameProject)."""
    return _builders(spark).renameProject(plan, to_java_list(spark, attributes))


def project_as(spark: SparkSession, plan, exprs, names):
    """Project(exprs(i) AS names(i)) over plan, fresh exprIds (io.lakerules.PlanBuilders.projectAs)."""
    return _builders(spark).projectAs(plan, to_java_list(spark, exprs), to_java_list(spark, names))


def reads_only_memory(df: DataFrame) -> bool:
    """Whether every relation a DataFrame reads is in memory (cached, local rows, a range)."""
    leaves = from_seq(df._jdf.queryExecution().withCachedData().collectLeaves())
    return all(simple_name(leaf) in ("InMemoryRelation", "LocalRelation", "OneRowRelation", "Range") for leaf in leaves)


def materialized(spark: SparkSession, plan):
    """plan's rows computed once, now (a Spark job), as a LocalRelation with plan's output
    attributes (io.lakerules.PlanBuilders.materialized)."""
    return _builders(spark).materialized(spark._jsparkSession, plan)


def with_columns(spark: SparkSession, plan, exprs, names):
    """Project(plan's columns, then exprs(i) AS names(i)), fresh exprIds (io.lakerules.PlanBuilders.withColumns)."""
    return _builders(spark).withColumns(plan, to_java_list(spark, exprs), to_java_list(spark, names))


def join(spark: SparkSession, left, right, join_type: str, condition):
    """Join(left, right, join_type ("inner", "leftouter", "rightouter", "fullouter"), condition)."""
    return _builders(spark).join(left, right, join_type, condition)


def case_when(spark: SparkSession, conds, values, otherwise):
    """CASE WHEN conds(0) THEN values(0) ... ELSE otherwise END (otherwise None: no ELSE)."""
    return _builders(spark).caseWhen(to_java_list(spark, conds), to_java_list(spark, values), otherwise)


def relation_of(spark: SparkSession, resolved_table):
    """The relation over a command's ResolvedTable of a lake table, as a query of it names it
    (io.lakerules.PlanBuilders.relationOf)."""
    return _builders(spark).relationOf(resolved_table)


def cast_columns(spark: SparkSession, df: DataFrame, columns: list[tuple[str, Any, dict]]) -> DataFrame:
    """df's first columns cast and renamed: ``columns`` (name, Spark DataType, metadata) for each,
    the rest of df's columns kept as they are; built in the JVM (io.lakerules.PlanBuilders.castProject)
    so that the expressions carry no Python call site of lakerules as their origin."""
    import json

    plan = _builders(spark).castProject(
        df._jdf.logicalPlan(), to_java_list(spark, [t.json() for _, t, _ in columns]),
        to_java_list(spark, [n for n, _, _ in columns]), to_java_list(spark, [json.dumps(m) for _, _, m in columns]))
    return dataframe(spark, plan)


def align_assignments(spark: SparkSession, table_parts: list[str], attributes, assignments, insert: bool) -> tuple:
    """A row-level command's (key, value) assignments as Spark aligns them for a table it
    rewrites itself: one (attribute, value) pair per column of ``attributes``, in order, nested
    fields folded into their struct, struct values matched by field name, each value resolved
    under spark.sql.storeAssignmentPolicy; Spark's own errors for what it refuses, naming the
    table ``table_parts`` (io.lakerules.LakeAssignments.align). ``insert``: a MERGE INSERT
    action (every column needs a value or a default)."""
    values = jclass(spark, "io.lakerules.LakeAssignments").align(
        to_java_list(spark, attributes), to_java_list(spark, [k for k, _ in assignments]),
        to_java_list(spark, [v for _, v in assignments]), insert, to_java_list(spark, list(table_parts)))
    return tuple(zip(attributes, from_seq(values)))


def check_merge_condition(spark: SparkSession, cond_name: str, condition) -> None:
    """Spark's own checks of a MERGE condition (io.lakerules.LakeAssignments.checkMergeCondition):
    deterministic, no subquery, no aggregate; Spark's UNSUPPORTED_MERGE_CONDITION errors."""
    jclass(spark, "io.lakerules.LakeAssignments").checkMergeCondition(cond_name, condition)


def recache_table(spark: SparkSession, name_parts: list[str]) -> None:
    """After a write to a table: every cached plan that reads it (CACHE TABLE, df.cache()) is
    computed again, lazily, from the table as it now is, as Spark does after its own writes.
    Cached reads of an older snapshot (VERSION AS OF) stay as they are."""
    jsession = spark._jsparkSession
    jsession.sharedState().cacheManager().recacheTableOrView(jsession, to_seq(spark, name_parts), False)


def has_subquery(spark: SparkSession, condition) -> bool:
    return bool(_expr(spark, "SubqueryExpression").hasSubquery(condition))


def name_parts(spark: SparkSession, name: str) -> list[str]:
    """A multipart name as Spark's parser reads it (quoting as Spark's own statements)."""
    parser = spark._jsparkSession.sessionState().sqlParser()
    return [str(p) for p in from_seq(parser.parseMultipartIdentifier(name))]


def catalog_manager(spark: SparkSession):
    return spark._jsparkSession.sessionState().catalogManager()


def bridge(spark: SparkSession):
    """io.lakerules.Bridge, where the JVM finds the Python registry (the Catalyst builders are
    PlanBuilders', through the functions above)."""
    return jclass(spark, "io.lakerules.Bridge")


def shim_loaded(spark: SparkSession) -> bool:
    """Whether the shim jar is on the session's classpath (asked of the JVM: jclass does not ask)."""
    return isinstance(spark._jvm.io.lakerules.Bridge, JavaClass)


def register_backend(spark: SparkSession, backend, routes: str) -> None:
    """The JVM's registry is ``backend`` (a Python io.lakerules.LakeBackend); its parser routes
    the statements ``routes`` matches to it."""
    import_pyspark_names(spark)
    bridge(spark).register(backend, routes)


def unregister_backend(spark: SparkSession) -> None:
    bridge(spark).unregister()


def catalog_options(spark: SparkSession, name: str) -> str | None:
    """The options Spark gave the lake catalog ``name`` (spark.sql.catalog.NAME.*) as JSON, or
    None when ``name`` is not a lake catalog Spark has initialized."""
    return bridge(spark).catalogOptions(name)


def settings_with_prefix(spark: SparkSession, prefix: str) -> dict[str, str]:
    """The session's settings whose names start with ``prefix``, read in one call."""
    import json

    return json.loads(str(bridge(spark).settingsWithPrefix(spark._jsparkSession, prefix)))


def touches_lake(spark: SparkSession, plan) -> bool:
    """Whether the JVM plan reads or writes a lake table or catalog anywhere (a cheap walk in the JVM)."""
    return bool(bridge(spark).touchesLake(plan))


def manifest_entries(spark: SparkSession, paths: list[str], schema_json: str, bounds: list[tuple[int, str]]):
    """A DataFrame of the live entries of manifests, read on the executors by the shim
    (io.lakerules.functions.ManifestEntries; lakerules.scan.manifest_job says what the rows hold).
    The paths cross in one string, NUL-separated (no path holds a NUL)."""
    gateway = spark.sparkContext._gateway
    ids = gateway.new_array(jclass(spark, "int"), len(bounds))
    kinds = gateway.new_array(jclass(spark, "java.lang.String"), len(bounds))
    for i, (field_id, kind) in enumerate(bounds):
        ids[i], kinds[i] = field_id, kind
    jdf = jclass(spark, "io.lakerules.functions.ManifestEntries").read(spark._jsparkSession, "\0".join(paths),
                                                          schema_json, ids, kinds)
    return DataFrame(jdf, spark)


def checkpoint_root(spark: SparkSession, query_id: str) -> str | None:
    """The resolved checkpoint folder of the active streaming query ``query_id``, if it can be told."""
    try:
        query = spark._jsparkSession.streams().get(jclass(spark, "java.util.UUID").fromString(query_id))
        if query is None:
            return None
        return str(query.streamingQuery().resolvedCheckpointRoot())
    except Exception:  # noqa: BLE001 - an older or newer Spark's internals: nothing to tell
        return None


def analyze_sql(spark: SparkSession, sql_text: str):
    """The analyzed plan of a statement (Spark's parser and analyzer; nothing runs)."""
    state = spark._jsparkSession.sessionState()
    return state.analyzer().execute(state.sqlParser().parsePlan(sql_text))


# ---- plans and query executions ------------------------------------------------------------------


def optimized_plan(df: DataFrame):
    """The optimized logical plan of a DataFrame (Spark's optimizer; nothing runs)."""
    return df._jdf.queryExecution().optimizedPlan()


def explain_string(spark: SparkSession, df: DataFrame, mode: str) -> tuple[str, Any]:
    """(Spark's EXPLAIN text of df in ``mode``, df's analyzed plan): planning the query, no job."""
    qe = df._jdf.queryExecution()
    return str(jclass(spark, "org.apache.spark.sql.api.python.PythonSQLUtils").explainString(qe, mode)), qe.analyzed()


def is_session(spark: SparkSession, jsession) -> bool:
    """Whether the JVM session ``jsession`` is ``spark``'s own."""
    return bool(jsession.equals(spark._jsparkSession))


# ---- Spark's errors, as the JVM throws them --------------------------------------------------------


def parse_error(spark: SparkSession, sql: str, line: int, column: int, near: str, hint: str):
    """Spark's ParseException for a syntax error of a lakerules statement (its position)."""
    return bridge(spark).parseError(sql, line, column, near, hint)


def parse_too_complex(spark: SparkSession, sql: str):
    """Spark's FAILED_TO_PARSE_TOO_COMPLEX ParseException."""
    return bridge(spark).parseTooComplex(sql)


def analysis_error(spark: SparkSession, message: str):
    """A lakerules error as Spark's AnalysisException (one line, no JVM stack)."""
    return bridge(spark).analysisError(message)


# ---- files, through Hadoop's file system (the session's settings) ---------------------------------


def hadoop_list(spark: SparkSession, folder: str) -> tuple[str, list[tuple[str, int]]]:
    """(the folder's qualified path, (path, length) of every file below it), listed by Hadoop."""
    path = jclass(spark, "org.apache.hadoop.fs.Path")(folder)
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    root = fs.makeQualified(path).toUri().getPath()
    it = fs.listFiles(path, True)
    out = []
    while it.hasNext():
        status = it.next()
        out.append((status.getPath().toUri().getPath(), status.getLen()))
    return root, out


def hadoop_delete_tree(spark: SparkSession, folder: str) -> None:
    """Delete a folder and what is in it, through Hadoop's file system."""
    path = jclass(spark, "org.apache.hadoop.fs.Path")(folder)
    path.getFileSystem(spark._jsc.hadoopConfiguration()).delete(path, True)


# ---- the shim's readers ----------------------------------------------------------------------------


def data_type(spark: SparkSession, json_text: str):
    """Spark's DataType of a schema's JSON, in the JVM."""
    return spark._jsparkSession.parseDataType(json_text)


def file_index_read(spark: SparkSession, listing: str, jschema, options: str, estimate: int, deletes=None, lineage=None):
    """io.lakerules.LakeFileIndex.read: the plan reading the listed files (no listing, no status calls), less the rows
    ``deletes`` (a JVM PositionDeleteSet) deletes; each file's ``lineage`` (NUL-joined) as constant _metadata fields."""
    return jclass(spark, "io.lakerules.LakeFileIndex").read(spark._jsparkSession, listing, jschema, options, estimate, deletes, lineage)


def file_names(spark: SparkSession, joined_paths: str) -> str:
    """io.lakerules.LakeFileIndex.namesOf: Spark's names of the paths (NUL-joined), in one call."""
    return str(jclass(spark, "io.lakerules.LakeFileIndex").namesOf(joined_paths, spark._jsc.hadoopConfiguration()))


def page_ranges(spark: SparkSession, request: str, ids: str) -> str:
    """io.lakerules.PageRanges.plan: the row ranges to read of each file, from footers and offset indexes."""
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    return str(jclass(spark, "io.lakerules.PageRanges").plan(conf, request, ids))


# ---- the Python process a JVM driver starts ------------------------------------------------------


def connect_to_driver(python_setting: str):
    """The PySpark session of the JVM that started this process (PYSPARK_GATEWAY_PORT/_SECRET):
    its own SparkContext and SparkSession wrapped, neither created (io.lakerules.PythonBackend
    holds the session waiting for a registry). ``python_setting`` names the setting of the
    interpreter, in the warning when its pyspark and the JVM's Spark differ."""
    import logging
    import os
    import sys

    import pyspark
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway()  # connects to the JVM named by PYSPARK_GATEWAY_PORT/_SECRET
    jvm = gateway.jvm
    jsession = jvm.io.lakerules.PythonBackend.session()
    if jsession is None:
        raise RuntimeError("the JVM has no SparkSession waiting for a rule registry")
    jsc = jvm.org.apache.spark.api.java.JavaSparkContext(jsession.sparkContext())
    jvm_version = jsc.version()
    if jvm_version.split(".")[:2] != pyspark.__version__.split(".")[:2]:
        logging.getLogger("lakerules").warning(
            "lakerules: this Python has pyspark %s, the JVM runs Spark %s; use an interpreter whose "
            "pyspark matches (%s)", pyspark.__version__, jvm_version, python_setting
        )
    conf = SparkConf(_jconf=jsc.getConf())  # a copy of the JVM context's: nothing is set on it
    # lakerules itself starts no Python worker (its small DataFrames are LocalRelations); Python
    # UDFs that rules or users register run the interpreter this process names, as spark-submit
    # does: spark.pyspark.python, else PYSPARK_PYTHON, else this interpreter, which has pyspark.
    worker = conf.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON") or sys.executable
    os.environ["PYSPARK_PYTHON"] = worker
    sc = SparkContext(gateway=gateway, jsc=jsc, conf=conf)
    return SparkSession(sc, jsparkSession=jsession)
