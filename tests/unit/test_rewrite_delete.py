"""rewrite_delete alone (lakerules.rules.rewrite_delete): DELETE FROM (and TRUNCATE TABLE) on a
lake table becomes a planned write of deletes, in the table's write mode, with the files it
drops whole and the files it reads; a non-deterministic condition and bad table properties are
refused before anything is planned; every other node, a planned command included, is left as
it is."""

from __future__ import annotations

import pytest

from lakerules.errors import LakeError, NotSupported
from lakerules.plan.nodes import (
    DeleteFromLake, Filter, MergeIntoLake, TruncateLake, UpdateLake, WriteDeletes, WriteToLake, transform_up,
)
from lakerules.rules.rewrite_delete import rewrite_delete
from unit.rulekit import Ctx, LocalCatalogs, NoCatalogs, expr, ids_schema, planned, relation, rows, shown, spark_node
from unit.rulekit import table_ref

T = "lake.db.t"

# ---- hand-built plans, no Spark ----------------------------------------------------------------------


def _delete(condition=None, *, truncate=False, ref=None):
    t = table_ref(T, ref)
    return DeleteFromLake(table=t, relation=relation(t), condition=condition, jvm=spark_node("DeleteFromTable").jvm,
                          truncate=truncate)


def _ctx(catalog) -> Ctx:
    return Ctx(catalogs=LocalCatalogs(lake=catalog))


@pytest.fixture
def table(catalog):
    t = catalog.create_table("db.t", ids_schema())
    t.append(rows([1, 2], ["a", "b"]))
    return t


@pytest.mark.parametrize("properties, mode", [({}, "merge-on-read"),
                                              ({"write.delete.mode": "copy-on-write"}, "copy-on-write"),
                                              ({"format-version": "1"}, "copy-on-write")],
                         ids=["default", "copy-on-write", "format v1"])
def test_delete_without_where_is_a_write_of_deletes_in_the_tables_mode(catalog, properties, mode):
    catalog.create_table("db.t", ids_schema(), properties=properties).append(rows([1], ["a"]))
    plan = _delete()
    out = rewrite_delete(plan, _ctx(catalog))
    assert type(out) is WriteDeletes
    assert (out.table, out.relation, out.condition, out.jvm, out.mode, out.files) == (
        plan.table, plan.relation, None, plan.jvm, mode, None)
    assert shown(out) == f"WriteDeletes {T}: truncate (every data and delete file removed)"


def test_truncate_table_is_a_truncate(table, catalog):
    out = rewrite_delete(_delete(truncate=True), _ctx(catalog))
    assert type(out) is TruncateLake and out.files is None
    assert shown(out) == f"TruncateLake {T}: every data and delete file removed"


def test_a_table_without_snapshot_has_nothing_to_change(catalog):
    catalog.create_table("db.t", ids_schema())
    out = rewrite_delete(_delete(expr("(id = 1)")), _ctx(catalog))
    assert shown(out) == (f"WriteDeletes {T} merge-on-read: INSERT INTO {T}.DELETE (file_path, pos) SELECT <file>, "
                          f"<position> FROM {T} WHERE (id = 1)\n  table has no snapshot: nothing to change")


def test_a_branch_is_planned_at_its_head(table, catalog):
    table.manage_snapshots().create_branch(table.current_snapshot().snapshot_id, "b").commit()
    table.append(rows([3], ["c"]))  # main moves on, b stays
    out = rewrite_delete(_delete(ref="branch:b"), _ctx(catalog))
    assert out.table.ref == "branch:b"
    from lakerules.iceberg import refs

    loaded = catalog.load_table("db.t")
    assert refs.for_write(loaded, refs.Target("b")).current_snapshot().snapshot_id == loaded.refs()["b"].snapshot_id


def _scan_over(rel):
    from lakerules.plan.nodes import LakeScan

    return LakeScan(table=rel.table, snapshot_id=None, output=rel.output, iceberg=None, schema=None, plan=None)


LEFT_ALONE = {
    "a planned DELETE": lambda: WriteDeletes(table=table_ref(T), relation=relation(), condition=expr("id = 1")),
    "a planned TRUNCATE": lambda: TruncateLake(table=table_ref(T), relation=relation()),
    "an UPDATE": lambda: UpdateLake(table=table_ref(T), relation=relation(), condition=expr("id = 1")),
    "a MERGE": lambda: MergeIntoLake(table=table_ref(T), relation=relation(), source=None, condition=expr("a = b")),
    "a write": lambda: WriteToLake(table=table_ref(T), mode="append", query=spark_node("LocalRelation")),
    "a query over the relation": lambda: Filter(jvm=expr("id = 1"), kids=(relation(),), conjuncts=(expr("id = 1"),)),
    "an opaque Spark subtree": lambda: spark_node("DeleteFromTable"),
}


@pytest.mark.parametrize("make", LEFT_ALONE.values(), ids=LEFT_ALONE.keys())
def test_left_alone(make):
    plan = make()
    ctx = Ctx(catalogs=NoCatalogs())
    assert rewrite_delete(plan, ctx) is plan
    assert transform_up(plan, lambda n: rewrite_delete(n, ctx)) is plan


def test_a_condition_that_is_not_deterministic_is_refused_before_any_lookup():
    with pytest.raises(LakeError) as info:
        rewrite_delete(_delete(expr("(rand() < 0.5D)", deterministic=False)), Ctx(catalogs=NoCatalogs()))
    assert str(info.value) == f"lakerules: DELETE FROM {T}: the condition (rand() < 0.5D) is not deterministic"


REFUSED_PROPERTIES = [
    ({"write.delete.mode": "merge-on-write"},
     "lakerules: table property write.delete.mode='merge-on-write' is not one of ['merge-on-read', 'copy-on-write']"),
    ({"write.delete.isolation-level": "strict"},
     "lakerules: table property write.delete.isolation-level='strict' is not one of ['serializable', 'snapshot']; "
     "nothing was changed"),
    ({"write.delete.granularity": "row"},
     "lakerules: table property write.delete.granularity='row' is not one of ['file', 'partition']"),
]


@pytest.mark.parametrize("properties, message", REFUSED_PROPERTIES, ids=[next(iter(p)) for p, _ in REFUSED_PROPERTIES])
def test_bad_table_properties_are_refused(catalog, properties, message):
    catalog.create_table("db.t", ids_schema(), properties=properties)
    for plan in (_delete(), _delete(truncate=True)):
        with pytest.raises(LakeError) as info:
            rewrite_delete(plan, _ctx(catalog))
        assert str(info.value) == message


def test_a_tag_is_never_written(table, catalog):
    table.manage_snapshots().create_tag(table.current_snapshot().snapshot_id, "v1").commit()
    with pytest.raises(NotSupported) as info:
        rewrite_delete(_delete(ref="tag:v1"), _ctx(catalog))
    assert str(info.value) == (f"lakerules: {T}.tag_v1 names tag 'v1': a tag is a fixed snapshot and is never "
                               "written; write to a branch (lake...<table>.branch_<name>)")


# ---- statements Spark resolved ---------------------------------------------------------------------

# (statement on {p}: partitioned by kind, a (ids 1, 2) and b (ids 10, 11) appended twice: 4 files;
#  the plan after rewrite_delete)
FIXTURES = [
    ("DELETE FROM {p} WHERE kind = 'a'", """
WriteDeletes {p} merge-on-read: INSERT INTO {p}.DELETE (file_path, pos) SELECT <file>, <position> FROM {p} WHERE ({p}.kind = 'a')
  snapshot S: 2 of 4 data files may hold matching rows (pruned by EqualTo(term=Reference(name='kind'), literal=literal('a')))
  dropped whole, not read (every row matches, by partition or column metrics): 2 files, 4 rows before deletes
  read to find matching rows: 0 files, 0 of them with delete files"""),
    # every row of b's files matches: by partition and by the files' lower bound of id
    ("DELETE FROM {p} WHERE kind = 'b' AND id >= 10", """
WriteDeletes {p} merge-on-read: INSERT INTO {p}.DELETE (file_path, pos) SELECT <file>, <position> FROM {p} WHERE (({p}.kind = 'b') AND ({p}.id >= CAST(10 AS BIGINT)))
  snapshot S: 2 of 4 data files may hold matching rows (pruned by And(left=EqualTo(term=Reference(name='kind'), literal=literal('b')), right=GreaterThanOrEqual(term=Reference(name='id'), literal=LongLiteral(10))))
  dropped whole, not read (every row matches, by partition or column metrics): 2 files, 4 rows before deletes
  read to find matching rows: 0 files, 0 of them with delete files"""),
    ("DELETE FROM {p} WHERE id = 1", """
WriteDeletes {p} merge-on-read: INSERT INTO {p}.DELETE (file_path, pos) SELECT <file>, <position> FROM {p} WHERE ({p}.id = CAST(1 AS BIGINT))
  snapshot S: 2 of 4 data files may hold matching rows (pruned by EqualTo(term=Reference(name='id'), literal=LongLiteral(1)))
  dropped whole, not read (every row matches, by partition or column metrics): 0 files, 0 rows before deletes
  read to find matching rows: 2 files, 0 of them with delete files
  delete files (write.delete.granularity=file): at most one per data file read, 2 files in 1 partitions"""),
    # NOT in Iceberg holds on NULL, in SQL it does not: no file is dropped unread on its account
    ("DELETE FROM {p} WHERE id != 1", """
WriteDeletes {p} merge-on-read: INSERT INTO {p}.DELETE (file_path, pos) SELECT <file>, <position> FROM {p} WHERE (NOT ({p}.id = CAST(1 AS BIGINT)))
  snapshot S: 4 of 4 data files may hold matching rows (pruned by Not(child=EqualTo(term=Reference(name='id'), literal=LongLiteral(1))))
  dropped whole, not read (every row matches, by partition or column metrics): 0 files, 0 rows before deletes
  read to find matching rows: 4 files, 0 of them with delete files
  delete files (write.delete.granularity=file): at most one per data file read, 4 files in 2 partitions"""),
    # a subquery decides nothing while planning: every file is read
    ("DELETE FROM {p} WHERE id IN (SELECT id FROM {p} WHERE kind = 'b')", """
WriteDeletes {p} merge-on-read: INSERT INTO {p}.DELETE (file_path, pos) SELECT <file>, <position> FROM {p} WHERE ({p}.id IN (listquery()))
  snapshot S: 4 of 4 data files may hold matching rows (pruned by AlwaysTrue())
  dropped whole, not read (every row matches, by partition or column metrics): 0 files, 0 rows before deletes
  read to find matching rows: 4 files, 0 of them with delete files
  delete files (write.delete.granularity=file): at most one per data file read, 4 files in 2 partitions"""),
    ("DELETE FROM {cow} WHERE id = 1", """
WriteDeletes {cow} copy-on-write: rewrite files with rows WHERE ({cow}.id = CAST(1 AS BIGINT)), keeping rows WHERE NOT (({cow}.id = CAST(1 AS BIGINT))) <=> true
  snapshot C: 2 of 4 data files may hold matching rows (pruned by EqualTo(term=Reference(name='id'), literal=LongLiteral(1)))
  dropped whole, not read (every row matches, by partition or column metrics): 0 files, 0 rows before deletes
  read to find matching rows: 2 files, 0 of them with delete files"""),
    ("DELETE FROM {p}", "WriteDeletes {p}: truncate (every data and delete file removed)"),
    ("TRUNCATE TABLE {p}", "TruncateLake {p}: every data and delete file removed"),
]


@pytest.fixture(scope="module")
def tables(lake):
    data = rows([1, 2, 10, 11], ["a", "a", "b", "b"])
    p = lake.table("p", data, partition_by="kind", appends=2)
    cow = lake.table("cow", data, partition_by="kind", appends=2, properties={"write.delete.mode": "copy-on-write"})
    return {"p": lake.name("p"), "cow": lake.name("cow"),
            "S": p.current_snapshot().snapshot_id, "C": cow.current_snapshot().snapshot_id}


@pytest.mark.parametrize("sql, expected", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_fixture(spark, lake, tables, sql, expected):
    plan = planned(spark, sql.format(**tables), "analysis")
    assert type(plan) is DeleteFromLake
    out = transform_up(plan, lambda n: rewrite_delete(n, lake.ctx()))
    assert shown(out, S=tables["S"], C=tables["C"]) == expected.strip().format(**tables)


def test_fixture_refused(spark, lake, tables):
    plan = planned(spark, f"DELETE FROM {tables['p']} WHERE rand(7) < 0.5D", "analysis")
    with pytest.raises(LakeError) as info:
        rewrite_delete(plan, lake.ctx())
    assert str(info.value) == f"lakerules: DELETE FROM {tables['p']}: the condition (rand(7) < 0.5D) is not deterministic"
