"""Statements Spark's grammar does not have, routed by the shim's parser to Python.

Each statement has a pattern that selects it (the shim routes only texts that match one) and
a function that runs it and returns the JVM plan of its result.

Partition evolution, as Iceberg's Spark extensions spell it:
    ALTER TABLE t ADD PARTITION FIELD bucket(16, id) [AS name]
    ALTER TABLE t DROP PARTITION FIELD days(ts) | name
    ALTER TABLE t REPLACE PARTITION FIELD days(ts) | name WITH hours(ts) [AS name]
"""

from __future__ import annotations

import itertools
import re
import threading
from typing import Callable

from pyiceberg.transforms import IdentityTransform

from lakerules import explain as explain_mod, jvm as J, partitioning
from lakerules.errors import LakeError

_IDENT = r"(?:`[^`]*`|[^\s`])+"
_PARTITION_FIELD = re.compile(
    rf"\s*ALTER\s+TABLE\s+(?P<table>{_IDENT})\s+(?P<op>ADD|DROP|REPLACE)\s+PARTITION\s+FIELD\s+(?P<rest>.*?)\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_TRANSFORM = re.compile(r"\s*(?P<name>\w+)\s*\((?P<args>[^()]*)\)\s*(?P<rest>.*)$", re.DOTALL)

_EXPLAIN = re.compile(r"\s*EXPLAIN(?:\s+(?P<mode>EXTENDED|FORMATTED|CODEGEN|COST))?\s+(?P<inner>.*)$", re.IGNORECASE | re.DOTALL)
EXPLAIN_COLUMN = "__lakerules_explain__"

# What the shim routes to Python: the start of each statement above, and EXPLAIN (so that
# explaining a lake command never runs it).
ROUTES = rf"\s*(?:ALTER\s+TABLE\s+{_IDENT}\s+(?:ADD|DROP|REPLACE)\s+PARTITION\s+FIELD\b|EXPLAIN\b|OPTIMIZE\b)"
_OPTIMIZE = re.compile(r"\s*OPTIMIZE\b", re.IGNORECASE)


MARKER = "__lakerules_command_"
_pending: dict[int, Callable] = {}
_ids = itertools.count(1)
_lock = threading.Lock()


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
    return None  # not ours: Spark's parser takes it


def _marked(ctx, table_text: str, run: Callable):
    """SELECT * FROM table AS __lakerules_command_N; the command runs when Spark resolved it."""
    with _lock:
        n = next(_ids)
        _pending[n] = run
    parser = ctx.spark._jsparkSession.sessionState().sqlParser()
    return parser.parsePlan(f"SELECT * FROM {table_text} AS {MARKER}{n}")


def _explain(ctx, inner: str, mode: str | None):
    """EXPLAIN: Spark's explanation plus the lake scans; for a statement that would run a lake
    command, the lakerules plan of the command instead, which is planned and not run.

    The statement is analyzed with the shim's explain flag set, so the registry plans commands
    without running them. Statements that touch no lake table are left to Spark's own EXPLAIN.
    """
    jsession = ctx.spark._jsparkSession
    state = jsession.sessionState()
    if _EXPLAIN.match(inner) or _PARTITION_FIELD.match(inner):
        return None
    plan = state.sqlParser().parsePlan(inner)
    bridge = ctx.spark._jvm.io.lakerules.Bridge
    bridge.setExplaining(True)
    try:
        analyzed = state.analyzer().execute(plan)
    finally:
        bridge.setExplaining(False)
    names = [a.name() for a in J.from_seq(analyzed.output())]
    if names == [EXPLAIN_COLUMN]:
        text = J.dataframe(ctx.spark, analyzed).collect()[0][0]
        return J.result_rows(ctx.spark, [(text,)], "plan string")
    if not ctx.spark._jvm.io.lakerules.Bridge.touchesLake(analyzed):
        return None
    return J.result_rows(ctx.spark, [(explain_mod.explain_text(ctx.spark, analyzed, mode),)], "plan string")


def explained(ctx, tree) -> object:
    """The plan EXPLAIN shows for a lakerules plan that holds commands."""
    from lakerules.plan import explain

    text = "== lakerules plan (not run) ==\n" + explain(tree)
    return J.result_rows(ctx.spark, [(text,)], f"{EXPLAIN_COLUMN} string")


def take_command(alias: str) -> Callable | None:
    """The pending command of a marker alias (each runs once)."""
    with _lock:
        return _pending.pop(int(alias[len(MARKER):]), None)


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


def _unquote(name: str) -> str:
    return ".".join(p[1:-1] if p.startswith("`") and p.endswith("`") else p for p in name.split("."))
