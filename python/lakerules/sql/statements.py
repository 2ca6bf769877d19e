"""Statements Spark's grammar does not have, routed by the shim's parser to Python, parsed once
into data (lakerules.plan.statements).

The shim routes texts that may be one of them (ROUTES, comments allowed before); the one sqlglot
dialect (lakerules.sql.dialect) tells them apart and parses each, and a syntax error is Spark's
ParseException with its position. :func:`parse` returns the statement as a frozen dataclass of
plain values, which the backend hands to Spark inside the plan (io.lakerules.LakeStatement) so
that Spark resolves its table as for its own statements; the registry then plans it, and the
executor (lakerules.execute.statements) runs it when Spark executes the statement. Parsing runs
no Spark job, reads no table and writes nothing: CALL arguments and RESTORE's timestamp are
evaluated when the statement runs.

Partition evolution, as Iceberg's Spark extensions spell it:
    ALTER TABLE t ADD PARTITION FIELD bucket(16, id) [AS name]
    ALTER TABLE t DROP PARTITION FIELD days(ts) | name
    ALTER TABLE t REPLACE PARTITION FIELD days(ts) | name WITH hours(ts) [AS name]

Iceberg's branches and tags:
    ALTER TABLE t CREATE [OR REPLACE] | REPLACE BRANCH|TAG [IF NOT EXISTS] name [AS OF VERSION n]
        [RETAIN n DAYS|HOURS|MINUTES] [WITH SNAPSHOT RETENTION [n SNAPSHOTS] [n DAYS|HOURS|MINUTES]]
    ALTER TABLE t DROP BRANCH|TAG [IF EXISTS] name

Iceberg's write order:
    ALTER TABLE t WRITE [DISTRIBUTED BY PARTITION] [LOCALLY] ORDERED BY <fields> | UNORDERED
    ALTER TABLE t SET | DROP IDENTIFIER FIELDS a, b

Iceberg's procedures on a lake catalog (lakerules.procedures):
    CALL lake.system.<procedure>(table => 'db.t', ...)

Delta's:
    OPTIMIZE lake.db.t [WHERE ...] [ZORDER BY (...) | HILBERT BY (...)]
    DESCRIBE HISTORY lake.db.t [LIMIT n]
    RESTORE [TABLE] lake.db.t [TO] VERSION AS OF <snapshot id | 'ref'> | TIMESTAMP AS OF <expression>
    VACUUM lake.db.t [RETAIN n HOURS] [DRY RUN]

and EXPLAIN of any of them or of a statement over lake tables (:class:`Explain`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakerules.errors import LakeError
from lakerules.plan import statements as S
from lakerules.spark import jvm as J
from lakerules.sql import dialect
from lakerules.sql.routes import ROUTES  # noqa: F401  (re-exported: lakerules.attach registers it)

_EXPLAIN_MODE = re.compile(r"(EXTENDED|FORMATTED|CODEGEN|COST)\b\s*(.*)$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Explain:
    """EXPLAIN [mode] <statement>: ``statement`` the text after it."""

    statement: str
    mode: str | None = None


def parse(spark, sql_text: str) -> S.Statement | Explain | None:
    """The routed statement ``sql_text`` as data, an Explain, or None when it is Spark's (or a
    CALL of another catalog). A statement nested too deep is refused as Spark refuses its own
    (lakerules.sql.nesting)."""
    if dialect.statement_kind(sql_text) == "EXPLAIN":
        inner, mode = dialect.after_first_word(sql_text), None
        m = _EXPLAIN_MODE.match(inner)
        if m:
            mode, inner = m.group(1), m.group(2)
        return None if dialect.statement_kind(inner) == "EXPLAIN" else Explain(inner, mode)
    tree = dialect.parse_statement(sql_text)  # nested too deep: refused as Spark refuses its own
    if tree is None:
        return None
    return _BUILDERS[type(tree)](spark, tree)


# ---- each statement's data, from its parse tree ----------------------------------------------------


def _parts(spark, table) -> tuple[str, ...]:
    """A table's name parts as Spark's parser reads them (as for its own statements)."""
    return tuple(J.name_parts(spark, table) if isinstance(table, str) else table)


def _field(spec) -> S.FieldSpec | None:
    if spec is None:
        return None
    a = spec.args
    args = tuple({"lit": x["lit"]} if "lit" in x else {"ref": tuple(x["ref"])} for x in a.get("args") or ())
    return S.FieldSpec(transform=a.get("transform"), args=args,
                       column=tuple(a["column"]) if a.get("column") else None, alias=a.get("alias"))


def _optimize(spark, tree) -> S.Optimize:
    return S.Optimize(
        table=_parts(spark, tree.this.sql(dialect=dialect.LakeSpark)),
        where=tree.args.get("where_text"),
        zorder=tuple(tuple(p.name for p in c.parts) for c in tree.args.get("zorder") or ()),
        curve=tree.args.get("curve") or "zorder",
        text=tree.sql(dialect=dialect.LakeSpark),
    )


def _call(spark, tree) -> S.Call | None:
    """CALL <lake catalog>.system.<procedure>(...); None for another catalog's CALL."""
    parts = list(tree.this)
    if len(parts) == 2:
        parts = [spark.catalog.currentCatalog(), *parts]
    if len(parts) != 3 or not _is_lake_catalog(spark, parts[0]):
        return None
    catalog, namespace, procedure = parts
    if namespace.lower() != "system":
        raise LakeError(f"lakerules: procedure {'.'.join(parts)} not found; lakerules' procedures are "
                        f"{catalog}.system.<name>")
    return S.Call(table=None, catalog=catalog, procedure=procedure.lower(),
                  args=tuple((n, t) for n, t in tree.args.get("args") or ()))


def _partition_field(spark, tree) -> S.PartitionFieldChange:
    return S.PartitionFieldChange(table=_parts(spark, tree.this), op=tree.args["op"], field=_field(tree.args["field"]),
                                  new=_field(tree.args.get("new")))


def _ref(spark, tree) -> S.RefChange:
    a = tree.args
    return S.RefChange(table=_parts(spark, tree.this), op=a["op"], kind=a["kind"], name=a["name"],
                       if_exists=a.get("if_exists"), version=a.get("version"), retain_ms=a.get("retain_ms"),
                       min_snapshots=a.get("min_snapshots"), max_snapshot_age_ms=a.get("max_snapshot_age_ms"))


def write_order_of(tree, table: tuple = ()) -> S.WriteOrderChange:
    """An ALTER TABLE ... WRITE parse tree as data (also how rewrite_data_files reads a sort order)."""
    a = tree.args
    fields = None
    if a.get("fields") is not None:
        fields = tuple(S.SortField(field=_field(f.args["field"]), desc=bool(f.args.get("desc")),
                                   nulls_first=f.args.get("nulls_first")) for f in a["fields"])
    return S.WriteOrderChange(table=table, distributed=bool(a.get("distributed")),
                              locally=bool(a.get("locally")), unordered=bool(a.get("unordered")), fields=fields)


def _identifier_fields(spark, tree) -> S.IdentifierFieldsChange:
    return S.IdentifierFieldsChange(table=_parts(spark, tree.this), op=tree.args["op"],
                                    fields=tuple(tuple(p) for p in tree.args["fields"]))


def _describe_history(spark, tree) -> S.DescribeHistory:
    return S.DescribeHistory(table=_parts(spark, tree.this), limit=tree.args.get("limit"))


def _restore(spark, tree) -> S.Restore:
    a = tree.args
    return S.Restore(table=_parts(spark, tree.this), version=a.get("version"), ref_text=a.get("ref_text"),
                     timestamp_text=a.get("timestamp_text"))


def _vacuum(spark, tree) -> S.Vacuum:
    return S.Vacuum(table=_parts(spark, tree.this), hours=tree.args.get("hours"),
                    dry_run=bool(tree.args.get("dry_run")))


_BUILDERS = {
    dialect.Optimize: _optimize,
    dialect.Call: _call,
    dialect.PartitionField: _partition_field,
    dialect.RefStatement: _ref,
    dialect.WriteOrder: lambda spark, tree: write_order_of(tree, _parts(spark, tree.this)),
    dialect.IdentifierFields: _identifier_fields,
    dialect.DescribeHistory: _describe_history,
    dialect.Restore: _restore,
    dialect.Vacuum: _vacuum,
}


def _is_lake_catalog(spark, name: str) -> bool:
    if J.catalog_options(spark, name) is not None:
        return True
    try:
        J.catalog_manager(spark).catalog(name)  # initializes it
    except Exception:  # noqa: BLE001 - not a catalog at all: Spark's error, from its own parse
        return False
    return J.catalog_options(spark, name) is not None
