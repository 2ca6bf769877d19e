"""File deletion is confined to the table's own folder (issue #16 item 1, lakerules.iceberg.paths).

Each case builds the situation in the session's throwaway warehouse next to canary files, made
old enough for remove_orphan_files' cutoff: the files of a sibling table, a file in the warehouse
root, files outside the warehouse (some reached by a symbolic link from inside a table) and the
catalog's database. Then it runs the statement and checks that (a) it works correctly or fails
with a clear lakerules error (no Python traceback), (b) every canary is intact, (c) on an error the
table is unchanged (same snapshots and rows). Each refused CALL is tried with dry_run => true
first, so that without the confinement a case fails before it deletes anything.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import types
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import faults_util as fu
from errors_util import refused

FUTURE = "TIMESTAMP '2999-01-01 00:00:00'"
OLD = 1_000_000_000  # 2001: older than any cutoff


def age(path: Path) -> None:
    """A file, or every file below a folder, as if written long ago (links: the link itself)."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        for d, _, names in os.walk(path):
            for n in names:
                os.utime(Path(d) / n, (OLD, OLD), follow_symlinks=False)
    else:
        os.utime(path, (OLD, OLD), follow_symlinks=False)


class Canaries:
    """Files no statement on another table may touch, each old enough to be an orphan."""

    def __init__(self, warehouse: Path, outside: Path):
        self.warehouse, self.outside = Path(warehouse), Path(outside)
        self.catalog_db = self.warehouse / "catalog.db"
        self.files: dict[Path, str] = {}
        self.checks = 0

    def add(self, path: Path, text: str = "canary") -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return self.keep(path)

    def keep(self, path: Path) -> Path:
        """An existing file (or every file below a folder) as a canary."""
        path = Path(path)
        for p in ([path] if path.is_file() else [Path(d) / n for d, _, ns in os.walk(path) for n in ns]):
            self.files[p] = hashlib.sha256(p.read_bytes()).hexdigest()
            age(p)
        return path

    def arm(self) -> None:
        """Right before a statement: the catalog's database old too (the session writes it)."""
        age(self.catalog_db)

    def count(self) -> int:
        return len(self.files) + 1  # and the catalog database

    def assert_intact(self) -> None:
        self.checks += 1
        gone = [str(p) for p, digest in self.files.items()
                if not p.is_file() or hashlib.sha256(p.read_bytes()).hexdigest() != digest]
        assert not gone, f"canaries deleted or changed: {gone}"
        assert self.catalog_db.is_file(), "the catalog database was deleted"
        with sqlite3.connect(self.catalog_db) as con:
            assert con.execute("SELECT count(*) FROM iceberg_tables").fetchone()[0] > 0


@pytest.fixture
def canaries(spark, ns, warehouse, iceberg_catalog, tmp_path, request):
    """A sibling table lake.<ns>.sib with rows, a file in the warehouse root, files outside the
    warehouse; all old. Prints how many there were and how often they were checked (-rA)."""
    c = Canaries(warehouse, tmp_path / "outside")
    sib = make_table(spark, iceberg_catalog, ns, "sib", [1, 2, 3])
    c.sibling = sib
    c.keep(fu.local(sib.location()))
    c.root_file = c.add(Path(warehouse) / f"canary-root-{ns}.txt")
    c.outside_file = c.add(c.outside / "canary.parquet")
    c.outside_dir_file = c.add(c.outside / "folder" / "deep.parquet")
    yield c
    print(f"{request.node.name}: {c.count()} canaries, all intact at each of {c.checks} checks")


def make_table(spark, iceberg_catalog, ns: str, name: str, ids: list[int], location: str | None = None,
               elsewhere: bool = False):
    """lake.<ns>.<name> (id BIGINT) with the ids appended, in one snapshot per id (pyiceberg
    appends: much quicker than Spark jobs). ``elsewhere``: created by pyiceberg, as another tool
    would, at a location lakerules' CREATE TABLE refuses (lakerules.iceberg.owners)."""
    if elsewhere:
        import pyiceberg.schema
        import pyiceberg.types as T

        schema = pyiceberg.schema.Schema(T.NestedField(1, "id", T.LongType(), required=False))
        iceberg_catalog.create_table((ns, name), schema, location=location)
    else:
        where = f" LOCATION '{location}'" if location else ""
        spark.sql(f"CREATE TABLE lake.{ns}.`{name}` (id BIGINT){where}")
    t = iceberg_catalog.load_table((ns, name))
    for i in ids:
        t.append(pa.table({"id": pa.array([i], pa.int64())}, schema=t.schema().as_arrow()))
    return iceberg_catalog.load_table((ns, name))


def state(iceberg_catalog, ident: tuple) -> tuple:
    t = iceberg_catalog.load_table(ident)
    rows = sorted(t.scan().to_arrow().column("id").to_pylist()) if t.current_snapshot() else []
    return [s.snapshot_id for s in t.snapshots()], t.metadata_location, rows


def orphan_call(spark, ident: str, extra: str = "", dry_run: bool = False) -> str:
    dry = ", dry_run => true" if dry_run else ""
    return f"CALL lake.system.remove_orphan_files(table => '{ident}'{extra}{dry})"


def refused_call(spark, ident: str, extra: str, *needles: str) -> None:
    """remove_orphan_files refused: as a dry run, then for real."""
    refused(spark, orphan_call(spark, ident, extra, dry_run=True), *needles)
    refused(spark, orphan_call(spark, ident, extra), *needles)


def drop_keeping_files(spark, iceberg_catalog, ident: tuple) -> None:
    if iceberg_catalog.table_exists(ident):
        iceberg_catalog.drop_table(ident)


# ---- remove_orphan_files' location ----------------------------------------------------------------


def test_location_that_resolves_to_a_sibling_table_is_refused(spark, ns, iceberg_catalog, canaries):
    a = make_table(spark, iceberg_catalog, ns, "a", [10, 11])
    w = str(canaries.warehouse)
    age(fu.local(a.location()))
    stray = canaries.warehouse / ns / "a" / "data" / "stray.parquet"
    stray.write_text("orphan")
    age(stray)
    before = state(iceberg_catalog, (ns, "a"))
    canaries.arm()
    for location in [f"file://{w}/{ns}/a/../sib", f"file:{w}/{ns}/a/./../sib", f"{w}/{ns}/a//../sib",
                     f"file://{w}/{ns}/a/data/../../sib", f"file://{w}/{ns}/a/%2E%2E/sib",
                     f"file://{w}/{ns}/a/..", f"file://{w}/{ns}/ab"]:
        refused_call(spark, f"{ns}.a", f", location => '{location}'", "is not inside the table's location",
                     "nothing was deleted")
        canaries.assert_intact()
        assert state(iceberg_catalog, (ns, "a")) == before and stray.exists()
    # a location that resolves inside the table works, and removes only the table's orphan
    rows = spark.sql(orphan_call(spark, f"{ns}.a", f", location => 'file://{w}/{ns}/a/data/../data'")).collect()
    assert [fu.local(r[0]) for r in rows] == [stray] and not stray.exists()
    canaries.assert_intact()
    assert state(iceberg_catalog, (ns, "a")) == before


# ---- names that are not path segments -------------------------------------------------------------


@pytest.mark.parametrize("bad", ["..", ".", "a/b", "a\\b"])
def test_unsafe_names_are_refused_where_tables_and_namespaces_are_made(spark, ns, iceberg_catalog, canaries, bad):
    quoted = bad.replace("`", "``")
    problem = "is not a usable folder name" if bad in (".", "..") else "contains"
    canaries.arm()
    refused(spark, f"CREATE TABLE lake.{ns}.`{quoted}` (id BIGINT)", problem)
    refused(spark, f"CREATE TABLE lake.{ns}.`{quoted}` AS SELECT 1L AS id", problem)
    refused(spark, f"CREATE NAMESPACE lake.`{quoted}`", problem)
    before = state(iceberg_catalog, (ns, "sib"))
    refused(spark, f"ALTER TABLE lake.{ns}.sib RENAME TO lake.{ns}.`{quoted}`", problem)
    assert state(iceberg_catalog, (ns, "sib")) == before
    assert iceberg_catalog.list_tables(ns) == [(ns, "sib")]
    assert (bad,) not in iceberg_catalog.list_namespaces()
    canaries.assert_intact()


def test_nul_in_a_name_is_refused(spark, ns):
    import lakerules
    from lakerules.errors import LakeError

    catalogs = lakerules._backend.catalog_ops
    with pytest.raises(LakeError, match="contains a NUL character"):
        catalogs.handle("lake", "create_table", {"namespace": [ns], "name": "a\0b", "schema": "{}"})
    with pytest.raises(LakeError, match="contains a NUL character"):
        catalogs.handle("lake", "create_namespace", {"namespace": ["a\0b"]})


def test_names_that_are_safe_keep_working(spark, ns, iceberg_catalog, canaries):
    from lakerules.iceberg import paths

    for name in ["a b", "it's", "100%", "a%2Fb", "ü表"]:
        paths.check_name("table", name)  # not refused ('#' and '?' are: tests/test_escaped_paths.py)
    for name in ["a b", "it's", "100%", "ü表"]:
        quoted = name.replace("`", "``")
        full = f"lake.{ns}.`{quoted}`"
        spark.sql(f"CREATE TABLE {full} (id BIGINT)")
        spark.sql(f"INSERT INTO {full} VALUES (1), (2)")
        assert sorted(r[0] for r in spark.sql(f"SELECT id FROM {full}").collect()) == [1, 2]
        ident = f"{ns}.`{quoted}`".replace("'", "\\'")
        assert spark.sql(orphan_call(spark, ident, dry_run=True)).collect() == []
        spark.sql(f"DROP TABLE {full} PURGE")
        assert not iceberg_catalog.table_exists((ns, name))
    canaries.assert_intact()


def test_a_table_named_dotdot_made_before_the_check_deletes_nothing(spark, ns, warehouse, iceberg_catalog, canaries):
    """A table named '..' (made through pyiceberg, as lakerules made them before names were
    checked) sits at <warehouse>/<ns>/.., the warehouse root."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    ident = (ns, "..")
    w = Path(warehouse)
    made = {p for p in ("metadata", "data") if not (w / p).exists()}
    t = iceberg_catalog.create_table(ident, Schema(NestedField(1, "id", LongType(), required=False)))
    try:
        assert fu.local(t.location()).resolve() == w.resolve()
        for i in (1, 2):
            t.append(pa.table({"id": pa.array([i], pa.int64())}))
        before = state(iceberg_catalog, ident)
        canaries.arm()
        refused_call(spark, f"{ns}.`..`", "", "is the warehouse root")
        refused(spark, f"CALL lake.system.expire_snapshots(table => '{ns}.`..`', older_than => {FUTURE}, "
                       "retain_last => 1)", "is the warehouse root", "nothing was deleted")
        refused(spark, f"DROP TABLE lake.{ns}.`..` PURGE", "is the warehouse root", "DROP TABLE without PURGE")
        canaries.assert_intact()
        assert state(iceberg_catalog, ident) == before
    finally:
        drop_keeping_files(spark, iceberg_catalog, ident)
        for p in made:
            shutil.rmtree(w / p, ignore_errors=True)


# ---- symbolic links ------------------------------------------------------------------------------


def test_links_inside_a_table_are_neither_followed_nor_deleted(spark, ns, iceberg_catalog, canaries):
    a = make_table(spark, iceberg_catalog, ns, "a", [10, 11])
    root = fu.local(a.location())
    links = {root / "data" / "linked": canaries.outside,  # a folder outside the warehouse
             root / "data" / "linked.parquet": canaries.outside_file,
             root / "metadata" / "linked-m0.avro": canaries.outside_file,
             root / "data" / "sib": fu.local(canaries.sibling.location())}
    for link, target in links.items():
        link.symlink_to(target)
    age(root)
    stray = root / "data" / "stray.parquet"
    stray.write_text("orphan")
    age(stray)
    before = state(iceberg_catalog, (ns, "a"))
    canaries.arm()
    dry = spark.sql(orphan_call(spark, f"{ns}.a", dry_run=True)).collect()
    assert [fu.local(r[0]) for r in dry] == [stray]
    rows = spark.sql(orphan_call(spark, f"{ns}.a")).collect()
    assert [fu.local(r[0]) for r in rows] == [stray] and not stray.exists()
    assert all(link.is_symlink() for link in links)  # links are left in place
    canaries.assert_intact()
    assert state(iceberg_catalog, (ns, "a")) == before
    # a location reached through a link
    refused_call(spark, f"{ns}.a", f", location => '{root}/data/linked'", "symbolic link")
    refused_call(spark, f"{ns}.a", f", location => '{root}/data/sib'", "symbolic link")
    canaries.assert_intact()
    assert state(iceberg_catalog, (ns, "a")) == before


def test_a_table_location_that_is_a_link_is_refused(spark, ns, warehouse, iceberg_catalog, canaries):
    link = Path(warehouse) / ns / "linked_table"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(canaries.outside)
    spark.sql(f"CREATE TABLE lake.{ns}.l (id BIGINT) LOCATION 'file://{link}'")
    try:
        before = state(iceberg_catalog, (ns, "l"))
        canaries.arm()
        refused_call(spark, f"{ns}.l", "", "is a symbolic link")
        canaries.assert_intact()
        assert state(iceberg_catalog, (ns, "l")) == before
    finally:
        drop_keeping_files(spark, iceberg_catalog, (ns, "l"))


def test_expire_snapshots_deletes_nothing_through_a_link(spark, ns, iceberg_catalog, canaries):
    """The first snapshot's data folder moved outside the warehouse and linked back: expiring
    that snapshot leaves the link and the files behind it alone."""
    spark.sql(f"CREATE TABLE lake.{ns}.a (id BIGINT)")
    spark.sql(f"INSERT INTO lake.{ns}.a VALUES (1), (2)")
    t = iceberg_catalog.load_table((ns, "a"))
    first = [f.file.file_path for f in t.scan().plan_files()]
    folder = fu.local(first[0]).parent
    spark.sql(f"INSERT OVERWRITE lake.{ns}.a VALUES (3)")
    moved = canaries.outside / "moved"
    shutil.move(folder, moved)
    folder.symlink_to(moved)
    canaries.keep(moved)
    canaries.arm()
    row = spark.sql(f"CALL lake.system.expire_snapshots(table => '{ns}.a', older_than => {FUTURE}, "
                    "retain_last => 1)").first()
    assert row.deleted_data_files_count == 0 and row.deleted_manifest_lists_count == 1
    assert folder.is_symlink()
    canaries.assert_intact()
    assert state(iceberg_catalog, (ns, "a"))[2] == [3]


# ---- locations that hold other tables ------------------------------------------------------------


def test_a_location_that_holds_other_tables_is_refused(spark, ns, warehouse, iceberg_catalog, canaries):
    w = Path(warehouse)
    other_ns = f"{ns}x"
    spark.sql(f"CREATE NAMESPACE lake.{other_ns}")
    made = {p for p in ("metadata", "data") if not (w / p).exists()}
    cases = [  # (namespace, table, location, what the error names)
        (ns, "p", f"file://{w}/{ns}", f"contains the location of table lake.{ns}.sib"),  # sib's parent
        (other_ns, "q", f"file://{w}/{ns}", f"contains the location of table lake.{ns}.sib"),  # from elsewhere
        (ns, "same", canaries.sibling.location(), f"is also the location of table lake.{ns}.sib"),
        (ns, "w", f"file://{w}", "is the warehouse root"),
    ]
    try:
        for space, name, location, named in cases:
            try:
                # lakerules refuses to make such a table; another tool may have made it
                refused(spark, f"CREATE TABLE lake.{space}.{name} (id BIGINT) LOCATION '{location}'",
                        "Choose another location; nothing was changed")
                assert not iceberg_catalog.table_exists((space, name))
                make_table(spark, iceberg_catalog, space, name, [1, 2], location=location, elsewhere=True)
                before = state(iceberg_catalog, (space, name))
                canaries.arm()
                refused_call(spark, f"{space}.{name}", "", named)
                refused(spark, f"CALL lake.system.expire_snapshots(table => '{space}.{name}', "
                               f"older_than => {FUTURE}, retain_last => 1)", named, "nothing was deleted")
                refused(spark, f"DROP TABLE lake.{space}.{name} PURGE", named, "DROP TABLE without PURGE")
                canaries.assert_intact()
                assert state(iceberg_catalog, (space, name)) == before
            finally:
                drop_keeping_files(spark, iceberg_catalog, (space, name))
        # a table inside sib's folder: sib now holds another table's location
        refused(spark, f"CREATE TABLE lake.{ns}.inner (id BIGINT) LOCATION '{canaries.sibling.location()}/data/inner'",
                f"is inside the location of table lake.{ns}.sib")
        make_table(spark, iceberg_catalog, ns, "inner", [5], location=f"{canaries.sibling.location()}/data/inner",
                   elsewhere=True)
        before = state(iceberg_catalog, (ns, "sib"))
        canaries.arm()
        refused_call(spark, f"{ns}.sib", "", f"contains the location of table lake.{ns}.inner")
        refused(spark, f"DROP NAMESPACE lake.{ns} CASCADE", f"lake.{ns}.inner", "DROP TABLE without PURGE")
        canaries.assert_intact()
        assert state(iceberg_catalog, (ns, "sib")) == before
        assert iceberg_catalog.table_exists((ns, "inner"))
    finally:
        drop_keeping_files(spark, iceberg_catalog, (ns, "inner"))
        spark.sql(f"DROP NAMESPACE IF EXISTS lake.{other_ns} CASCADE")
        for p in made:
            shutil.rmtree(w / p, ignore_errors=True)
    canaries.assert_intact()


def test_another_catalogs_table_below_the_location_is_refused(spark, ns, iceberg_catalog, canaries):
    """A table the catalog's database does not know (its metadata JSON) below a table's folder."""
    a = make_table(spark, iceberg_catalog, ns, "a", [1])
    root = fu.local(a.location())
    canaries.add(root / "data" / "foreign" / "metadata" / "00000-x.metadata.json", "{}")
    before = state(iceberg_catalog, (ns, "a"))
    canaries.arm()
    refused_call(spark, f"{ns}.a", "", "another table's metadata")
    canaries.assert_intact()
    assert state(iceberg_catalog, (ns, "a")) == before


# ---- files named by the metadata outside the table -----------------------------------------------


def test_files_the_metadata_names_outside_the_table_are_never_deleted(spark, ns, iceberg_catalog, canaries):
    spark.sql(f"CREATE TABLE lake.{ns}.a (id BIGINT)")
    t = iceberg_catalog.load_table((ns, "a"))
    outside = canaries.outside / "imported.parquet"
    pq.write_table(pa.table({"id": pa.array([7], pa.int64())}), outside)
    canaries.keep(outside)
    t.add_files([str(outside)])
    t = iceberg_catalog.load_table((ns, "a"))
    t.append(pa.table({"id": pa.array([8], pa.int64())}, schema=t.schema().as_arrow()))
    spark.sql(f"DELETE FROM lake.{ns}.a WHERE id = 7")  # drops the imported file from the table
    try:
        before = state(iceberg_catalog, (ns, "a"))
        assert before[2] == [8]
        canaries.arm()
        # the expiry and the purge go ahead; the file outside the table's location is skipped
        spark.sql(f"CALL lake.system.expire_snapshots(table => '{ns}.a', older_than => {FUTURE}, "
                  "retain_last => 1)").collect()
        canaries.assert_intact()
        assert state(iceberg_catalog, (ns, "a"))[2] == [8]
        assert [r.id for r in spark.sql(f"SELECT id FROM lake.{ns}.a").collect()] == [8]
        spark.sql(f"DROP TABLE lake.{ns}.a PURGE")
        canaries.assert_intact()
        assert not iceberg_catalog.table_exists((ns, "a"))
    finally:
        if iceberg_catalog.table_exists((ns, "a")):
            drop_keeping_files(spark, iceberg_catalog, (ns, "a"))


def test_the_clean_up_after_a_failed_write_stays_in_the_table(spark, ns, iceberg_catalog, canaries):
    from lakerules.write import files as write

    a = make_table(spark, iceberg_catalog, ns, "a", [1])
    root = fu.local(a.location())
    own = root / "data" / "failed-write" / "part-0.parquet"
    own.parent.mkdir(parents=True)
    own.write_text("a failed write's file")
    (root / "data" / "linked").symlink_to(canaries.outside)
    sib_file = next(p for p in canaries.files if str(p).startswith(str(fu.local(canaries.sibling.location()))))
    files = [types.SimpleNamespace(file_path=p) for p in [
        f"file://{own}", str(canaries.outside_file), f"{a.location()}/../sib/{sib_file.relative_to(fu.local(canaries.sibling.location()))}",
        f"{a.location()}/data/linked/canary.parquet", f"file://{canaries.root_file}"]]
    write.discard(a, files, RuntimeError("the commit was rejected"))
    assert not own.exists()
    canaries.assert_intact()
    write._delete_dir(spark, a, f"{a.location()}/data/linked")
    write._delete_dir(spark, a, f"{a.location()}/data/linked/folder")
    write._delete_dir(spark, a, f"{a.location()}/../sib")
    write._delete_dir(spark, a, str(canaries.outside))
    assert (root / "data" / "linked").is_symlink()
    canaries.assert_intact()
