"""rewrite_merge alone (lakerules.rules.rewrite_merge): MERGE INTO a lake table becomes a planned
split write: the join its WHEN clauses need, each action's assignments aligned as Spark's own
MERGE aligns them (INSERT with a value or NULL for every column), the target files pruned by
the ON condition unless rows matching nothing must be seen; its conditions are checked as
Spark checks those of its own MERGE, and its own write.merge.* properties read. Every other
node, a planned MERGE included, is left as it is."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

from lakerules.errors import LakeError
from lakerules.plan.nodes import DeleteFromLake, MergeIntoLake, UpdateLake, WriteMerge, WriteUpdate, transform_up
from lakerules.rules.rewrite_merge import rewrite_merge
from unit.rulekit import Ctx, NoCatalogs, expr, planned, relation, rows, shown, spark_node, table_ref

T = "lake.db.t"

LEFT_ALONE = {
    "a planned MERGE": lambda: WriteMerge(table=table_ref(T), relation=relation(), source=None, condition=expr("a = b")),
    "an UPDATE": lambda: UpdateLake(table=table_ref(T), relation=relation(), condition=expr("id = 1")),
    "a planned UPDATE": lambda: WriteUpdate(table=table_ref(T), relation=relation()),
    "a DELETE": lambda: DeleteFromLake(table=table_ref(T), relation=relation()),
    "a relation": lambda: relation(),
    "an opaque Spark subtree": lambda: spark_node("MergeIntoTable"),
}


@pytest.mark.parametrize("make", LEFT_ALONE.values(), ids=LEFT_ALONE.keys())
def test_left_alone(make):
    plan = make()
    ctx = Ctx(catalogs=NoCatalogs())  # no session either: nothing is checked
    assert rewrite_merge(plan, ctx) is plan
    assert transform_up(plan, lambda n: rewrite_merge(n, ctx)) is plan


# ---- statements Spark resolved ---------------------------------------------------------------------

# what a MERGE without WHEN NOT MATCHED BY SOURCE decides when it runs (lakerules.rowlevel.merge)
RUNTIME = ("  at run time: target files narrowed by the source's keys (manifest bounds); a source under "
           "spark.sql.autoBroadcastJoinThreshold is broadcast and inner-joined with the key and condition "
           "columns, inserts by an anti-join with the matches\n")
SOURCE = """source:
SubqueryAlias s
+- Project [1 AS id#0L]
   +- OneRowRelation"""

# (statement; the plan after rewrite_merge). {p}: partitioned by kind, a (ids 1, 2) and b (ids 10,
# 11) appended twice, 4 files; {cow}: write.merge.mode=copy-on-write; {upd}: a bad write.update.mode
# (MERGE reads write.merge.* only).
FIXTURES = [
    ("MERGE INTO {p} t USING (SELECT 1L AS id, 'q' AS kind) s ON t.id = s.id "
     "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *", """
WriteMerge {p} merge-on-read: target rows with <file>, <position> RIGHTOUTER JOIN source ON (t.id = s.id)
  WHEN MATCHED THEN UPDATE id = s.id AS id, kind = s.kind AS kind
  WHEN NOT MATCHED THEN INSERT id = s.id AS id, kind = s.kind AS kind
  -> position deletes (updated and deleted rows) + new rows (updated and inserted), one snapshot
  target snapshot P: 4 of 4 data files may hold matching rows (pruned by AlwaysTrue())
  target read to find matching rows: 4 files, 0 of them with delete files
  target delete files (write.delete.granularity=file): at most one per data file read, 4 files in 2 partitions
""" + RUNTIME + """source:
SubqueryAlias s
+- Project [1 AS id#0L, q AS kind#1]
   +- OneRowRelation"""),
    # the target read is pruned by the ON condition's target side
    ("MERGE INTO {p} t USING (SELECT 1L AS id) s ON t.id = s.id AND t.kind = 'a' WHEN MATCHED THEN UPDATE SET kind = 'z'", """
WriteMerge {p} merge-on-read: target rows with <file>, <position> INNER JOIN source ON ((t.id = s.id) AND (t.kind = 'a'))
  WHEN MATCHED THEN UPDATE id = id, kind = 'z' AS kind
  -> position deletes (updated and deleted rows) + new rows (updated and inserted), one snapshot
  target snapshot P: 2 of 4 data files may hold matching rows (pruned by EqualTo(term=Reference(name='kind'), literal=literal('a')))
  target read to find matching rows: 2 files, 0 of them with delete files
  target delete files (write.delete.granularity=file): at most one per data file read, 2 files in 1 partitions
""" + RUNTIME + SOURCE),
    # rows matching nothing must be seen: no pruning, however selective ON is
    ("MERGE INTO {p} t USING (SELECT 1L AS id) s ON t.id = s.id AND t.kind = 'a' "
     "WHEN MATCHED AND t.kind = 'a' THEN DELETE WHEN NOT MATCHED BY SOURCE AND t.id > 10 THEN DELETE", """
WriteMerge {p} merge-on-read: target rows with <file>, <position> LEFTOUTER JOIN source ON ((t.id = s.id) AND (t.kind = 'a'))
  WHEN MATCHED AND (t.kind = 'a') THEN DELETE
  WHEN NOT MATCHED BY SOURCE AND (t.id > CAST(10 AS BIGINT)) THEN DELETE
  -> position deletes (updated and deleted rows) + new rows (updated and inserted), one snapshot
  target snapshot P: 4 of 4 data files may hold matching rows (pruned by AlwaysTrue())
  target read to find matching rows: 4 files, 0 of them with delete files
  target delete files (write.delete.granularity=file): at most one per data file read, 4 files in 2 partitions
""" + SOURCE),
    # INSERT gives every column a value: NULL for a nullable one not named
    ("MERGE INTO {p} t USING (SELECT 1L AS id) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id) VALUES (s.id)", """
WriteMerge {p} merge-on-read: target rows with <file>, <position> RIGHTOUTER JOIN source ON (t.id = s.id)
  WHEN NOT MATCHED THEN INSERT id = s.id AS id, kind = CAST(NULL AS STRING) AS kind
  -> position deletes (updated and deleted rows) + new rows (updated and inserted), one snapshot
  target snapshot P: 4 of 4 data files may hold matching rows (pruned by AlwaysTrue())
  target read to find matching rows: 4 files, 0 of them with delete files
  target delete files (write.delete.granularity=file): at most one per data file read, 4 files in 2 partitions
""" + RUNTIME + SOURCE),
    ("MERGE INTO {cow} t USING (SELECT 1L AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE", """
WriteMerge {cow} copy-on-write: target rows with <file>, <position> INNER JOIN source ON (t.id = s.id)
  WHEN MATCHED THEN DELETE
  -> the target files holding updated or deleted rows rewritten (their other rows kept) + new rows (updated and inserted), one snapshot, no delete files
  target snapshot C: 1 of 1 data files may hold matching rows (pruned by AlwaysTrue())
  target read to find matching rows: 1 files, 0 of them with delete files
""" + RUNTIME + SOURCE),
    ("MERGE INTO {upd} t USING (SELECT 1L AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE", """
WriteMerge {upd} merge-on-read: target rows with <file>, <position> INNER JOIN source ON (t.id = s.id)
  WHEN MATCHED THEN DELETE
  -> position deletes (updated and deleted rows) + new rows (updated and inserted), one snapshot
  target snapshot U: 1 of 1 data files may hold matching rows (pruned by AlwaysTrue())
  target read to find matching rows: 1 files, 0 of them with delete files
  target delete files (write.delete.granularity=file): at most one per data file read, 1 files in 1 partitions
""" + RUNTIME + SOURCE),
]


@pytest.fixture(scope="module")
def tables(lake):
    p = lake.table("p", rows([1, 2, 10, 11], ["a", "a", "b", "b"]), partition_by="kind", appends=2)
    cow = lake.table("cow", rows([1], ["a"]), properties={"write.merge.mode": "copy-on-write"})
    upd = lake.table("upd", rows([1], ["a"]), properties={"write.update.mode": "bogus"})
    lake.table("bad", rows([1], ["a"]), properties={"write.merge.mode": "bogus"})
    return {"p": lake.name("p"), "cow": lake.name("cow"), "upd": lake.name("upd"), "bad": lake.name("bad"),
            "P": p.current_snapshot().snapshot_id, "C": cow.current_snapshot().snapshot_id,
            "U": upd.current_snapshot().snapshot_id}


@pytest.mark.parametrize("sql, expected", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_fixture(spark, lake, tables, sql, expected):
    plan = planned(spark, sql.format(**tables), "analysis")
    assert type(plan) is MergeIntoLake
    out = transform_up(plan, lambda n: rewrite_merge(n, lake.ctx()))
    assert type(out) is WriteMerge and (out.relation, out.source, out.jvm) == (plan.relation, plan.source, plan.jvm)
    snapshots = {k: tables[k] for k in ("P", "C", "U")}
    assert shown(out, **snapshots) == expected.strip().format(**tables)


REFUSED = [
    ("MERGE INTO {p} t USING (SELECT 1L AS id) s ON t.id = s.id AND rand() < 0.5 WHEN MATCHED THEN DELETE",
     AnalysisException, "[UNSUPPORTED_MERGE_CONDITION.NON_DETERMINISTIC] MERGE operation contains unsupported "
     "SEARCH condition. Non-deterministic expressions are not allowed: \"((id = id) AND (rand() < 0.5))\". "
     "SQLSTATE: 42K0E"),
    ("MERGE INTO {p} t USING (SELECT 1L AS id) s ON t.id = s.id WHEN MATCHED AND t.id IN (SELECT 1) THEN DELETE",
     AnalysisException, "[UNSUPPORTED_MERGE_CONDITION.SUBQUERY] MERGE operation contains unsupported DELETE "
     "condition. Subqueries are not allowed: \"(id IN (listquery()))\". SQLSTATE: 42K0E"),
    ("MERGE INTO {p} t USING (SELECT 1L AS id) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET kind = uuid()",
     LakeError, "lakerules: MERGE INTO {p}: the value uuid() for t.kind is not deterministic"),
    ("MERGE INTO {p} t USING (SELECT 1L AS id) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET kind = 'x', kind = 'y'",
     AnalysisException, "[DATATYPE_MISMATCH.INVALID_ROW_LEVEL_OPERATION_ASSIGNMENTS] Cannot resolve \"kind = x\", "
     "\"kind = y\" due to data type mismatch: \n- Multiple assignments for 'kind': 'x', 'y' SQLSTATE: 42K09"),
    ("MERGE INTO {bad} t USING (SELECT 1L AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE", LakeError,
     "lakerules: table property write.merge.mode='bogus' is not one of ['merge-on-read', 'copy-on-write']"),
]


@pytest.mark.parametrize("sql, error, message", REFUSED, ids=[r[0] for r in REFUSED])
def test_fixture_refused(spark, lake, tables, sql, error, message):
    plan = planned(spark, sql.format(**tables), "analysis")
    with pytest.raises(error) as info:
        rewrite_merge(plan, lake.ctx())
    assert str(info.value) == message.format(**tables)
