"""check_options alone (lakerules.rules.check_options): read options on a relation, write options
and the write target (branch, tag, write-audit-publish) of writes and planned row-level
commands are honored or refused while the statement is planned. It never rewrites: an accepted
node is returned as the very same object. No Spark: the table is in a pyiceberg catalog on
SQLite in the test's folder."""

from __future__ import annotations

import pytest

from lakerules.errors import LakeError, NotSupported
from lakerules.plan.nodes import (
    CreateTableAsSelect, DeleteFromLake, LakeScan, WriteDeletes, WriteMerge, WriteToLake, WriteUpdate, transform_up,
)
from lakerules.rules.check_options import check_options
from unit.rulekit import Ctx, LocalCatalogs, NoCatalogs, expr, ids_schema, relation, rows, spark_node, table_ref

T = "lake.db.t"


@pytest.fixture
def table(catalog):
    """lake.db.t with one snapshot, tag v1 and branch b at it."""
    t = catalog.create_table("db.t", ids_schema())
    t.append(rows([1, 2], ["a", "b"]))
    head = t.current_snapshot().snapshot_id
    t.manage_snapshots().create_tag(head, "v1").create_branch(head, "b").commit()
    return t


def ctx_of(catalog, **settings) -> Ctx:
    return Ctx(catalogs=LocalCatalogs(lake=catalog), settings=settings)


def _write(ref=None, **options):
    return WriteToLake(table=table_ref(T, ref), mode="append", query=spark_node("LocalRelation"),
                       options=tuple(sorted(options.items())))


def _ctas(**options):
    return CreateTableAsSelect(table=table_ref(T), query=spark_node("LocalRelation"), replace=True,
                               options=tuple(sorted(options.items())))


def _row_level(kind, ref=None):
    t = table_ref(T, ref)
    rel = relation(t)
    if kind is WriteMerge:
        return WriteMerge(table=t, relation=rel, source=None, condition=expr("t.id = s.id"))
    return kind(table=t, relation=rel, condition=expr("id = 1"))


# ---- accepted: the very same node -------------------------------------------------------------------

ACCEPTED_WITHOUT_LOOKUP = {
    "a relation without options": lambda: relation(),
    "a relation read at a snapshot": lambda: relation(options={"snapshot-id": "42"}),
    "a relation read at a tag": lambda: relation(options={"tag": "v1"}),
    "a relation whose path option names it": lambda: relation(options={"path": "db.t", "branch": "b"}),
    "an append with a snapshot property": lambda: _write(**{"snapshot-property.k": "v"}),
    "an overwrite validated from a snapshot": lambda: _write(**{"isolation-level": "Snapshot",
                                                                "validate-from-snapshot-id": "42"}),
    "a CTAS with a snapshot property": lambda: _ctas(**{"snapshot-property.k": "v"}),
    "a planned DELETE": lambda: _row_level(WriteDeletes),
    "a planned UPDATE": lambda: _row_level(WriteUpdate),
    "a planned MERGE": lambda: _row_level(WriteMerge),
    # not its nodes, even with options that would be refused on a relation
    "a planned scan": lambda: LakeScan(table=table_ref(T), snapshot_id=None, output=(), iceberg=None, schema=None,
                                       plan=None),
    "a DELETE not yet planned, on a tag": lambda: DeleteFromLake(table=table_ref(T, "tag:v1"),
                                                                 relation=relation(options={"foo": "1"})),
    "a Spark node": lambda: spark_node("Project", relation(), text="[id]"),
}


@pytest.mark.parametrize("make", ACCEPTED_WITHOUT_LOOKUP.values(), ids=ACCEPTED_WITHOUT_LOOKUP.keys())
def test_accepted_without_looking_the_table_up(make):
    plan = make()
    ctx = Ctx(catalogs=NoCatalogs())  # main, no write-audit-publish: nothing to look up
    assert check_options(plan, ctx) is plan
    assert transform_up(plan, lambda n: check_options(n, ctx)) is plan


ACCEPTED_TARGETS = {
    "an append to branch b": lambda: _write("branch:b"),
    "a DELETE on branch b": lambda: _row_level(WriteDeletes, "branch:b"),
    "an UPDATE on branch b": lambda: _row_level(WriteUpdate, "branch:b"),
    "a MERGE on branch b": lambda: _row_level(WriteMerge, "branch:b"),
}


@pytest.mark.parametrize("make", ACCEPTED_TARGETS.values(), ids=ACCEPTED_TARGETS.keys())
def test_a_branch_the_table_has_is_written(table, catalog, make):
    plan = make()
    assert check_options(plan, ctx_of(catalog)) is plan


def test_write_audit_publish_branch_is_a_target(catalog, table):
    table.transaction().set_properties({"write.wap.enabled": "true"}).commit_transaction()
    ctx = ctx_of(catalog, **{"spark.wap.branch": "audit"})  # created by the first write
    for plan in (_write(), _row_level(WriteDeletes), _row_level(WriteMerge)):
        assert check_options(plan, ctx) is plan


# ---- refused: one line naming the problem --------------------------------------------------------

REFUSED = [
    ("an unknown read option", lambda: relation(options={"foo": "1", "snapshot-id": "1"}), NotSupported,
     f"lakerules: read option(s) ['foo'] on {T} are not supported; the read options lakerules honors are "
     "['snapshot-id', 'as-of-timestamp', 'branch', 'tag']"),
    ("two read options choosing a snapshot", lambda: relation(options={"snapshot-id": "1", "tag": "v1"}), LakeError,
     f"lakerules: reading {T}: the options ['snapshot-id', 'tag'] each choose a snapshot; give one"),
    ("a path option naming another table", lambda: relation(options={"path": "db.other"}), NotSupported,
     f"lakerules: read option(s) ['path'] on {T} are not supported; the read options lakerules honors are "
     "['snapshot-id', 'as-of-timestamp', 'branch', 'tag']"),
    ("an unknown write option", lambda: _write(mergeSchema="true"), NotSupported,
     f"lakerules: write option(s) ['mergeSchema'] on {T} are not supported; the write options lakerules honors "
     "are ['snapshot-property.<key>', 'isolation-level', 'validate-from-snapshot-id']"),
    ("a bad isolation level", lambda: _write(**{"isolation-level": "strict"}), LakeError,
     f"lakerules: writing {T}: write option isolation-level must be serializable or snapshot, not 'strict'"),
    ("a validation snapshot that is no number", lambda: _write(**{"validate-from-snapshot-id": "x1"}), LakeError,
     f"lakerules: writing {T}: write option validate-from-snapshot-id must be a snapshot id (a whole number), "
     "not 'x1'"),
    ("a CTAS validating", lambda: _ctas(**{"isolation-level": "snapshot"}), NotSupported,
     f"lakerules: write option(s) ['isolation-level'] on {T}: creating a table validates against no earlier "
     "commit; the write options CREATE TABLE AS SELECT honors are 'snapshot-property.<key>'"),
]


@pytest.mark.parametrize("make, error, message", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refused_options(make, error, message):
    with pytest.raises(error) as info:
        check_options(make(), Ctx(catalogs=NoCatalogs()))
    assert str(info.value) == message


REFUSED_TARGETS = [
    ("an append to a tag", lambda: _write("tag:v1"), NotSupported,
     f"lakerules: {T}.tag_v1 names tag 'v1': a tag is a fixed snapshot and is never written; write to a branch "
     "(lake...<table>.branch_<name>)"),
    ("a DELETE on a tag", lambda: _row_level(WriteDeletes, "tag:v1"), NotSupported,
     f"lakerules: {T}.tag_v1 names tag 'v1': a tag is a fixed snapshot and is never written; write to a branch "
     "(lake...<table>.branch_<name>)"),
    ("an UPDATE on a branch the table lacks", lambda: _row_level(WriteUpdate, "branch:nope"), LakeError,
     f"lakerules: table {T}.branch_nope has no branch 'nope'; its branches are ['b', 'main']"),
    ("a MERGE on a tag named as a branch", lambda: _row_level(WriteMerge, "branch:v1"), LakeError,
     f"lakerules: table {T}.branch_v1 has no branch 'v1' ('v1' is a tag); its branches are ['b', 'main']"),
]


@pytest.mark.parametrize("make, error, message", [r[1:] for r in REFUSED_TARGETS], ids=[r[0] for r in REFUSED_TARGETS])
def test_refused_targets(table, catalog, make, error, message):
    with pytest.raises(error) as info:
        check_options(make(), ctx_of(catalog))
    assert str(info.value) == message


def test_write_audit_publish_settings_that_contradict_are_refused(table, catalog):
    table.transaction().set_properties({"write.wap.enabled": "true"}).commit_transaction()
    both = ctx_of(catalog, **{"spark.wap.id": "w1", "spark.wap.branch": "audit"})
    with pytest.raises(LakeError) as info:
        check_options(_row_level(WriteDeletes), both)
    assert str(info.value) == (f"lakerules: {T} has write.wap.enabled=true and the session sets both spark.wap.id "
                               "('w1') and spark.wap.branch ('audit'); set one")
    with pytest.raises(LakeError) as info:
        check_options(_write("branch:b"), ctx_of(catalog, **{"spark.wap.branch": "audit"}))
    assert str(info.value) == (f"lakerules: the statement writes to branch 'b' of {T}.branch_b, and the session's "
                               "spark.wap.branch is 'audit'; write to one branch")
    # replacing the table (CTAS over it) cannot be staged
    with pytest.raises(NotSupported) as info:
        check_options(_ctas(), ctx_of(catalog, **{"spark.wap.id": "w1"}))
    assert str(info.value) == (f"lakerules: {T} has write.wap.enabled=true and the session sets {{'spark.wap.id': "
                               "'w1'}: replacing the table cannot be staged or written to a branch, and replacing "
                               "main's would publish unaudited data; unset those settings to replace it")


def test_write_audit_publish_means_nothing_on_other_tables(table, catalog):
    ctx = ctx_of(catalog, **{"spark.wap.id": "w1", "spark.wap.branch": "audit"})
    for plan in (_write(), _row_level(WriteUpdate), _ctas()):
        assert check_options(plan, ctx) is plan
