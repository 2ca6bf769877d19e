"""The statements lakerules adds to Spark's, as data: one frozen dataclass per statement, its
arguments plain values (strings, numbers, tuples), parsed once by lakerules.sql.statements and
carried through Spark's analysis inside the plan (io.lakerules.LakeStatement holds the JSON of
:func:`to_json`). One dispatch table (lakerules.execute.statements) maps each type to what runs it.

    >>> s = Vacuum(table=("lake", "db", "t"), hours=200.0, dry_run=True)
    >>> from_json(to_json(s)) == s
    True
    >>> s.describe()
    'VACUUM RETAIN 200 HOURS DRY RUN: expire_snapshots + remove_orphan_files older than the retention'
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import ClassVar


def _tuple(value):
    """JSON lists back as tuples (nested), so that a statement read back equals the one written."""
    if isinstance(value, list):
        return tuple(_tuple(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuple(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class FieldSpec:
    """A partition or sort field as written: a column (``column``: its name parts) or a transform
    (``transform`` with ``args``, each ``{"lit": "16"}`` or ``{"ref": (name parts)}``); ``alias``."""

    transform: str | None = None
    args: tuple = ()
    column: tuple[str, ...] | None = None
    alias: str | None = None

    def shown(self) -> str:
        if self.transform is None:
            return ".".join(self.column or ())
        inner = ", ".join(a["lit"] if "lit" in a else ".".join(a["ref"]) for a in self.args)
        return f"{self.transform}({inner})"


@dataclass(frozen=True)
class SortField:
    field: FieldSpec
    desc: bool = False
    nulls_first: bool | None = None  # None: the direction's default


@dataclass(frozen=True)
class Statement:
    """A routed statement. ``table``: the target table's name parts as written (Spark resolves
    them), or None for a statement on a catalog (CALL, whose table is an argument)."""

    table: tuple[str, ...] | None

    # Whether it writes data files (OPTIMIZE: on a branch when named at one, as a write).
    writes_data: ClassVar[bool] = False

    def describe(self) -> str:
        return type(self).__name__

    def _name(self) -> str:
        return ".".join(self.table or ())


@dataclass(frozen=True)
class Optimize(Statement):
    """OPTIMIZE t [WHERE <partition predicate>] [ZORDER BY | HILBERT BY (columns)]."""

    where: str | None = None  # the predicate as written
    zorder: tuple[tuple[str, ...], ...] = ()  # column paths
    curve: str = "zorder"  # "hilbert" for HILBERT BY
    text: str = ""  # the statement, normalized

    writes_data: ClassVar[bool] = True

    def describe(self) -> str:
        return self.text


@dataclass(frozen=True)
class Call(Statement):
    """CALL <catalog>.system.<procedure>(args): ``args`` (name or None, the argument as written)
    pairs, evaluated by Spark when the statement runs."""

    catalog: str = ""
    procedure: str = ""
    args: tuple[tuple[str | None, str], ...] = ()

    def describe(self) -> str:
        shown = ", ".join(f"{n} => {t}" if n else t for n, t in self.args)
        return f"CALL system.{self.procedure}({shown})"


@dataclass(frozen=True)
class PartitionFieldChange(Statement):
    """ALTER TABLE t ADD|DROP|REPLACE PARTITION FIELD <field> [WITH <new>] [AS name]."""

    op: str = "ADD"
    field: FieldSpec = FieldSpec()
    new: FieldSpec | None = None

    def describe(self) -> str:
        tail = f" WITH {self.new.shown()}" if self.new is not None else ""
        return f"ALTER TABLE {self.op} PARTITION FIELD {self.field.shown()}{tail}"


@dataclass(frozen=True)
class RefChange(Statement):
    """ALTER TABLE t CREATE [OR REPLACE] | REPLACE | DROP BRANCH|TAG ... (Iceberg's DDL)."""

    op: str = "CREATE"
    kind: str = "BRANCH"
    name: str = ""
    if_exists: bool | None = None
    version: int | None = None
    retain_ms: int | None = None
    min_snapshots: int | None = None
    max_snapshot_age_ms: int | None = None

    def describe(self) -> str:
        return f"ALTER TABLE {self.op} {self.kind} {self.name}"


@dataclass(frozen=True)
class WriteOrderChange(Statement):
    """ALTER TABLE t WRITE [DISTRIBUTED BY PARTITION] [[LOCALLY] ORDERED BY fields | UNORDERED]."""

    distributed: bool = False
    locally: bool = False
    unordered: bool = False
    fields: tuple[SortField, ...] | None = None  # None: no ORDERED BY

    def describe(self) -> str:
        return "ALTER TABLE WRITE " + " ".join(
            w for w, on in (("DISTRIBUTED BY PARTITION", self.distributed), ("LOCALLY", self.locally),
                            ("ORDERED BY ...", self.fields is not None), ("UNORDERED", self.unordered)) if on)


@dataclass(frozen=True)
class IdentifierFieldsChange(Statement):
    """ALTER TABLE t SET|DROP IDENTIFIER FIELDS a, b.c."""

    op: str = "SET"
    fields: tuple[tuple[str, ...], ...] = ()

    def describe(self) -> str:
        return f"ALTER TABLE {self.op} IDENTIFIER FIELDS {', '.join('.'.join(f) for f in self.fields)}"


@dataclass(frozen=True)
class DescribeHistory(Statement):
    """DESCRIBE HISTORY t [LIMIT n] (Delta's)."""

    limit: int | None = None

    def describe(self) -> str:
        return "DESCRIBE HISTORY" + (f" LIMIT {self.limit}" if self.limit is not None else "")


@dataclass(frozen=True)
class Restore(Statement):
    """RESTORE [TABLE] t [TO] VERSION AS OF <id | 'ref'> | TIMESTAMP AS OF <expression> (Delta's):
    the ref and the timestamp as written, evaluated by Spark when the statement runs."""

    version: int | None = None
    ref_text: str | None = None
    timestamp_text: str | None = None

    def describe(self) -> str:
        if self.timestamp_text is not None:
            return f"RESTORE TABLE TO TIMESTAMP AS OF {self.timestamp_text}"
        return f"RESTORE TABLE TO VERSION AS OF {self.version if self.ref_text is None else self.ref_text}"


@dataclass(frozen=True)
class Vacuum(Statement):
    """VACUUM t [RETAIN n HOURS] [DRY RUN] (Delta's)."""

    hours: float | None = None
    dry_run: bool = False

    def describe(self) -> str:
        return (f"VACUUM{'' if self.hours is None else f' RETAIN {self.hours:g} HOURS'}{' DRY RUN' if self.dry_run else ''}"
                ": expire_snapshots + remove_orphan_files older than the retention")


TYPES: dict[str, type[Statement]] = {t.__name__: t for t in (
    Optimize, Call, PartitionFieldChange, RefChange, WriteOrderChange, IdentifierFieldsChange, DescribeHistory,
    Restore, Vacuum)}


def to_json(statement: Statement) -> str:
    return json.dumps({"type": type(statement).__name__, "args": asdict(statement)})


def from_json(text: str) -> Statement:
    doc = json.loads(text)
    cls = TYPES[doc["type"]]
    args = {k: _tuple(v) for k, v in doc["args"].items()}
    return _build(cls, args)


def _build(cls, args: dict):
    out = {}
    for f in fields(cls):
        value = args.get(f.name)
        if f.name in ("field", "new") and isinstance(value, dict):
            value = FieldSpec(**value)
        elif f.name == "fields" and cls is WriteOrderChange and value is not None:
            value = tuple(SortField(field=FieldSpec(**s["field"]), desc=s["desc"], nulls_first=s["nulls_first"])
                          for s in value)
        out[f.name] = value
    return cls(**out)
