"""Two writers, each its own process with its own local[1] SparkSession, run random INSERT, DELETE,
UPDATE, MERGE and OPTIMIZE [ZORDER BY] statements on one table at the same time, for a bounded
time (tests/concurrency_worker.py), with the embedded SQLite catalog and with the pyiceberg SQL
catalog on a throwaway PostgreSQL server started here.

Every statement must commit or fail with lakerules' conflict error (nothing committed). Each
snapshot's summary names the statement that made it (spark.lakerules.snapshot-property.*); the
committed statements, replayed in snapshot order on a model of the rows, must give every
snapshot's rows exactly (so no deleted row comes back and no committed insert is lost, at any
point), and the final rows as lakerules, pyiceberg and DuckDB read them.

LAKERULES_CONCURRENCY_SECONDS sets how long the writers run (default 4, and at least 3
statements each; `make soak`: longer), LAKERULES_CONCURRENCY_SEED their random statements.
"""

from __future__ import annotations

import glob
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

import pytest

from concurrency_worker import INITIAL_ROWS, apply

SECONDS = float(os.environ.get("LAKERULES_CONCURRENCY_SECONDS", "4"))
SEED = int(os.environ.get("LAKERULES_CONCURRENCY_SEED", "7"))
WORKER = Path(__file__).with_name("concurrency_worker.py")
RESULTS: dict[str, dict] = {}


# ---- a throwaway PostgreSQL server ------------------------------------------------------------


def postgres_bindir() -> str | None:
    """Debian's server binaries (/usr/lib/postgresql/<version>/bin, newest first), else PATH's."""
    found = glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")
    found.sort(key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else -1)
    if found:
        return os.path.dirname(found[-1])
    pg_ctl = shutil.which("pg_ctl")
    return os.path.dirname(os.path.realpath(pg_ctl)) if pg_ctl else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str], cwd: str) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server on 127.0.0.1 and a free port, in a temporary directory (trust auth,
    user lake, fsync off), stopped and removed afterwards; its SQLAlchemy URI."""
    bindir = postgres_bindir()
    if bindir is None:
        pytest.fail("PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin/pg_ctl, no pg_ctl on PATH): "
                    "`make test` (or `make postgres`) installs Debian's postgresql package")
    root = tempfile.mkdtemp(prefix="lakerules-pg-")
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root: run it as Debian's postgres user
        import pwd

        pw = pwd.getpwnam("postgres")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(root, "data"), free_port()
    pg_ctl = os.path.join(bindir, "pg_ctl")
    _run([*as_user, os.path.join(bindir, "initdb"), "-D", data, "-A", "trust", "-U", "lake", "-E", "UTF8", "--no-sync"], root)
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
    _run([*as_user, pg_ctl, "-D", data, "-l", os.path.join(root, "server.log"), "-w", "-t", "60", "-o", options, "start"], root)
    try:
        yield f"postgresql+psycopg2://lake@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", data, "-m", "immediate", "stop"], cwd=root, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


# ---- the writers ------------------------------------------------------------------------------


class Writer:
    """A concurrency_worker.py process: send it a command, wait for its answer."""

    def __init__(self, index: int, warehouse: Path, catalogs: dict, log_dir: Path):
        self.index = index
        self.stderr_path = log_dir / f"writer{index}.stderr"
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(index), str(SEED + index), str(warehouse), json.dumps(catalogs)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(self.stderr_path, "w"), text=True,
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def send(self, command: str) -> None:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def wait(self, answer: str, timeout: float) -> None:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            line = "(no answer in time)"
        if line != answer:
            tail = self.stderr_path.read_text()[-4000:]
            raise AssertionError(f"writer {self.index}: expected {answer!r}, got {line!r}; its stderr ends:\n{tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=60)
            except Exception:  # noqa: BLE001
                self.proc.kill()


@pytest.fixture(scope="module")
def writers(request, tmp_path_factory):
    """Two writer processes with two lake catalogs: `lake` (SQLite, the embedded default) and `pg`
    (the SQL catalog on PostgreSQL; None when the server could not be started)."""
    import lakerules
    from pyiceberg.catalog import load_catalog

    root = tmp_path_factory.mktemp("concurrency")
    catalogs = {"lake": lakerules.embedded_catalog(root / "sqlite")}
    try:
        uri = request.getfixturevalue("postgres")
        (root / "pg").mkdir()
        catalogs["pg"] = {"type": "sql", "uri": uri, "warehouse": f"file://{root / 'pg'}"}
        pg_error = None
    except BaseException as e:  # noqa: BLE001 - reported by the PostgreSQL test, not here
        pg_error = e
    for name, props in catalogs.items():
        load_catalog(name, **props)  # the catalog's own tables, created once, before two writers race to
    ws = [Writer(i, root / "sqlite", catalogs, root) for i in range(2)]
    try:
        for w in ws:
            w.wait("ready", 240)
        yield ws, catalogs, pg_error, root
    finally:
        for w in ws:
            w.stop()


def run_concurrently(ws, catalogs: dict, catalog: str, root: Path) -> dict:
    """Set up lake table <catalog>.conc.t, run both writers on it, check the history."""
    from pyiceberg.catalog import load_catalog

    table = f"{catalog}.conc.t"
    ws[0].send(f"setup {table}")
    ws[0].wait("done", 300)
    logs = [root / f"{catalog}-writer{w.index}.json" for w in ws]
    for w, log in zip(ws, logs):
        w.send(f"run {table} {SECONDS} {log}")
    for w in ws:
        w.wait("done", SECONDS + 300)
    final_path = root / f"{catalog}-final.json"
    ws[0].send(f"dump {table} {final_path}")
    ws[0].wait("done", 300)
    statements = [e for log in logs for e in json.loads(log.read_text())]
    iceberg = load_catalog(catalog, **catalogs[catalog]).load_table(("conc", "t"))
    lakerules_rows = [tuple(r) for r in json.loads(final_path.read_text())]
    return check_history(iceberg, statements, lakerules_rows)


def check_history(table, statements: list[dict], lakerules_rows: list[tuple]) -> dict:
    by_k = {e["k"]: e for e in statements}
    errors = [e for e in statements if e["status"] not in ("ok", "conflict")]
    assert not errors, "statements failed with other than a conflict error:\n" + "\n".join(
        f"{e['sql']}: {e['error']}" for e in errors[:3])

    # the main branch's snapshots, oldest first; no other snapshot in the table
    chain, s = [], table.current_snapshot()
    while s is not None:
        chain.append(s)
        s = table.snapshot_by_id(s.parent_snapshot_id) if s.parent_snapshot_id is not None else None
    chain.reverse()
    assert {s.snapshot_id for s in table.snapshots()} == {s.snapshot_id for s in chain}
    assert chain[0].summary["test.statement"] == "setup"

    model = [(i, -1) for i in range(INITIAL_ROWS)]
    committed, rows_checked = set(), 0
    for snap in chain[1:]:
        k = int(snap.summary["test.statement"])
        e = by_k[k]
        assert k not in committed, f"statement {k} made two snapshots: {e['sql']}"
        assert e["status"] == "ok", f"statement {k} failed ({e.get('error')}) yet committed snapshot {snap.snapshot_id}"
        committed.add(k)
        model, affected = apply(e, model)
        if affected is not None and e["kind"] in ("update", "merge"):
            assert e["affected"] == affected, f"{e['sql']}: {e['affected']} rows affected, the replay says {affected}"
        got = Counter(tuple(r.values()) for r in table.scan(snapshot_id=snap.snapshot_id).to_arrow().to_pylist())
        assert got == Counter(model), (
            f"snapshot {snap.snapshot_id} of statement {k} ({e['sql']}): rows differ from the replay: "
            f"extra {sorted((got - Counter(model)).elements())[:10]}, missing {sorted((Counter(model) - got).elements())[:10]}"
        )
        rows_checked += len(model)
    # what committed nothing had nothing to do, or failed with a conflict
    for e in statements:
        if e["k"] in committed or e["status"] == "conflict":
            continue
        assert e["kind"] in ("optimize", "zorder") or e.get("affected") == 0, (
            f"statement {e['k']} ({e['sql']}) reported success but no snapshot holds it")
    assert Counter(lakerules_rows) == Counter(model), "lakerules reads the final table differently"

    from conftest import _extension
    import duckdb

    con = duckdb.connect()
    for name in ("avro", "iceberg"):
        con.execute(f"LOAD '{_extension(name)}'")
    duck = con.execute(f"SELECT id, v FROM iceberg_scan('{table.metadata_location}')").fetchall()
    assert Counter(duck) == Counter(model), "DuckDB reads the final table differently"
    kinds = Counter(e["kind"] for e in statements)
    return {
        "statements": len(statements),
        "committed": len(committed),
        "conflicts": sum(e["status"] == "conflict" for e in statements),
        "no-ops": len(statements) - len(committed) - sum(e["status"] == "conflict" for e in statements),
        "snapshots": len(chain),
        "rows checked": rows_checked + 3 * len(model),
        "kinds": dict(sorted(kinds.items())),
        "conflicts by kind": dict(sorted(Counter(e["kind"] for e in statements if e["status"] == "conflict").items())),
    }


def test_two_writers_on_the_sqlite_catalog(writers):
    ws, catalogs, _, root = writers
    RESULTS["sqlite"] = run_concurrently(ws, catalogs, "lake", root)
    print(f"\nconcurrency sqlite ({SECONDS}s, seed {SEED}): {RESULTS['sqlite']}")
    assert RESULTS["sqlite"]["committed"] > 0


def test_two_writers_on_a_postgresql_catalog(writers):
    ws, catalogs, pg_error, root = writers
    if pg_error is not None:
        raise pg_error
    RESULTS["postgresql"] = run_concurrently(ws, catalogs, "pg", root)
    print(f"\nconcurrency postgresql ({SECONDS}s, seed {SEED}): {RESULTS['postgresql']}")
    assert RESULTS["postgresql"]["committed"] > 0


def test_a_commit_waits_for_another_process_locking_the_sqlite_catalog(spark, ns, warehouse):
    """Another process holds the SQLite catalog locked for longer than SQLite's default 5 s wait:
    the INSERT waits for it instead of failing with 'database is locked'."""
    import sqlite3

    table = f"lake.{ns}.locked"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    con = sqlite3.connect(str(warehouse / "catalog.db"), isolation_level=None, check_same_thread=False)
    con.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(6.5, con.rollback)
    release.start()
    try:
        spark.sql(f"INSERT INTO {table} VALUES (1)")
    finally:
        release.join()
        con.close()
    assert [r.id for r in spark.table(table).collect()] == [1]
