"""rewrite_update alone (lakerules.rules.rewrite_update): UPDATE on a lake table becomes a planned
split write (merge-on-read) or a rewrite of the files it touches (copy-on-write, or no WHERE),
its assignments aligned as Spark's own UPDATE aligns them (one per column, nested fields folded
into their struct, struct values matched by name, store-assignment casts); refused: a
non-deterministic condition or value, Spark's own assignment errors, bad table properties.
Every other node, a planned UPDATE included, is left as it is."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException

from lakerules.errors import LakeError
from lakerules.plan.nodes import (
    DeleteFromLake, MergeIntoLake, UpdateLake, WriteDeletes, WriteUpdate, transform_up,
)
from lakerules.rules.rewrite_update import rewrite_update
from unit.rulekit import Ctx, NoCatalogs, expr, planned, relation, rows, shown, spark_node, table_ref

T = "lake.db.t"

LEFT_ALONE = {
    "a planned UPDATE": lambda: WriteUpdate(table=table_ref(T), relation=relation(), condition=expr("id = 1")),
    "a DELETE": lambda: DeleteFromLake(table=table_ref(T), relation=relation(), condition=expr("id = 1")),
    "a planned DELETE": lambda: WriteDeletes(table=table_ref(T), relation=relation()),
    "a MERGE": lambda: MergeIntoLake(table=table_ref(T), relation=relation(), source=None, condition=expr("a = b")),
    "a relation": lambda: relation(),
    "an opaque Spark subtree": lambda: spark_node("UpdateTable"),
}


@pytest.mark.parametrize("make", LEFT_ALONE.values(), ids=LEFT_ALONE.keys())
def test_left_alone(make):
    plan = make()
    ctx = Ctx(catalogs=NoCatalogs())  # no session either: nothing is resolved
    assert rewrite_update(plan, ctx) is plan
    assert transform_up(plan, lambda n: rewrite_update(n, ctx)) is plan


def test_a_condition_that_is_not_deterministic_is_refused_before_anything_else():
    plan = UpdateLake(table=table_ref(T), relation=relation(), condition=expr("(rand() < 0.5D)", deterministic=False))
    with pytest.raises(LakeError) as info:
        rewrite_update(plan, Ctx(catalogs=NoCatalogs()))
    assert str(info.value) == f"lakerules: UPDATE {T}: the condition (rand() < 0.5D) is not deterministic"


# ---- statements Spark resolved ---------------------------------------------------------------------

# (statement; the plan after rewrite_update). {p}: partitioned by kind, a (ids 1, 2) and b (ids 10,
# 11) appended twice, 4 files; {s}: id, st struct<a int, b string>; {cow}: write.update.mode=copy-on-write.
FIXTURES = [
    ("UPDATE {p} SET kind = 'z' WHERE id = 1", """
WriteUpdate {p} merge-on-read: INSERT INTO {p}.UPDATE (file_path, pos, <new columns>) SELECT <file>, <position>, <row with SET id = id, kind = 'z' AS kind> FROM {p} WHERE ({p}.id = CAST(1 AS BIGINT)); delete part clustered by data file partition, new rows by their new partition
  snapshot P: 2 of 4 data files may hold matching rows (pruned by EqualTo(term=Reference(name='id'), literal=LongLiteral(1)))
  read to find matching rows: 2 files, 0 of them with delete files
  delete files (write.delete.granularity=file): at most one per data file read, 2 files in 1 partitions"""),
    # the value cast to the column's type
    ("UPDATE {p} SET id = 1 WHERE kind = 'a'", """
WriteUpdate {p} merge-on-read: INSERT INTO {p}.UPDATE (file_path, pos, <new columns>) SELECT <file>, <position>, <row with SET id = CAST(1 AS BIGINT) AS id, kind = kind> FROM {p} WHERE ({p}.kind = 'a'); delete part clustered by data file partition, new rows by their new partition
  snapshot P: 2 of 4 data files may hold matching rows (pruned by EqualTo(term=Reference(name='kind'), literal=literal('a')))
  read to find matching rows: 2 files, 0 of them with delete files
  delete files (write.delete.granularity=file): at most one per data file read, 2 files in 1 partitions"""),
    # no WHERE: every row changes, the files are rewritten (no delete files)
    ("UPDATE {p} SET id = id + 1", """
WriteUpdate {p} copy-on-write: rewrite the files holding rows WHERE true, with SET id = ({p}.id + CAST(1 AS BIGINT)) AS id, kind = kind applied to them
  snapshot P: 4 of 4 data files may hold matching rows (pruned by AlwaysTrue())
  read to find matching rows: 4 files, 0 of them with delete files"""),
    ("UPDATE {cow} SET kind = 'z' WHERE id = 1", """
WriteUpdate {cow} copy-on-write: rewrite the files holding rows WHERE ({cow}.id = CAST(1 AS BIGINT)), with SET id = id, kind = 'z' AS kind applied to them
  snapshot C: 1 of 1 data files may hold matching rows (pruned by EqualTo(term=Reference(name='id'), literal=LongLiteral(1)))
  read to find matching rows: 1 files, 0 of them with delete files"""),
    # a nested field folded into its struct
    ("UPDATE {s} SET st.a = 5 WHERE id = 1", """
WriteUpdate {s} merge-on-read: INSERT INTO {s}.UPDATE (file_path, pos, <new columns>) SELECT <file>, <position>, <row with SET id = id, st = named_struct('a', 5 AS a, 'b', st.`b`)> FROM {s} WHERE ({s}.id = CAST(1 AS BIGINT)); delete part clustered by data file partition, new rows by their new partition
  snapshot S: 1 of 1 data files may hold matching rows (pruned by EqualTo(term=Reference(name='id'), literal=LongLiteral(1)))
  read to find matching rows: 1 files, 0 of them with delete files
  delete files (write.delete.granularity=file): at most one per data file read, 1 files in 1 partitions"""),
    # a struct value matched to the column's fields by name, not by position
    ("UPDATE {s} SET st = named_struct('b', 'y', 'a', 2)", """
WriteUpdate {s} copy-on-write: rewrite the files holding rows WHERE true, with SET id = id, st = named_struct('a', named_struct('b', 'y', 'a', 2).`a` AS a, 'b', named_struct('b', 'y', 'a', 2).`b` AS b) AS st applied to them
  snapshot S: 1 of 1 data files may hold matching rows (pruned by AlwaysTrue())
  read to find matching rows: 1 files, 0 of them with delete files"""),
]


@pytest.fixture(scope="module")
def tables(lake):
    data = rows([1, 2, 10, 11], ["a", "a", "b", "b"])
    p = lake.table("p", data, partition_by="kind", appends=2)
    cow = lake.table("cow", rows([1], ["a"]), properties={"write.update.mode": "copy-on-write"})
    struct = pa.struct([("a", pa.int32()), ("b", pa.string())])
    s = lake.table("s", pa.table({"id": pa.array([1], pa.int64()), "st": pa.array([{"a": 1, "b": "x"}], struct)}))
    lake.table("bad", rows([1], ["a"]), properties={"write.update.mode": "bogus"})
    return {"p": lake.name("p"), "cow": lake.name("cow"), "s": lake.name("s"), "bad": lake.name("bad"),
            "P": p.current_snapshot().snapshot_id, "C": cow.current_snapshot().snapshot_id,
            "S": s.current_snapshot().snapshot_id}


def _snapshots(tables) -> dict:
    return {k: tables[k] for k in ("P", "C", "S")}


@pytest.mark.parametrize("sql, expected", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_fixture(spark, lake, tables, sql, expected):
    plan = planned(spark, sql.format(**tables), "analysis")
    assert type(plan) is UpdateLake
    out = transform_up(plan, lambda n: rewrite_update(n, lake.ctx()))
    assert type(out) is WriteUpdate and (out.relation, out.jvm) == (plan.relation, plan.jvm)
    assert shown(out, **_snapshots(tables)) == expected.strip().format(**tables)


REFUSED = [
    ("UPDATE {p} SET kind = 'z' WHERE rand(7) < 0.5D", LakeError,
     "lakerules: UPDATE {p}: the condition (rand(7) < 0.5D) is not deterministic"),
    ("UPDATE {p} SET kind = uuid() WHERE id = 1", LakeError,
     "lakerules: UPDATE {p}: the value uuid() for {p}.kind is not deterministic"),
    ("UPDATE {p} SET kind = 'x', kind = 'y'", AnalysisException,
     "[DATATYPE_MISMATCH.INVALID_ROW_LEVEL_OPERATION_ASSIGNMENTS] Cannot resolve \"kind = x\", \"kind = y\" due to "
     "data type mismatch: \n- Multiple assignments for 'kind': 'x', 'y' SQLSTATE: 42K09"),
    ("UPDATE {bad} SET kind = 'a'", LakeError,
     "lakerules: table property write.update.mode='bogus' is not one of ['merge-on-read', 'copy-on-write']"),
]


@pytest.mark.parametrize("sql, error, message", REFUSED, ids=[r[0] for r in REFUSED])
def test_fixture_refused(spark, lake, tables, sql, error, message):
    plan = planned(spark, sql.format(**tables), "analysis")
    with pytest.raises(error) as info:
        rewrite_update(plan, lake.ctx())
    assert str(info.value) == message.format(**tables)
