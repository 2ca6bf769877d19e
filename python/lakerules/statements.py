"""Statements Spark's grammar does not have, routed by the shim's parser to Python.

Each statement has a pattern that selects it (the shim routes only texts that match one) and
a function that runs it and returns the JVM plan of its result.

Partition evolution, as Iceberg's Spark extensions spell it:
    ALTER TABLE t ADD PARTITION FIELD bucket(16, id) [AS name]
    ALTER TABLE t DROP PARTITION FIELD days(ts) | name
    ALTER TABLE t REPLACE PARTITION FIELD days(ts) | name WITH hours(ts) [AS name]

Iceberg's maintenance procedures on a lake catalog (lakerules.maintenance):
    CALL lake.system.remove_orphan_files(table => 'db.t', ...)
    CALL lake.system.expire_snapshots(table => 'db.t', ...)
    CALL lake.system.rewrite_manifests(table => 'db.t', ...)
"""

from __future__ import annotations

import re
from typing import Callable

from pyiceberg.transforms import IdentityTransform

from lakerules import explain as explain_mod, jvm as J, partitioning, pending
from lakerules.errors import LakeError

_IDENT = r"(?:`[^`]*`|[^\s`])+"
_PARTITION_FIELD = re.compile(
    rf"\s*ALTER\s+TABLE\s+(?P<table>{_IDENT})\s+(?P<op>ADD|DROP|REPLACE)\s+PARTITION\s+FIELD\s+(?P<rest>.*?)\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_TRANSFORM = re.compile(r"\s*(?P<name>\w+)\s*\((?P<args>[^()]*)\)\s*(?P<rest>.*)$", re.DOTALL)

_EXPLAIN = re.compile(r"\s*EXPLAIN(?:\s+(?P<mode>EXTENDED|FORMATTED|CODEGEN|COST))?\s+(?P<inner>.*)$", re.IGNORECASE | re.DOTALL)

# What the shim routes to Python: the start of each statement above, and EXPLAIN (so that
# explaining a lake command never runs it).
ROUTES = rf"\s*(?:ALTER\s+TABLE\s+{_IDENT}\s+(?:ADD|DROP|REPLACE)\s+PARTITION\s+FIELD\b|EXPLAIN\b|OPTIMIZE\b|CALL\b)"
_OPTIMIZE = re.compile(r"\s*OPTIMIZE\b", re.IGNORECASE)
# CALL catalog.system.procedure(args): lakerules.maintenance (other catalogs' CALLs stay Spark's)
_NAME_PART = r"(?:`(?:[^`]|``)*`|[A-Za-z_0-9]+)"
_CALL = re.compile(
    rf"\s*CALL\s+(?P<name>{_NAME_PART}(?:\s*\.\s*{_NAME_PART})*)\s*\((?P<args>.*)\)\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def parse(ctx, sql_text: str):
    """The plan for a routed statement: its target table under a command marker, or None."""
    m = _EXPLAIN.match(sql_text)
    if m:
        return _explain(ctx, m.group("inner"), m.group("mode"))
    m = _PARTITION_FIELD.match(sql_text)
    if m:
        op, rest = m.group("op").upper(), m.group("rest")
        return _marked(ctx, m.group("table"), lambda ctx, table: _partition_field(ctx, table, op, rest))
    if _OPTIMIZE.match(sql_text):  # OPTIMIZE ... [ZORDER BY ...]: lakerules.optimize
        from lakerules import optimize

        statement = optimize.parse(sql_text)
        return _marked(ctx, statement.table, optimize.command(statement))
    m = _CALL.match(sql_text)
    if m:
        return _call(ctx, m.group("name"), m.group("args"))
    return None  # not ours: Spark's parser takes it


def _call(ctx, name_text: str, args_text: str):
    """CALL <lake catalog>.system.<procedure>(...); None for another catalog's CALL."""
    from lakerules import maintenance

    spark = ctx.spark
    parser = spark._jsparkSession.sessionState().sqlParser()
    parts = [str(p) for p in J.from_seq(parser.parseMultipartIdentifier(name_text))]
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
    values = maintenance.bind(spark, procedure, catalog, args_text)
    table_parts = [str(p) for p in J.from_seq(parser.parseMultipartIdentifier(values["table"]))]
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
    return _marked(ctx, [catalog, *table_parts], maintenance.command(procedure, values))


def _is_catalog(spark, name: str) -> bool:
    return bool(spark._jsparkSession.sessionState().catalogManager().isCatalogRegistered(name))


def _is_lake_catalog(spark, name: str) -> bool:
    bridge = spark._jvm.io.lakerules.Bridge
    if bridge.catalogOptions(name) is not None:
        return True
    try:
        spark._jsparkSession.sessionState().catalogManager().catalog(name)  # initializes it
    except Exception:  # noqa: BLE001 - not a catalog at all: Spark's error, from its own parse
        return False
    return bridge.catalogOptions(name) is not None


def _marked(ctx, table: str | list[str], run: Callable):
    """SELECT * FROM table AS __lakerules_command_N, built as objects; the command is planned
    when Spark resolved it (lakerules.pending), and runs when Spark executes the statement. ``table``: the name as the statement spelled it (Spark's parser reads it, as it
    would its own statement's) or its parts."""
    if isinstance(table, str):
        parser = ctx.spark._jsparkSession.sessionState().sqlParser()
        table = [str(p) for p in J.from_seq(parser.parseMultipartIdentifier(table))]
    return J.star_from(ctx.spark, table, pending.put(run))


def _explain(ctx, inner: str, mode: str | None):
    """EXPLAIN: Spark's explanation plus the lake scans; for a statement that would run a lake
    command, the lakerules plan of the command (planning runs nothing: lakerules.execute).
    Statements that touch no lake table are left to Spark's own EXPLAIN.
    """
    state = ctx.spark._jsparkSession.sessionState()
    if _EXPLAIN.match(inner) or _PARTITION_FIELD.match(inner):
        return None
    analyzed = state.analyzer().execute(state.sqlParser().parsePlan(inner))
    if J.class_name(analyzed) == "io.lakerules.LakeCommand":
        return J.result_rows(ctx.spark, [("== lakerules plan (not run) ==\n" + analyzed.description(),)], "plan string")
    if not ctx.spark._jvm.io.lakerules.Bridge.touchesLake(analyzed):
        return None
    return J.result_rows(ctx.spark, [(explain_mod.explain_text(ctx.spark, analyzed, mode),)], "plan string")


def _partition_field(ctx, table, op: str, rest: str):
    schema = table.schema()
    with table.update_spec() as update:
        if op == "ADD":
            transform, column, alias = _parse_field(rest, schema)
            update.add_field(column, transform, alias)
        elif op == "DROP":
            update.remove_field(_existing_field(table, rest))
        else:
            old, _, new = _split_with(rest)
            update.remove_field(_existing_field(table, old))
            transform, column, alias = _parse_field(new, schema)
            update.add_field(column, transform, alias)
    return J.empty_result(ctx.spark)


def _split_with(rest: str) -> tuple[str, str, str]:
    parts = re.split(r"\s+WITH\s+", rest, maxsplit=1, flags=re.IGNORECASE)
    if len(parts) != 2:
        raise LakeError("lakerules: REPLACE PARTITION FIELD needs: REPLACE PARTITION FIELD <old> WITH <new>")
    return parts[0], "WITH", parts[1]


def _parse_field(text: str, schema):
    """'bucket(16, id) AS b' -> (transform, source column, partition field name or None)."""
    text = text.strip()
    m = _TRANSFORM.match(text)
    if m:
        args = [a.strip() for a in m.group("args").split(",") if a.strip()]
        spark_args = [{"lit": a} if re.fullmatch(r"-?\d+", a) else {"ref": _unquote(a).split(".")} for a in args]
        transform, column = partitioning.parse_transform(m.group("name"), spark_args)
        rest = m.group("rest").strip()
    else:
        first, _, rest = text.partition(" ")
        transform, column, rest = IdentityTransform(), _unquote(first), rest.strip()
    alias = None
    if rest:
        am = re.fullmatch(r"AS\s+(\S+)", rest, re.IGNORECASE)
        if not am:
            raise LakeError(f"lakerules: cannot parse partition field {text!r}: unexpected {rest!r}")
        alias = _unquote(am.group(1))
    try:
        source = schema.find_field(column, case_sensitive=False)
    except ValueError:
        raise LakeError(f"lakerules: partition column {column!r} is not a column of the table") from None
    partitioning.check_transform(transform, source, column)
    return transform, schema.find_column_name(source.field_id), alias


def _existing_field(table, text: str) -> str:
    """The name of the current spec's field that text names, by name or by transform."""
    text = text.strip()
    spec, schema = table.spec(), table.schema()
    for f in spec.fields:
        if f.name.lower() == _unquote(text).lower():
            return f.name
    try:
        transform, column, _ = _parse_field(text, schema)
    except LakeError:
        raise LakeError(f"lakerules: table {table.name()} has no partition field {text!r} in its current spec") from None
    source_id = schema.find_field(column).field_id
    for f in spec.fields:
        if f.source_id == source_id and f.transform == transform:
            return f.name
    raise LakeError(f"lakerules: table {table.name()} has no partition field {text!r} in its current spec")


_PART = re.compile(r"\s*(?:`((?:[^`]|``)*)`|([^.`\s]+))\s*(?:\.|$)")


def _unquote(name: str) -> str:
    """A possibly quoted (multipart) name as its parts joined by dots: `a``b`.c -> a`b.c."""
    parts, pos, name = [], 0, name.strip()
    while pos < len(name):
        m = _PART.match(name, pos)
        if not m or m.end() == pos:
            raise LakeError(f"lakerules: cannot parse the name {name!r}")
        parts.append(m.group(1).replace("``", "`") if m.group(1) is not None else m.group(2))
        pos = m.end()
    return ".".join(parts)
