"""Faults at each step of each write path (INSERT, DELETE, UPDATE, MERGE, OPTIMIZE, delete_by_key)
leave the table at its previous snapshot with every row readable by lakerules, pyiceberg and
DuckDB; the files a failed statement leaves are exactly what remove_orphan_files lists, and
removes, touching nothing live.

In this process: an error after the files are written and before the commit, the catalog
rejecting the commit, and a commit whose outcome the catalog does not report (landed or not).
In a process of its own (fault_driver.py): task attempts failing after writing their files
(retried by Spark), and the process killed before its commit and inside the catalog's commit.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pyspark
import pytest
from pyiceberg.exceptions import CommitStateUnknownException
from pyiceberg.manifest import DataFileContent

import faults_util as fu
import lakerules
from lakerules.write import commit

HERE = Path(__file__).parent
FUTURE = "TIMESTAMP '2999-01-01 00:00:00'"


class InjectedFault(RuntimeError):
    pass


@pytest.fixture
def recent_orphans(spark):
    """remove_orphan_files may remove files of any age (the tests run nothing concurrently)."""
    spark.conf.set("spark.lakerules.removeOrphanFiles.minAge", "0")
    yield
    spark.conf.unset("spark.lakerules.removeOrphanFiles.minAge")


def orphans(spark, name: str, dry_run: bool = True) -> set[str]:
    rows = spark.sql(f"CALL lake.system.remove_orphan_files(table => '{name}', older_than => {FUTURE}, "
                     f"dry_run => {str(dry_run).lower()})").collect()
    return {str(fu.local(r.orphan_file_location)) for r in rows}


def state(catalog, name: str):
    t = catalog.load_table(name)
    return t.metadata_location, t.current_snapshot().snapshot_id, t.location()


@contextmanager
def catalog_rejects(warehouse, ns: str, name: str):
    """The SQL catalog's optimistic UPDATE of this table's row changes nothing (a SQLite trigger
    ignores it), as when another process committed first: the catalog raises CommitFailedException."""
    db = sqlite3.connect(Path(warehouse) / "catalog.db")
    db.execute(f"""CREATE TRIGGER lakerules_test_reject BEFORE UPDATE ON iceberg_tables
                   WHEN OLD.table_namespace = '{ns}' AND OLD.table_name = '{name}'
                   BEGIN SELECT RAISE(IGNORE); END""")
    db.commit()
    try:
        yield
    finally:
        db.execute("DROP TRIGGER lakerules_test_reject")
        db.commit()
        db.close()


@contextmanager
def outcome_unknown(landed: bool):
    """The catalog's commit raises CommitStateUnknownException, after committing (landed) or not."""
    catalog = lakerules._backend.catalogs.get("lake")
    original = catalog.commit_table

    def commit_table(table, requirements, updates):
        if landed:
            original(table, requirements, updates)
        raise CommitStateUnknownException("injected: the catalog's response was lost")

    catalog.commit_table = commit_table
    try:
        yield
    finally:
        del catalog.commit_table


@contextmanager
def error_before_commit():
    def fail(table):
        raise InjectedFault("injected: an error after the files were written, before the commit")

    commit.before_commit = fail
    try:
        yield
    finally:
        commit.before_commit = None


def same_rows(engines, table: str, rows) -> None:
    """Every engine reads exactly rows; pyiceberg cannot read equality deletes (delete_by_key)."""
    cat = engines.catalog.load_table(table.split(".", 1)[1])
    eq = any(e.data_file.content == DataFileContent.EQUALITY_DELETES
             for m in cat.current_snapshot().manifests(cat.io) for e in m.fetch_manifest_entry(cat.io))
    if eq:
        ours = engines.lakerules(table, "id, v, p")
        assert ours == sorted(rows, key=lambda r: tuple((v is None, str(v)) for v in r))
        assert engines.duckdb(table, "id, v, p") == ours, "DuckDB reads differently"
    else:
        engines.assert_same(table, "id, v, p", expected=rows)


def check_failed(spark, engines, iceberg_catalog, ns, name, before, rows, files_before, expect_left: bool):
    """The table is as before, every row readable; remove_orphan_files lists exactly the files
    the failed statement left and removes them, and the table is still whole."""
    full = f"lake.{ns}.{name}"
    assert state(iceberg_catalog, f"{ns}.{name}") == before
    left = fu.visible_files(before[2]) - files_before
    assert bool(left) == expect_left, left
    assert orphans(spark, f"{ns}.{name}") == left
    assert orphans(spark, f"{ns}.{name}", dry_run=False) == left
    assert fu.visible_files(before[2]) == files_before
    assert fu.temporary_dirs(before[2]) == []
    same_rows(engines, full, rows)
    return len(left)


@pytest.mark.parametrize("path", fu.PATHS)
def test_failed_commits_leave_the_table_and_only_orphans(spark, ns, warehouse, iceberg_catalog, engines,
                                                         recent_orphans, path):
    name = "t"
    full = f"lake.{ns}.{name}"
    rows = fu.create(spark, full)
    before = state(iceberg_catalog, f"{ns}.{name}")
    files_before = fu.visible_files(before[2])
    assert orphans(spark, f"{ns}.{name}") == set()

    # 1. an error after the files were written: they are deleted, nothing is left
    with error_before_commit(), pytest.raises(Exception, match="injected: an error after the files"):
        fu.run(spark, path, full)
    left = [check_failed(spark, engines, iceberg_catalog, ns, name, before, rows, files_before, expect_left=False)]

    # 2. the catalog rejects the commit (after pyiceberg's retry): the data files and manifests are
    # deleted; the metadata JSON files the SQL catalog wrote for each attempt are left
    with catalog_rejects(warehouse, ns, name), pytest.raises(Exception, match="the catalog rejected the commit"):
        fu.run(spark, path, full)
    left += [check_failed(spark, engines, iceberg_catalog, ns, name, before, rows, files_before, expect_left=True)]

    # 3. the catalog's answer is lost and the commit did not land: everything written is kept
    # (the table might name it), and remove_orphan_files removes it
    with outcome_unknown(landed=False), pytest.raises(Exception, match="does not say whether it landed"):
        fu.run(spark, path, full)
    left += [check_failed(spark, engines, iceberg_catalog, ns, name, before, rows, files_before, expect_left=True)]

    # 4. the same, but the commit landed: the files it names must still be there (before the fix,
    # the statement deleted them and the table could not be read)
    with outcome_unknown(landed=True), pytest.raises(Exception, match="does not say whether it landed"):
        fu.run(spark, path, full)
    assert state(iceberg_catalog, f"{ns}.{name}")[1] != before[1]
    same_rows(engines, full, fu.expected(path, rows))
    assert orphans(spark, f"{ns}.{name}") == set()
    print(f"{path}: files left and removed after an error before the commit, a rejected commit, "
          f"an unknown outcome: {left}")


# ---- in a process of its own ------------------------------------------------------------------


@pytest.fixture(scope="module")
def test_classes(tmp_path_factory):
    """FailFirstCommit compiled against pyspark's jars."""
    out = tmp_path_factory.mktemp("fault-classes")
    jars = Path(pyspark.__file__).parent / "jars"
    subprocess.run(["javac", "--release", "17", "-nowarn", "-d", str(out), "-cp", f"{jars}/*",
                    str(HERE / "FailFirstCommit.java")], check=True, timeout=300, capture_output=True)
    return out


def _tables(spark, iceberg_catalog, ns, names):
    made = {}
    for name in names:
        rows = fu.create(spark, f"lake.{ns}.{name}")
        before = state(iceberg_catalog, f"{ns}.{name}")
        made[name] = (rows, before, fu.visible_files(before[2]))
    return made


@pytest.fixture(scope="module", autouse=True)
def driver_started(spark, warehouse, test_classes, tmp_path_factory):
    """One process (fault_driver.py) runs every write path three times, each on a table of its
    own: once to its commit, with every write task's first attempt failing after it wrote its
    files; then once stopped before its commit and once inside the catalog's commit, all at
    once, and the process is killed with its JVM (driver_run). It starts with this module, so
    that its JVM works while the in-process tests above run; their tables are others."""
    from pyiceberg.catalog import load_catalog

    ns = "faults_driver"
    spark.sql(f"CREATE NAMESPACE lake.{ns}")
    catalog = load_catalog("lake", **lakerules.embedded_catalog(warehouse))
    names = [f"{path}_{point}" for point in ("retry", "before", "commit") for path in fu.PATHS]
    made = _tables(spark, catalog, ns, names)
    work = tmp_path_factory.mktemp("fault-driver")
    log, out, stderr = work / "faults.log", work / "driver.out", work / "driver.err"
    with out.open("w") as o, stderr.open("w") as e:
        proc = subprocess.Popen(  # a session of its own: killed with its JVM
            [sys.executable, str(HERE / "fault_driver.py"), str(warehouse), ns, *names],
            stdout=o, stderr=e, text=True, start_new_session=True,
            env={**os.environ, "LAKERULES_TEST_CLASSES": str(test_classes), "LAKERULES_TEST_FAULT_LOG": str(log)},
        )
    try:
        yield ns, made, proc, out, stderr, log
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        spark.sql(f"DROP NAMESPACE IF EXISTS lake.{ns} CASCADE")


@pytest.fixture(scope="module")
def driver_run(driver_started):
    """The fault driver once it has stopped every write (READY), killed with its JVM."""
    ns, made, proc, out, stderr, log = driver_started
    deadline = time.time() + 900
    lines: list[str] = []
    while time.time() < deadline:
        lines = out.read_text().splitlines()
        if (lines and lines[-1].startswith(("READY", "FAILED"))) or proc.poll() is not None:
            break
        time.sleep(0.2)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert lines and lines[-1].startswith("READY"), (lines, stderr.read_text()[-3000:])
    return ns, made, log.read_text().splitlines()


def test_retried_write_tasks_write_each_row_once(spark, iceberg_catalog, engines, recent_orphans, driver_run):
    ns, made, failures = driver_run
    for name, (rows, before, _) in made.items():
        if not name.endswith("_retry"):
            continue
        path = name.rsplit("_", 1)[0]
        # every write of the statement had its tasks fail once, and Spark ran them again
        assert any(fu.local(line.split()[0]).is_relative_to(fu.local(before[2])) for line in failures), name
        same_rows(engines, f"lake.{ns}.{name}", fu.expected(path, rows))
        assert fu.duplicate_deletes(iceberg_catalog.load_table(f"{ns}.{name}")) == []
        assert orphans(spark, f"{ns}.{name}") == set(), name
        assert fu.temporary_dirs(before[2]) == [], name
    print(f"task attempts failed after writing their files, and run again: {len(failures)}")


def test_killed_before_and_during_commit(spark, iceberg_catalog, engines, recent_orphans, driver_run):
    ns, made, _ = driver_run
    for name, (rows, before, files_before) in made.items():
        if name.endswith("_retry"):
            continue
        left = fu.visible_files(before[2]) - files_before
        assert any("/data/" in p for p in left), (name, left)  # the files of a statement never committed
        if name.endswith("_commit"):  # manifests and the manifest list were written too
            assert any("/metadata/" in p for p in left), (name, left)
        n = check_failed(spark, engines, iceberg_catalog, ns, name, before, rows, files_before, expect_left=True)
        print(f"{name}: {n} files left and removed")


def test_files_of_abandoned_task_attempts_are_never_committed(spark, tmp_path):
    """A write lists its files with every hidden part of their path skipped: files a task attempt
    Spark abandoned leaves under _temporary/ (after the job committed) would be rows twice."""
    from lakerules.write import files as write

    for rel in ["p=1/part-0.parquet", "__lakerules_part=2/part-1.parquet", "_SUCCESS", "p=1/.part-0.parquet.crc",
                "_temporary/0/_temporary/attempt_1/p=1/part-0.parquet", ".staging/p=1/part-2.parquet"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    expected = [("__lakerules_part=2/part-1.parquet", 1), ("p=1/part-0.parquet", 1)]
    assert write._list_files(spark, f"file://{tmp_path}") == expected
    assert write._list_files_hadoop(spark, f"file://{tmp_path}") == expected
