"""Statements Spark's grammar does not have, routed by the shim's parser to Python.

The shim routes texts that may be one of them (ROUTES, comments allowed before); the one
sqlglot dialect (lakerules.sql.dialect) parses each, and a syntax error is Spark's ParseException
with its position. Each becomes a planned command on its table, run when Spark executes it.

Partition evolution, as Iceberg's Spark extensions spell it:
    ALTER TABLE t ADD PARTITION FIELD bucket(16, id) [AS name]
    ALTER TABLE t DROP PARTITION FIELD days(ts) | name
    ALTER TABLE t REPLACE PARTITION FIELD days(ts) | name WITH hours(ts) [AS name]

Iceberg's branches and tags (lakerules.procedures.history, lakerules.iceberg.refs):
    ALTER TABLE t CREATE [OR REPLACE] | REPLACE BRANCH|TAG [IF NOT EXISTS] name [AS OF VERSION n]
        [RETAIN n DAYS|HOURS|MINUTES] [WITH SNAPSHOT RETENTION [n SNAPSHOTS] [n DAYS|HOURS|MINUTES]]
    ALTER TABLE t DROP BRANCH|TAG [IF EXISTS] name

Iceberg's write order (lakerules.write.order):
    ALTER TABLE t WRITE [DISTRIBUTED BY PARTITION] [LOCALLY] ORDERED BY <fields> | UNORDERED
    ALTER TABLE t SET | DROP IDENTIFIER FIELDS a, b

Iceberg's maintenance procedures on a lake catalog (lakerules.procedures.maintenance):
    CALL lake.system.remove_orphan_files(table => 'db.t', ...)
    CALL lake.system.expire_snapshots(table => 'db.t', ...)
    CALL lake.system.rewrite_manifests(table => 'db.t', ...)
(rewrite_data_files runs on OPTIMIZE's engine, lakerules.optimize.rewrite; rewrite_position_delete_files
is lakerules.procedures.rewrite_position_delete_files) and its history procedures (rollback_to_snapshot, ..., lakerules.procedures.history).

Delta's history statements (lakerules.procedures.history):
    DESCRIBE HISTORY lake.db.t [LIMIT n]
    RESTORE [TABLE] lake.db.t [TO] VERSION AS OF <snapshot id> | TIMESTAMP AS OF <expression>
and Delta's VACUUM lake.db.t [RETAIN n HOURS] [DRY RUN] (lakerules.procedures.vacuum).
"""

from __future__ import annotations

import re
from typing import Callable


from lakerules.sql import dialect, nesting
from lakerules.plan import pending
from lakerules.scan import explain as explain_mod
from lakerules.spark import jvm as J
from lakerules.iceberg import names, partitioning
from lakerules.errors import LakeError
from lakerules.sql.routes import ROUTES  # noqa: F401  (re-exported: lakerules.attach registers it)

_EXPLAIN_MODE = re.compile(r"(EXTENDED|FORMATTED|CODEGEN|COST)\b\s*(.*)$", re.IGNORECASE | re.DOTALL)


def parse(ctx, sql_text: str):
    """The plan for a routed statement: its target table under a command marker, or None. A
    statement nested too deep is refused as Spark refuses its own (lakerules.sql.nesting)."""
    with nesting.parsing(sql_text):
        return _parse(ctx, sql_text)


def _parse(ctx, sql_text: str):
    kind = dialect.statement_kind(sql_text)
    if kind == "EXPLAIN":
        inner, mode = dialect.after_first_word(sql_text), None
        m = _EXPLAIN_MODE.match(inner)
        if m:
            mode, inner = m.group(1), m.group(2)
        return _explain(ctx, inner, mode)
    if kind == "PARTITION FIELD":
        stmt = dialect.parse_partition_field(sql_text)
        op, old, new = stmt.args["op"], stmt.args["field"], stmt.args.get("new")
        return _marked(ctx, stmt.this, lambda ctx, table: _partition_field(ctx, table, op, old, new))
    if kind == "REF":  # ALTER TABLE ... CREATE/REPLACE/DROP BRANCH/TAG: lakerules.procedures.history
        from lakerules.procedures import history

        stmt = dialect.parse_ref_statement(sql_text)
        return _marked(ctx, stmt.this, history.ref_command(stmt))
    if kind in ("WRITE ORDER", "IDENTIFIER FIELDS"):  # lakerules.write.order
        from lakerules.write import order as write_order

        if kind == "WRITE ORDER":
            stmt = dialect.parse_write_order(sql_text)
            return _marked(ctx, stmt.this, write_order.command(stmt))
        stmt = dialect.parse_identifier_fields(sql_text)
        return _marked(ctx, stmt.this, write_order.identifier_fields_command(stmt))
    if kind == "OPTIMIZE":  # OPTIMIZE ... [ZORDER BY ...]: lakerules.optimize.rewrite
        from lakerules.optimize import rewrite as optimize

        statement = optimize.parse(sql_text)
        return _marked(ctx, statement.table, optimize.command(statement))
    if kind == "CALL":
        stmt = dialect.parse_call(sql_text)
        return _call(ctx, stmt.this, stmt.args.get("args") or [])
    if kind == "DESCRIBE HISTORY":
        from lakerules.procedures import history

        stmt = dialect.parse_describe_history(sql_text)
        return _marked(ctx, stmt.this, history.describe_history(stmt.args.get("limit")))
    if kind == "RESTORE":
        return _restore(ctx, dialect.parse_restore(sql_text))
    if kind == "VACUUM":  # Delta's VACUUM over expire_snapshots and remove_orphan_files: lakerules.procedures.vacuum
        from lakerules.procedures import vacuum

        stmt = dialect.parse_vacuum(sql_text)
        return _marked(ctx, stmt.this, vacuum.command(stmt.args.get("hours"), bool(stmt.args.get("dry_run"))))
    return None  # not ours: Spark's parser takes it


def _call(ctx, parts: list[str], args: list[tuple[str | None, str]]):
    """CALL <lake catalog>.system.<procedure>(...); None for another catalog's CALL."""
    from lakerules.procedures import maintenance

    spark = ctx.spark
    if len(parts) == 2:
        parts = [spark.catalog.currentCatalog(), *parts]
    if len(parts) != 3 or not _is_lake_catalog(spark, parts[0]):
        return None
    catalog, namespace, procedure = parts
    if namespace.lower() != "system" or procedure.lower() not in maintenance.PROCEDURES:
        raise LakeError(
            f"lakerules: procedure {'.'.join(parts)} not found; lakerules has "
            f"{', '.join(f'{catalog}.system.' + p for p in maintenance.PROCEDURES)}"
        )
    procedure = procedure.lower()
    values = maintenance.bind(spark, procedure, catalog, args)
    table_parts = J.name_parts(spark, values["table"])
    if len(table_parts) >= 3 and (table_parts[0].lower() == catalog.lower()
                                  or _is_catalog(spark, table_parts[0])):
        if table_parts[0].lower() != catalog.lower():
            raise LakeError(
                f"lakerules: CALL {catalog}.system.{procedure}: table {values['table']!r} is in catalog "
                f"{table_parts[0]!r}; call that catalog's procedure"
            )
        table_parts = table_parts[1:]
    if len(table_parts) < 2:
        raise LakeError(
            f"lakerules: CALL {catalog}.system.{procedure}: name the table as namespace.table, not {values['table']!r}"
        )
    if procedure == "register_table":  # the table does not exist yet: a command on the catalog
        return _catalog_command(ctx, catalog, table_parts, values)
    if procedure == "rewrite_data_files":  # on OPTIMIZE's engine
        from lakerules.procedures import rewrite_data_files

        return _marked(ctx, [catalog, *table_parts], rewrite_data_files.rewrite_data_files_command(values))
    if procedure == "rewrite_position_delete_files":
        from lakerules.procedures import rewrite_position_delete_files as delete_compaction

        return _marked(ctx, [catalog, *table_parts], delete_compaction.command(values))
    return _marked(ctx, [catalog, *table_parts], maintenance.command(procedure, values))


def _catalog_command(ctx, catalog: str, table_parts: list[str], values: dict):
    """CALL register_table: a command node that runs when Spark executes the statement."""
    from lakerules.plan import nodes as P
    from lakerules.procedures import imports as table_imports

    identifier = tuple(table_parts)

    def run(run_ctx):
        return table_imports.register_table(run_ctx, catalog, identifier, values)

    shown = ", ".join(f"{k} => {v!r}" for k, v in values.items() if v is not None)
    node = P.CatalogCommand(table=P.TableRef(catalog, identifier[:-1], identifier[-1]), run_fn=run,
                            description=f"CALL {catalog}.system.register_table({shown})",
                            result_schema=table_imports.REGISTER_RESULT)
    return ctx.lowerings[P.Command](ctx, node, None)


def _restore(ctx, stmt):
    """RESTORE: the timestamp, if any, evaluated now (a constant expression, read alone from the
    statement's text and cast to TIMESTAMP by Spark, as CALL arguments are); the snapshot it
    names is chosen when the statement runs."""
    from pyspark.sql import functions as F

    from lakerules.procedures import history

    version, ref_text, text = stmt.args.get("version"), stmt.args.get("ref_text"), stmt.args.get("timestamp_text")
    timestamp_us = ref = None
    if text is not None:
        timestamp_us = _constant(ctx, F.unix_micros(F.expr(text).cast("TIMESTAMP")), "the timestamp", text)
    if ref_text is not None:  # a string literal, read by Spark as it reads its own
        ref = _constant(ctx, F.expr(ref_text).cast("STRING"), "the version", ref_text)
    shown = f"TIMESTAMP AS OF {text}" if text is not None else f"VERSION AS OF {version if ref is None else repr(ref)}"
    return _marked(ctx, stmt.this, history.restore_command(version, ref, timestamp_us, shown))


def _constant(ctx, column, what: str, text: str):
    """The value of a constant expression of the statement, evaluated by Spark; an error if NULL."""
    from lakerules.procedures.maintenance import _first_line

    try:
        value = J.one_row(ctx.spark).select(column).collect()[0][0]
    except Exception as e:  # noqa: BLE001 - Spark's own error, named by the statement
        raise LakeError(f"lakerules: RESTORE: cannot evaluate {what} {text!r}: {_first_line(e)}") from None
    if value is None:
        raise LakeError(f"lakerules: RESTORE: {what} {text!r} is NULL")
    return value


def _is_catalog(spark, name: str) -> bool:
    return bool(J.catalog_manager(spark).isCatalogRegistered(name))


def _is_lake_catalog(spark, name: str) -> bool:
    bridge = J.bridge(spark)
    if bridge.catalogOptions(name) is not None:
        return True
    try:
        J.catalog_manager(spark).catalog(name)  # initializes it
    except Exception:  # noqa: BLE001 - not a catalog at all: Spark's error, from its own parse
        return False
    return bridge.catalogOptions(name) is not None


def _marked(ctx, table: str | list[str], run: Callable):
    """SELECT * FROM table AS __lakerules_command_N, built as objects; the command is planned
    when Spark resolved it (lakerules.plan.pending), and runs when Spark executes the statement. ``table``: the name as the statement spelled it (Spark's parser reads it, as it
    would its own statement's) or its parts."""
    if isinstance(table, str):
        table = J.name_parts(ctx.spark, table)
    return J.star_from(ctx.spark, table, pending.put(run))


def _explain(ctx, inner: str, mode: str | None):
    """EXPLAIN: Spark's explanation plus the lake scans; for a statement that would run a lake
    command, the lakerules plan of the command (planning runs nothing: lakerules.execute.run).
    Statements that touch no lake table are left to Spark's own EXPLAIN.
    """
    state = ctx.spark._jsparkSession.sessionState()
    if dialect.statement_kind(inner) == "EXPLAIN":
        return None
    analyzed = state.analyzer().execute(state.sqlParser().parsePlan(inner))
    if J.class_name(analyzed) == "io.lakerules.LakeCommand":
        return J.result_rows(ctx.spark, [("== lakerules plan (not run) ==\n" + analyzed.description(),)], "plan string")
    if not J.bridge(ctx.spark).touchesLake(analyzed):
        return None
    return J.result_rows(ctx.spark, [(explain_mod.explain_text(ctx.spark, analyzed, mode),)], "plan string")


def _partition_field(ctx, table, op: str, old, new):
    """ADD/DROP/REPLACE PARTITION FIELD, the fields as the dialect parsed them (FieldSpec)."""
    schema = table.schema()
    with table.update_spec() as update:
        if op == "ADD":
            transform, column, alias = _field(old, schema)
            update.add_field(column, transform, alias)
        elif op == "DROP":
            update.remove_field(_existing_field(table, old))
        else:
            update.remove_field(_existing_field(table, old))
            transform, column, alias = _field(new, schema)
            update.add_field(column, transform, alias)
    return J.empty_result(ctx.spark)


def _field(spec, schema):
    """A FieldSpec -> (transform, source column, partition field name or None)."""
    transform, column = partitioning.field_spec(spec, schema, "partition")
    return transform, column, spec.args.get("alias")


def _shown(spec) -> str:
    if spec.args.get("transform") is None:
        return ".".join(spec.args["column"])
    args = ", ".join(a["lit"] if "lit" in a else ".".join(a["ref"]) for a in spec.args.get("args") or [])
    return f"{spec.args['transform']}({args})"


def _existing_field(table, spec) -> str:
    """The name of the current spec's field that spec names, by name or by transform."""
    current, schema = table.spec(), table.schema()
    if spec.args.get("transform") is None:
        for f in current.fields:
            if f.name.lower() == ".".join(spec.args["column"]).lower():
                return f.name
    try:
        transform, column, _ = _field(spec, schema)
    except LakeError:
        raise LakeError(f"lakerules: table {names.table_name(table)} has no partition field {_shown(spec)!r} in its current spec") from None
    source_id = schema.find_field(column).field_id
    for f in current.fields:
        if f.source_id == source_id and f.transform == transform:
            return f.name
    raise LakeError(f"lakerules: table {names.table_name(table)} has no partition field {_shown(spec)!r} in its current spec")
