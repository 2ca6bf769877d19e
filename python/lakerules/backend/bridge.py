"""The Python object the shim calls (io.lakerules.LakeBackend), through Py4J callbacks.

Callbacks never raise into Py4J: a failure is returned as a JVM Throwable, which the shim
rethrows, so a Spark error keeps its own type and a lakerules error arrives as an
AnalysisException whose message says what went wrong.
"""

from __future__ import annotations

import json
import logging
import traceback

from py4j.protocol import Py4JJavaError
from pyiceberg import exceptions as ie
from pyspark.sql import SparkSession

from lakerules.backend.catalog_ops import CatalogOps
from lakerules.backend.context import Context
from lakerules.errors import CatalogError, LakeError, LakeSyntaxError, TooComplex
from lakerules.execute import run as execute, statements as executed_statements
from lakerules.iceberg.catalogs import Catalogs
from lakerules.metadata.tables import MetadataScan, lower_metadata_scan
from lakerules.plan import convert, nodes as P, statements as plan_statements
from lakerules.rules import registry
from lakerules.scan import explain
from lakerules.scan.latemat import LateScan, lower_late_scan
from lakerules.scan.read import lower_scan
from lakerules.spark import jvm as J
from lakerules.sql import statements
from lakerules.write import commit

log = logging.getLogger("lakerules")

_CATALOG_ERRORS = {
    ie.NoSuchTableError: "NoSuchTable",
    ie.NoSuchNamespaceError: "NoSuchNamespace",
    ie.TableAlreadyExistsError: "TableAlreadyExists",
    ie.NamespaceAlreadyExistsError: "NamespaceAlreadyExists",
    ie.NamespaceNotEmptyError: "NonEmptyNamespace",
}


class Backend:
    class Java:
        implements = ["io.lakerules.LakeBackend"]

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self.catalogs = Catalogs(spark)
        self.catalog_ops = CatalogOps(self.catalogs)

    # ---- LakeBackend ---------------------------------------------------------------------

    def parse(self, jsession, sql_text):
        """A routed statement: parsed once into data (lakerules.sql.statements) and handed to Spark
        inside the plan (io.lakerules.LakeStatement), so that Spark resolves its table; EXPLAIN of
        a statement over lake tables answered here; None for a statement that is Spark's."""
        try:
            ctx = self.context(jsession)
            parsed = statements.parse(ctx.spark, sql_text)
            if parsed is None:
                return None
            if isinstance(parsed, statements.Explain):
                return explain.explain_statement(ctx.spark, parsed.statement, parsed.mode)
            return J.statement_node(ctx.spark, list(parsed.table) if parsed.table is not None else None,
                                    plan_statements.to_json(parsed))
        except LakeSyntaxError as e:  # Spark's own ParseException: the one a parser may throw
            return J.parse_error(self.spark, e.sql, e.line, e.column - 1, e.near, e.hint)
        except TooComplex as e:  # as Spark's parser refuses its own statements nested too deep
            return J.parse_too_complex(self.spark, e.sql)
        except BaseException as e:  # noqa: BLE001 - returned to the JVM, which rethrows it
            return self.java_error(e)

    def rewrite(self, jsession, jplan, phase="analysis"):
        """Plan: rules over the tree, then lowering. Runs nothing; a command becomes a JVM
        command node holding a PlannedCommand, which Spark runs when it executes the statement."""
        try:
            ctx = self.context(jsession)
            tree = convert.from_jvm(ctx.spark, jplan)
            tree = registry.apply_rules(tree, ctx, phase)
            return convert.to_jvm(ctx, tree)
        except BaseException as e:  # noqa: BLE001
            return self.java_error(e)

    def stream(self, jsession, op, args_json):
        """A lake table read as a stream (io.lakerules.LakeStreamSource): lakerules.stream_source."""
        from lakerules.streaming import source as stream_source

        try:
            ctx = self.context(jsession)
            args = json.loads(args_json)
            if op == "latest":
                return stream_source.latest(ctx, args)
            if op == "batch":
                return stream_source.batch(ctx, args)
            raise LakeError(f"lakerules: no stream operation {op!r}")
        except BaseException as e:  # noqa: BLE001 - returned to the JVM, which rethrows it
            return self.java_error(e)

    def catalog(self, catalog_name, op, args_json):
        args = json.loads(args_json)
        try:
            return json.dumps(self.catalog_ops.handle(catalog_name, op, args))
        except CatalogError as e:
            return json.dumps({"error": e.kind, "message": str(e), "namespace": list(e.namespace), "name": e.name})
        except tuple(_CATALOG_ERRORS) as e:
            kind = next(v for k, v in _CATALOG_ERRORS.items() if isinstance(e, k))
            return json.dumps(
                {"error": kind, "message": str(e), "namespace": args.get("namespace", []), "name": args.get("name", "")}
            )
        except BaseException as e:  # noqa: BLE001
            return json.dumps({"error": "Analysis", "message": _message(e)})

    # ---- helpers -------------------------------------------------------------------------

    def context(self, jsession) -> Context:
        return Context(spark=self.session(jsession), catalogs=self.catalogs,
                       lowerings={P.LakeScan: lower_scan, LateScan: lower_late_scan, P.Command: self.command_node,
                                  MetadataScan: lower_metadata_scan, P.StreamWriteToLake: self.stream_write_node},
                       planners=executed_statements.PLANNERS)

    def command_node(self, ctx, node: P.Command, lower):
        """A planned command as the JVM command node Spark executes (io.lakerules.LakeCommand)."""
        schema = (executed_statements.result_schema(node.statement) if isinstance(node, P.StatementCommand)
                  else node.result_schema)
        return J.command_node(ctx.spark, PlannedCommand(self, node), schema, P.explain(node))

    def stream_write_node(self, ctx, node: P.StreamWriteToLake, lower):
        """A planned micro-batch write as the JVM node Spark plans and runs for the batch
        (io.lakerules.LakeStreamWrite), the batch's query lowered as its child."""
        return J.stream_write_node(ctx.spark, PlannedStreamWrite(self, node), lower(node.query), node.describe())

    def session(self, jsession) -> SparkSession:
        if jsession is None or J.is_session(self.spark, jsession):
            return self.spark
        return SparkSession(self.spark.sparkContext, jsparkSession=jsession)

    def java_error(self, e: BaseException):
        if isinstance(e, Py4JJavaError):
            return e.java_exception
        origin = getattr(e, "_origin", None)  # pyspark's captured JVM exceptions
        if origin is not None:
            return origin
        return J.analysis_error(self.spark, _message(e))


class PlannedCommand:
    """What io.lakerules.LakeCommand runs (io.lakerules.LakeAction): one planned command,
    executed by lakerules.execute.run each time Spark executes the statement."""

    class Java:
        implements = ["io.lakerules.LakeAction"]

    def __init__(self, backend: Backend, node: P.Command):
        self.backend = backend
        self.node = node

    def run(self, jsession):
        try:
            ctx = self.backend.context(jsession)
            commit.use_session(ctx.spark)  # for its snapshot-property settings
            return execute.execute(ctx, self.node)
        except BaseException as e:  # noqa: BLE001 - returned to the JVM, which rethrows it
            return self.backend.java_error(_clear_read_failure(e, self.node))


class PlannedStreamWrite:
    """What io.lakerules.LakeStreamWriteExec runs (io.lakerules.LakeStreamAction): one planned
    micro-batch write, given the batch's rows when Spark executes the batch."""

    class Java:
        implements = ["io.lakerules.LakeStreamAction"]

    def __init__(self, backend: Backend, node: P.StreamWriteToLake):
        self.backend = backend
        self.node = node

    def write(self, jsession, jdf):
        try:
            from pyspark.sql import DataFrame

            ctx = self.backend.context(jsession)
            commit.use_session(ctx.spark)
            execute.execute_stream_batch(ctx, self.node, DataFrame(jdf, ctx.spark))
            return None
        except BaseException as e:  # noqa: BLE001 - returned to the JVM, which rethrows it
            return self.backend.java_error(_clear_read_failure(e, self.node))


def _clear_read_failure(e: BaseException, node) -> BaseException:
    """A Spark job's failure to read a lake table's file (missing or damaged on disk) as a one-line
    LakeError saying which file and what to do (lakerules.procedures.missing_files); any other error as it is."""
    if isinstance(e, LakeError):
        return e
    from lakerules.procedures import missing_files

    try:
        clear = missing_files.clear(e, execute.title(node), str(node.table))
    except Exception:  # noqa: BLE001 - never hide the error itself
        clear = None
    return clear if clear is not None else e


def _message(e: BaseException) -> str:
    if isinstance(e, LakeError):
        return str(e)
    log.error("lakerules internal error", exc_info=e)
    detail = "".join(traceback.format_exception(e)[-6:])
    return f"lakerules: internal error {type(e).__name__}: {e}\n{detail}"
