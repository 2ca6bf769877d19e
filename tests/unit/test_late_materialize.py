"""late_materialize alone (lakerules.scan.latemat): a Filter over a planned lake scan (directly,
or through a column-pruning Project) makes it a LateScan that says whether it is read in two
phases and why, from what is known before reading (the setting, the filter, the columns read,
their sizes in the manifests, the number of files); a Project or Aggregate right above narrows
the columns it reads. Off, or on anything else, the plan is left as it is. A bad setting is
refused by name. (Phase one and auto's first pass run when the scan is lowered, not here.)"""

from __future__ import annotations

import hashlib
import re

import pyarrow as pa
import pytest

from lakerules.errors import LakeError
from lakerules.plan.nodes import Filter, LakeScan, transform_up
from lakerules.rules.push_filters import push_filters
from lakerules.rules.resolve_scans import resolve_scans
from lakerules.scan.latemat import MIN_BYTES_KEY, SETTING, LateScan, late_materialize
from unit.rulekit import Ctx, NoCatalogs, expr, planned, relation, shown, spark_node

# ---- hand-built plans, no JVM ----------------------------------------------------------------------


def _scan():
    rel = relation()
    return LakeScan(table=rel.table, snapshot_id=None, output=rel.output, iceberg=None, schema=None, plan=None)


def _late():
    s = _scan()
    return LateScan(**{f: getattr(s, f) for f in LakeScan.__dataclass_fields__}, predicate_columns=("id",),
                    needed_columns=("id",), reason="decided")


def _filter(child):
    return Filter(jvm=expr("id = 1"), kids=(child,), conjuncts=(expr("id = 1"),))


LEFT_ALONE = {
    "a filter over a relation not planned": lambda: _filter(relation()),
    "a filter over a join": lambda: _filter(spark_node("Join", _scan(), _scan())),
    "a filter over a scan already decided": lambda: _filter(_late()),
    "a projection over a decided scan's filter, its columns already narrowed": lambda: spark_node(
        "Project", _filter(_late()), text="[id]"),
    "a scan without a filter": _scan,
}


@pytest.mark.parametrize("make", LEFT_ALONE.values(), ids=LEFT_ALONE.keys())
def test_left_alone(make):
    plan = make()
    ctx = Ctx(catalogs=NoCatalogs(), settings={SETTING: "on"})
    assert late_materialize(plan, ctx) is plan
    assert transform_up(plan, lambda n: late_materialize(n, ctx)) is plan


def test_off_leaves_a_filtered_scan_alone():
    plan = _filter(_scan())
    assert late_materialize(plan, Ctx(settings={SETTING: "off"})) is plan
    assert late_materialize(plan, Ctx(settings={SETTING: " OFF "})) is plan


@pytest.mark.parametrize("settings, message", [
    ({SETTING: "sometimes"}, f"lakerules: {SETTING} must be one of auto, on, off, not 'sometimes'"),
    ({MIN_BYTES_KEY: "-1"}, f"lakerules: {MIN_BYTES_KEY} must be a number of bytes >= 0, not '-1'"),
    ({SETTING: "on", MIN_BYTES_KEY: "64 MiB"}, f"lakerules: {MIN_BYTES_KEY} must be a number of bytes >= 0, not '64 MiB'"),
], ids=["mode", "negative minBytes", "minBytes with a unit"])
def test_bad_settings_are_refused_by_name(settings, message):
    with pytest.raises(LakeError) as info:
        late_materialize(_filter(_scan()), Ctx(settings=settings))
    assert str(info.value) == message


# ---- queries Spark optimized, their scans planned -------------------------------------------------

# {w}: 5 files of 20 rows: id, k (0..2), a (a wide unique string), b; {one}: the same in one file.
_N = 20
DATA = pa.table({
    "id": pa.array(range(_N), pa.int64()),
    "k": pa.array([i % 3 for i in range(_N)], pa.int32()),
    "a": [hashlib.sha512(str(i).encode()).hexdigest() * 2 for i in range(_N)],
    "b": [float(i) for i in range(_N)],
})

# (query, settings, the scan's decision: split, filter columns, columns read, reason with sizes as <size>)
FIXTURES = [
    ("SELECT * FROM {w} WHERE k = 0", {SETTING: "on"},
     (True, ("k",), ("id", "k", "a", "b"), "filter columns k: 1 of 4 columns read, <share> of <size>")),
    # the projection above the filter: only what it reads, and the filter's columns
    ("SELECT a FROM {w} WHERE k = 0 AND id > 3", {SETTING: "on"},
     (True, ("id", "k"), ("id", "k", "a"), "filter columns id, k: 2 of 3 columns read, <share> of <size>")),
    ("SELECT count(*), max(a) FROM {w} WHERE k = 0", {SETTING: "on"},
     (True, ("k",), ("k", "a"), "filter columns k: 1 of 2 columns read, <share> of <size>")),
    ("SELECT k FROM {w} WHERE k = 0", {SETTING: "on"},
     (False, ("k",), ("k",), "every column read is a filter column: nothing to read late")),
    ("SELECT * FROM {w} WHERE rand(1) < 0.5", {SETTING: "on"},
     (False, (), ("id", "k", "a", "b"), "the filter is not deterministic, has a subquery or is correlated")),
    # auto (the default): a table this small is not worth the extra jobs ...
    ("SELECT * FROM {w} WHERE k = 0", {},
     (False, ("k",), ("id", "k", "a", "b"), "filter columns k: 1 of 4 columns read, <share> of <size>; <size> to "
      f"read late, auto needs at least <size> ({MIN_BYTES_KEY})")),
    # ... unless told any size is; then the first pass decides, when the scan is lowered
    ("SELECT * FROM {w} WHERE k = 0", {MIN_BYTES_KEY: "0"},
     (True, ("k",), ("id", "k", "a", "b"), "filter columns k: 1 of 4 columns read, <share> of <size>")),
    ("SELECT k FROM {w} WHERE a LIKE '%ab%'", {MIN_BYTES_KEY: "0"},
     (False, ("a",), ("k", "a"), "filter columns a: 1 of 2 columns read, <share> of <size>; auto needs at most 25%")),
    # one file is judged as many are: by the first pass, when the scan is lowered
    ("SELECT * FROM {one} WHERE k = 0", {MIN_BYTES_KEY: "0"},
     (True, ("k",), ("id", "k", "a", "b"), "filter columns k: 1 of 4 columns read, <share> of <size>")),
    # dense by the manifests' bounds (two files, k 0..999 and id 0..19,999 in each): read plainly, no first pass
    ("SELECT * FROM {big} WHERE k < 500 AND id <> 3", {MIN_BYTES_KEY: "0"},
     (False, ("id", "k"), ("id", "k", "a", "b"), "filter columns id, k: 2 of 4 columns read, <share> of <size>; the "
      "manifests' bounds estimate 19,999 of 40,000 rows (<share>) match, auto reads plainly from 5,000 rows and "
      "<share> (no first pass)")),
    # 20 rows estimated; an equality on a floating column has no estimate: the first pass decides
    ("SELECT * FROM {big} WHERE k = 7", {MIN_BYTES_KEY: "0"},
     (True, ("k",), ("id", "k", "a", "b"), "filter columns k: 1 of 4 columns read, <share> of <size>")),
    ("SELECT * FROM {big} WHERE k < 500 AND b = 3.0", {MIN_BYTES_KEY: "0"},
     (True, ("k", "b"), ("id", "k", "a", "b"), "filter columns k, b: 2 of 4 columns read, <share> of <size>")),
]

_BIG = 20_000
BIG = pa.table({
    "id": pa.array(range(_BIG), pa.int64()),
    "k": pa.array([i % 1000 for i in range(_BIG)], pa.int32()),
    "a": [hashlib.sha512(str(i).encode()).hexdigest() for i in range(_BIG)],
    "b": [float(i) for i in range(_BIG)],
})


@pytest.fixture(scope="module")
def tables(lake):
    lake.table("w", DATA, appends=5)
    lake.table("one", DATA)
    lake.table("big", BIG, appends=2)
    return {"w": lake.name("w"), "one": lake.name("one"), "big": lake.name("big")}


def _scanned(spark, lake, sql):
    ctx = lake.ctx()
    plan = transform_up(planned(spark, sql), lambda n: push_filters(n, ctx))
    return transform_up(plan, lambda n: resolve_scans(n, ctx))


def _normal(reason: str) -> str:
    reason = re.sub(r"\d+\.\d%", "<share>", reason)
    return re.sub(r"\d+(\.\d)? (B|KiB|MiB|GiB)\b", "<size>", reason)


@pytest.mark.parametrize("sql, settings, decision", FIXTURES, ids=[f"{f[0]} {f[1]}" for f in FIXTURES])
def test_fixture(spark, lake, tables, sql, settings, decision):
    plan = _scanned(spark, lake, sql.format(**tables))
    (scan,) = [n for n in _nodes(plan) if isinstance(n, LakeScan)]
    ctx = lake.ctx(**settings)
    out = transform_up(plan, lambda n: late_materialize(n, ctx))
    (late,) = [n for n in _nodes(out) if isinstance(n, LakeScan)]
    assert type(late) is LateScan
    assert (late.split, late.predicate_columns, late.needed_columns, _normal(late.reason)) == decision
    # the scan it was, with the filter's conjuncts and the mode
    assert (late.table, late.snapshot_id, late.output, late.plan) == (scan.table, scan.snapshot_id, scan.output, scan.plan)
    (filt,) = [n for n in _nodes(out) if isinstance(n, Filter)]
    assert late.conjuncts == filt.conjuncts and late.mode == (settings.get(SETTING) or "auto")
    # only the scan changed: every node above it is Spark's own, and a second pass changes nothing
    assert shown(out).replace(late.describe(), scan.describe()) == shown(plan)
    assert transform_up(out, lambda n: late_materialize(n, ctx)) is out


def test_off_on_a_plan_spark_optimized(spark, lake, tables):
    plan = _scanned(spark, lake, f"SELECT a FROM {tables['w']} WHERE k = 0")
    assert transform_up(plan, lambda n: late_materialize(n, lake.ctx(**{SETTING: "off"}))) is plan


def _nodes(node):
    yield node
    for k in node.children():
        yield from _nodes(k)
