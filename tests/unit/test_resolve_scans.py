"""resolve_scans alone (lakerules.rules.resolve_scans): a lake relation becomes a planned scan of
the snapshot it reads (Spark's, its read options', write-audit-publish's), with the schema it
reads with and the files its filters leave; a metadata table's relation becomes a metadata
scan; anything else is left as it is.

Without filters no JVM is needed (the table is in a pyiceberg catalog on SQLite in the test's
folder, manifests planned on the driver); the filters' translation is tested on plans Spark
optimized."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.expressions import AlwaysTrue, And, EqualTo, GreaterThan, NotNull
from pyiceberg.types import StringType

from lakerules.errors import LakeError, NotSupported
from lakerules.metadata.tables import MetadataScan
from lakerules.plan.nodes import DeleteFromLake, Filter, LakeScan, transform_up
from lakerules.rules.push_filters import push_filters
from lakerules.rules.resolve_scans import resolve_scans
from unit.rulekit import LOCAL_PLANNING, Ctx, LocalCatalogs, NoCatalogs, expr, ids_schema, planned, relation, rows, shown
from unit.rulekit import spark_node, table_ref

T = "lake.db.t"


class History:
    """lake.db.t: snapshot s1 (ids 1, 2), then a column ``note`` added, then s2 (id 3);
    branch b and tag v1 at s1."""

    def __init__(self, catalog):
        self.catalog = catalog
        self.table = catalog.create_table("db.t", ids_schema())
        self.table.append(rows([1, 2], ["a", "b"]))
        self.s1 = self.table.current_snapshot().snapshot_id
        with self.table.update_schema() as update:
            update.add_column("note", StringType())
        self.table.append(pa.table({"id": pa.array([3], pa.int64()), "kind": ["c"], "note": ["n"]}))
        self.s2 = self.table.current_snapshot().snapshot_id
        self.table.manage_snapshots().create_branch(self.s1, "b").create_tag(self.s1, "v1").commit()

    def ctx(self, **settings) -> Ctx:
        return Ctx(catalogs=LocalCatalogs(lake=self.catalog), settings={**LOCAL_PLANNING, **settings})

    def columns(self, scan) -> list[str]:
        return [f.name for f in scan.schema.fields]


@pytest.fixture
def h(catalog):
    return History(catalog)


def test_a_relation_becomes_a_scan_of_its_snapshot(h):
    rel = relation(snapshot_id=h.s2, columns=("id", "kind", "note"))
    out = resolve_scans(rel, h.ctx())
    assert type(out) is LakeScan
    assert (out.table, out.snapshot_id, out.output, out.row_filter) == (rel.table, h.s2, rel.output, AlwaysTrue())
    assert h.columns(out) == ["id", "kind", "note"]
    assert shown(out, S2=h.s2) == f"LakeScan {T} snapshot=S2 files=2/2 position_deletes=0 equality_deletes=0"


def test_time_travel_reads_that_snapshot_with_its_schema(h):
    out = resolve_scans(relation(snapshot_id=h.s1, time_travel=True), h.ctx())
    assert out.snapshot_id == h.s1 and h.columns(out) == ["id", "kind"]
    assert shown(out, S1=h.s1) == f"LakeScan {T} snapshot=S1 files=1/1 position_deletes=0 equality_deletes=0"


@pytest.mark.parametrize("options", [{"snapshot-id": "{s1}"}, {"branch": "b"}, {"tag": "v1"}, {"as-of-timestamp": "{t1}"}],
                         ids=["snapshot-id", "branch", "tag", "as-of-timestamp"])
def test_read_options_choose_the_snapshot_read_with_the_current_schema(h, options):
    t1 = h.table.snapshot_by_id(h.s1).timestamp_ms
    opts = {k: v.format(s1=h.s1, t1=t1) for k, v in options.items()}
    out = resolve_scans(relation(snapshot_id=h.s2, options=opts), h.ctx())
    assert out.snapshot_id == h.s1 and len(out.plan.files) == 1
    assert h.columns(out) == ["id", "kind", "note"]


def test_write_audit_publish_reads_its_branch(h):
    h.table.transaction().set_properties({"write.wap.enabled": "true"}).commit_transaction()
    rel = relation(snapshot_id=h.s2)
    assert resolve_scans(rel, h.ctx(**{"spark.wap.branch": "b"})).snapshot_id == h.s1
    # a branch not created yet: the current snapshot; time travel and a named ref: what they name
    assert resolve_scans(rel, h.ctx(**{"spark.wap.branch": "later"})).snapshot_id == h.s2
    assert resolve_scans(relation(snapshot_id=h.s2, time_travel=True), h.ctx(**{"spark.wap.branch": "b"})).snapshot_id == h.s2
    named = relation(table_ref(T, "tag:v1"), snapshot_id=h.s1)
    assert resolve_scans(named, h.ctx(**{"spark.wap.branch": "b", "spark.wap.id": ""})).snapshot_id == h.s1


def test_a_table_without_snapshot_plans_no_file(catalog):
    catalog.create_table("db.t", ids_schema())
    out = resolve_scans(relation(), Ctx(catalogs=LocalCatalogs(lake=catalog), settings=LOCAL_PLANNING))
    assert shown(out) == f"LakeScan {T} snapshot=None files=0/0 position_deletes=0 equality_deletes=0"


def test_a_metadata_table_becomes_a_metadata_scan(h):
    rel = relation(snapshot_id=h.s2, metadata_table="files", columns=("file_path",))
    out = resolve_scans(rel, Ctx(catalogs=NoCatalogs()))  # its rows are built when lowered
    assert type(out) is MetadataScan and out.output is rel.output
    assert shown(out) == f"MetadataScan {T}.files"
    travelled = resolve_scans(relation(snapshot_id=h.s1, time_travel=True, metadata_table="files"), h.ctx())
    assert shown(travelled, S1=h.s1) == f"MetadataScan {T}.files snapshot=S1"
    chosen = resolve_scans(relation(metadata_table="entries", options={"tag": "v1"}), h.ctx())
    assert chosen.snapshot_id == h.s1


def _scan(rel):
    return LakeScan(table=rel.table, snapshot_id=None, output=rel.output, iceberg=None, schema=None, plan=None)


LEFT_ALONE = {
    "a planned scan": lambda: _scan(relation()),
    "a metadata scan": lambda: MetadataScan(table=table_ref(T), meta="files", snapshot_id=None, output=()),
    "a filter over a planned scan": lambda: Filter(jvm=expr("id = 1"), kids=(_scan(relation()),), conjuncts=(expr("id = 1"),)),
    "an opaque Spark subtree": lambda: spark_node("LocalRelation"),
    # a row-level command plans its own read of its relation (rules/rewrite_delete.py)
    "DELETE's relation": lambda: DeleteFromLake(table=table_ref(T), relation=relation(), condition=expr("id = 1")),
}


@pytest.mark.parametrize("make", LEFT_ALONE.values(), ids=LEFT_ALONE.keys())
def test_left_alone(make):
    plan = make()
    ctx = Ctx(catalogs=NoCatalogs())
    assert resolve_scans(plan, ctx) is plan
    assert transform_up(plan, lambda n: resolve_scans(n, ctx)) is plan


REFUSED = [
    ("a read option on a name at a branch", dict(name=table_ref(T, "branch:b"), options={"snapshot-id": "1"}), LakeError,
     f"lakerules: reading {T}.branch_b: the name chooses a branch and the read option 'snapshot-id' a snapshot; give one"),
    ("a read option with time travel", dict(time_travel=True, snapshot_id="{s1}", options={"tag": "v1"}), LakeError,
     f"lakerules: reading {T}: VERSION AS OF / TIMESTAMP AS OF and the read option 'tag' both choose a snapshot; "
     "give one"),
    ("a snapshot the table lacks", dict(options={"snapshot-id": "1"}), LakeError,
     f"lakerules: table {T} has no snapshot 1 (read option snapshot-id)"),
    ("a snapshot id that is no number", dict(options={"snapshot-id": "first"}), LakeError,
     f"lakerules: reading {T}: read option snapshot-id must be a whole number, not 'first'"),
    ("a time before the first snapshot", dict(options={"as-of-timestamp": "0"}), LakeError,
     f"lakerules: table {T} has no snapshot at or before 0 ms (read option as-of-timestamp, milliseconds since "
     "1970-01-01 UTC)"),
    ("a tag named as a branch", dict(options={"branch": "v1"}), LakeError,
     f"lakerules: table {T} has no branch 'v1' (read option branch); its branches are ['b', 'main']"),
    ("an unknown read option", dict(options={"split-size": "1"}), NotSupported,
     f"lakerules: read option(s) ['split-size'] on {T} are not supported; the read options lakerules honors are "
     "['snapshot-id', 'as-of-timestamp', 'branch', 'tag']"),
    ("a metadata table of the whole table at a snapshot", dict(metadata_table="snapshots", options={"tag": "v1"}),
     NotSupported, f"lakerules: metadata table {T}.snapshots describes the whole table and cannot be read at a "
     "snapshot (VERSION AS OF, TIMESTAMP AS OF, snapshot-id, ...), as in Iceberg; time travel works on data_files, "
     "delete_files, entries, files, manifests, partitions, position_deletes"),
]


@pytest.mark.parametrize("given, error, message", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refused(h, given, error, message):
    given = {k: (int(v.format(s1=h.s1)) if v == "{s1}" else v) for k, v in given.items()}
    with pytest.raises(error) as info:
        resolve_scans(relation(**given), h.ctx())
    assert str(info.value) == message


def test_bad_settings_are_refused_by_name(h):
    with pytest.raises(LakeError) as info:
        resolve_scans(relation(), h.ctx(**{"spark.sql.iceberg.data-planning-mode": "sometimes"}))
    assert str(info.value) == ("lakerules: spark.sql.iceberg.data-planning-mode='sometimes' is not a planning mode; "
                               "use one of auto, local, distributed")
    with pytest.raises(LakeError) as info:
        resolve_scans(relation(), h.ctx(**{"spark.lakerules.planning.manifestCacheEntries": "-1"}))
    assert str(info.value) == ("lakerules: spark.lakerules.planning.manifestCacheEntries='-1' is not a number of "
                               "manifest entries (0 or more)")


# ---- filters, on plans Spark optimized ------------------------------------------------------------

# (WHERE, the files planned of the table's 4, the row filter pruning used). kind is the partition:
# a (ids 1, 2) and b (ids 10, 11), appended twice.
FIXTURES = [
    ("true", "4/4", AlwaysTrue()),
    ("kind = 'a'", "2/4", EqualTo("kind", "a")),
    ("id > 5", "2/4", GreaterThan("id", 5)),  # by the files' column bounds
    ("kind = 'a' AND id > 5", "0/4", And(EqualTo("kind", "a"), GreaterThan("id", 5))),
    # a condition pyiceberg cannot express prunes nothing (read more, never less)
    ("upper(kind) = 'A'", "4/4", AlwaysTrue()),
    ("upper(kind) = 'A' AND kind IS NOT NULL", "4/4", NotNull("kind")),
]


@pytest.fixture(scope="module")
def parted(lake):
    t = lake.table("p", rows([1, 2, 10, 11], ["a", "a", "b", "b"]), partition_by="kind", appends=2)
    return lake.name("p"), t.current_snapshot().snapshot_id


@pytest.mark.parametrize("where, files, row_filter", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_fixture(spark, lake, parted, where, files, row_filter):
    name, snapshot = parted
    plan = planned(spark, f"SELECT * FROM {name} WHERE {where}")
    plan = transform_up(plan, lambda n: push_filters(n, None))  # the scans batch's first rule
    out = transform_up(plan, lambda n: resolve_scans(n, lake.ctx()))
    (scan,) = [n for n in [out, *out.children()] if isinstance(n, LakeScan)]
    assert scan.snapshot_id == snapshot and scan.row_filter == row_filter
    assert f"files={files} " in shown(scan)
