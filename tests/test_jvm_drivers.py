"""JVM drivers: spark-sql (spark-submit with `--jars`) and a Java application get the registry
from the configuration alone (the shim starts `python -m lakerules.jvm_driver`), and read and
write the same tables as the Python API; a wrong interpreter is a clear error, fixed by SET."""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import pyspark
import pytest

import lakerules
from lakerules.sql import statements

SPARK_HOME = Path(pyspark.__file__).parent
JARS = SPARK_HOME / "jars"
APP_SOURCE = Path(__file__).parent / "LakeApp.java"
TIMEOUT = 600


@functools.lru_cache(maxsize=None)
def lake_flags(warehouse) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "lakerules", "conf", "--warehouse", str(warehouse)],
                         capture_output=True, text=True, check=True).stdout
    return tuple(shlex.split(out))


def conf_pairs(flags: list[str]) -> dict[str, str]:
    """The --conf settings of spark-submit flags."""
    return dict(flags[i + 1].split("=", 1) for i, f in enumerate(flags) if f == "--conf")


def jvm_env() -> dict[str, str]:
    """This environment without anything that would name an interpreter or a gateway for the JVM."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    env["SPARK_HOME"] = str(SPARK_HOME)
    return env


def lake_statements(ns: str) -> list[str]:
    """Every kind of lake statement, ending with the SELECT whose rows are compared."""
    t = f"lake.{ns}.ev"
    return [
        f"CREATE NAMESPACE lake.{ns}",
        f"CREATE TABLE {t} (id BIGINT, ts TIMESTAMP, kind STRING) PARTITIONED BY (days(ts))",
        f"""INSERT INTO {t} VALUES (1, TIMESTAMP'2026-01-01 10:00:00', 'a'),
            (2, TIMESTAMP'2026-01-02 11:00:00', 'b'), (3, TIMESTAMP'2026-01-02 12:00:00', NULL),
            (5, TIMESTAMP'2026-01-02 13:00:00', 'spam'), (6, TIMESTAMP'2026-01-01 14:00:00', 'c')""",
        f"ALTER TABLE {t} ADD PARTITION FIELD bucket(4, id)",
        f"""INSERT INTO {t} VALUES (4, TIMESTAMP'2026-01-03 00:00:00', 'a'),
            (7, TIMESTAMP'2026-01-03 01:00:00', 'spam'), (8, TIMESTAMP'2026-01-03 02:00:00', 'd')""",
        f"INSERT INTO {t} VALUES (9, TIMESTAMP'2026-01-03 03:00:00', 'e')",
        f"DELETE FROM {t} WHERE kind = 'spam'",
        f"UPDATE {t} SET kind = upper(kind) WHERE id IN (2, 8)",
        f"""MERGE INTO {t} AS x USING (SELECT 9 AS id, 'merged' AS kind UNION ALL
            SELECT 10, 'new') AS s ON x.id = s.id
            WHEN MATCHED THEN UPDATE SET kind = s.kind
            WHEN NOT MATCHED THEN INSERT (id, ts, kind) VALUES (s.id, TIMESTAMP'2026-01-03 04:00:00', s.kind)""",
        f"OPTIMIZE {t} ZORDER BY (id, kind)",
        # a replace is one commit on the table, from any driver (lakerules.iceberg.replace)
        f"CREATE TABLE lake.{ns}.rp AS SELECT id FROM {t} WHERE id < 3",
        f"CREATE OR REPLACE TABLE lake.{ns}.rp PARTITIONED BY (bucket(2, id)) AS SELECT id FROM {t} WHERE id >= 3",
        # a format-version 3 table: deletion vectors, rows keeping their _row_id through UPDATE,
        # MERGE and OPTIMIZE
        f"CREATE TABLE {t}3 (id BIGINT, kind STRING) TBLPROPERTIES ('format-version'='3')",
        f"INSERT INTO {t}3 VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')",
        f"DELETE FROM {t}3 WHERE id = 2",
        f"UPDATE {t}3 SET kind = 'u' WHERE id = 3",
        f"""MERGE INTO {t}3 AS x USING (SELECT 4 AS id, 'm' AS kind UNION ALL SELECT 5, 'n') AS s ON x.id = s.id
            WHEN MATCHED THEN UPDATE SET kind = s.kind WHEN NOT MATCHED THEN INSERT *""",
        f"OPTIMIZE {t}3",
        V3_SELECT.format(t=f"{t}3"),
        SELECT.format(t=t),
    ]


V3_SELECT = "SELECT 'v3row', id, kind, _row_id FROM {t} ORDER BY id"
V3_EXPECTED = [("1", "a"), ("3", "u"), ("4", "m"), ("5", "n")]


def check_v3(spark, iceberg_catalog, ns: str, rows: list[tuple]) -> None:
    """The v3 table's rows as the JVM driver printed them ('v3row', id, kind, _row_id), against
    what the Python API and pyiceberg read: the same rows and row ids, the inserted row's id fresh."""
    assert [r[1:3] for r in rows] == V3_EXPECTED
    ids = {r[1]: int(r[3]) for r in rows}
    ours = spark.sql(V3_SELECT.format(t=f"lake.{ns}.ev3")).collect()
    assert {str(r[1]): r[3] for r in ours} == ids
    assert sorted(ids[k] for k in ("1", "3", "4")) == sorted(set(ids[k] for k in ("1", "3", "4")))
    assert max(ids[k] for k in ("1", "3", "4")) < 4 <= ids["5"]  # 1, 3, 4 kept the ids the INSERT gave them
    t = iceberg_catalog.load_table(f"{ns}.ev3")
    assert t.format_version == 3 and t.current_snapshot().summary.operation.value == "replace"
    assert sorted((str(r["id"]), r["kind"]) for r in t.scan().to_arrow().to_pylist()) == V3_EXPECTED


SELECT = "SELECT 'row', id, CAST(ts AS STRING), kind FROM {t} ORDER BY id"
EXPECTED = [
    ("row", "1", "2026-01-01 10:00:00", "a"),
    ("row", "2", "2026-01-02 11:00:00", "B"),
    ("row", "3", "2026-01-02 12:00:00", None),
    ("row", "4", "2026-01-03 00:00:00", "a"),
    ("row", "6", "2026-01-01 14:00:00", "c"),
    ("row", "8", "2026-01-03 02:00:00", "D"),
    ("row", "9", "2026-01-03 03:00:00", "merged"),
    ("row", "10", "2026-01-03 04:00:00", "new"),
]


def python_api_rows(spark, table: str) -> list[tuple]:
    return [tuple(None if v is None else str(v) for v in r) for r in spark.sql(SELECT.format(t=table)).collect()]


def check_table(spark, iceberg_catalog, ns: str) -> None:
    """What the JVM driver wrote, as the Python API and pyiceberg read it."""
    assert python_api_rows(spark, f"lake.{ns}.ev") == EXPECTED
    t = iceberg_catalog.load_table(f"{ns}.ev")
    assert [str(f.transform) for f in t.spec().fields] == ["day", "bucket[4]"]
    assert t.current_snapshot().summary["engine-name"] == "lakerules"
    assert t.current_snapshot().summary.operation.value == "replace"  # the OPTIMIZE
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [int(r[1]) for r in EXPECTED]
    rp = iceberg_catalog.load_table(f"{ns}.rp")
    assert len(rp.snapshots()) == 2 and rp.current_snapshot().parent_snapshot_id is None
    assert sorted(rp.scan().to_arrow().column("id").to_pylist()) == [int(r[1]) for r in EXPECTED if int(r[1]) >= 3]


def gone(pid: int, wait: float = 15.0) -> bool:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return True
        if "\nState:\tZ" in state:
            return True
        time.sleep(0.2)
    return False


# ---- a PySpark driver that attached in-process starts nothing ------------------------------------


def test_pyspark_driver_starts_no_second_process(spark, ns):
    spark.sql(f"CREATE TABLE lake.{ns}.t (id BIGINT)")
    spark.sql(f"INSERT INTO lake.{ns}.t VALUES (1)")
    assert spark.table(f"lake.{ns}.t").count() == 1
    assert spark._jvm.io.lakerules.PythonBackend.pid() == -1


def test_jar_routes_are_the_registrys():
    """The parser routes a JVM driver's first statement with the ROUTES the jar was built with."""
    with zipfile.ZipFile(lakerules.jar_path()) as jar:
        built = jar.read("io/lakerules/routes.regex").decode()
    assert built == statements.ROUTES, "the shim jar is stale: rebuild it with `make shim`"


def test_jvm_driver_by_hand_says_what_it_is():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    r = subprocess.run([sys.executable, "-m", "lakerules.jvm_driver"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 2 and "PYSPARK_GATEWAY_PORT" in r.stderr


# ---- the JVM drivers, started together ------------------------------------------------------------


class Started:
    """A driver process started in the background, its output in files (a pipe nobody reads would
    stall a chatty JVM)."""

    def __init__(self, cmd: list[str], cwd: Path):
        cwd.mkdir(parents=True, exist_ok=True)
        self.out, self.err = cwd / "stdout", cwd / "stderr"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=jvm_env(), cwd=cwd)

    def result(self) -> subprocess.CompletedProcess:
        self.proc.wait(timeout=TIMEOUT)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, self.out.read_text(),
                                           self.err.read_text())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def drivers(spark, warehouse, tmp_path_factory, request):
    """spark-sql and the Java application, each a JVM of its own, started at once (each spends
    most of its time starting a JVM, Spark and a Python registry) and checked by the tests below,
    each in namespaces of its own. Their statements are the Python API's (EXPECTED is what the
    Python API reads after them, tests/test_foundation.py and the others check that API)."""
    work = tmp_path_factory.mktemp("drivers")
    names = {k: f"{k}_{uuid.uuid4().hex[:8]}" for k in ("cli", "app", "pre")}
    # a table that exists before the Java application starts
    spark.sql(f"CREATE NAMESPACE lake.{names['pre']}")
    spark.sql(f"CREATE TABLE lake.{names['pre']}.t (id BIGINT)")
    started: dict[str, Started] = {}
    try:
        started["cli"] = Started(spark_sql_command(warehouse, names["cli"]), work / "cli")
        app = request.getfixturevalue("app")  # compiled while spark-sql starts
        started["app"] = Started(java_app_command(spark, warehouse, app, names["app"], f"lake.{names['pre']}.t",
                                                  work / "app"), work / "app")
        yield names, started, work
    finally:
        for p in started.values():
            p.stop()
        for n in names.values():
            spark.sql(f"DROP NAMESPACE IF EXISTS lake.{n} CASCADE")


# ---- spark-sql --------------------------------------------------------------------------------------


def spark_sql_command(warehouse, ns: str) -> list[str]:
    flags = lake_flags(warehouse)
    assert f"spark.lakerules.python={sys.executable}" in flags
    return [str(SPARK_HOME / "bin" / "spark-sql"), "--master", "local[2]", *flags,
            "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.session.timeZone=UTC",
            "--conf", "spark.sql.shuffle.partitions=2",
            # the session catalog is not what is tested: no Derby metastore in the working folder
            "--conf", "spark.sql.catalogImplementation=in-memory",
            "-e", "; ".join(lake_statements(ns)) + ";"]


def test_spark_sql_cli(spark, iceberg_catalog, drivers):
    names, started, _ = drivers
    r = started["cli"].result()
    assert r.returncode == 0, r.stderr[-4000:]
    rows = [tuple(None if v == "NULL" else v for v in line.split("\t"))
            for line in r.stdout.splitlines() if line.startswith("row\t")]
    assert rows == EXPECTED
    check_table(spark, iceberg_catalog, names["cli"])
    check_v3(spark, iceberg_catalog, names["cli"],
             [tuple(line.split("\t")) for line in r.stdout.splitlines() if line.startswith("v3row\t")])


# ---- a Java application ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def app(tmp_path_factory) -> Path:
    """LakeApp compiled with javac against pyspark's jars and the shim jar; returns its jar."""
    out = tmp_path_factory.mktemp("app")
    classes = out / "classes"
    cp = f"{JARS}/*{os.pathsep}{lakerules.jar_path()}"
    subprocess.run(["javac", "-d", str(classes), "-cp", cp, str(APP_SOURCE)], check=True, timeout=TIMEOUT)
    jar = out / "lake-app.jar"
    subprocess.run(["jar", "--create", "--file", str(jar), "-C", str(classes), "."], check=True, timeout=TIMEOUT)
    return jar


def results(stdout: str) -> dict[int, dict]:
    """LakeApp's report: per statement, its rows, or its error, or the pid it printed."""
    out: dict[int, dict] = {}
    for line in stdout.splitlines():
        head, _, rest = line.partition("\t")
        kind, _, n = head.partition(" ")
        if kind not in ("ROW", "OK", "ERROR", "PID") or not n.isdigit():
            continue
        r = out.setdefault(int(n), {"rows": []})
        if kind == "ROW":
            r["rows"].append(tuple(None if v == "null" else v for v in rest.split("\t")))
        elif kind == "OK":
            r["ok"] = True
        elif kind == "ERROR":
            r["error"] = rest.replace("\\n", "\n")
        else:
            r["pid"] = int(rest)
    return out


def interpreters(work: Path) -> tuple[Path, Path]:
    """A Python that does not exist, and one that cannot import lakerules."""
    no_lakerules = work / "python-without-site-packages"
    if not no_lakerules.exists():
        work.mkdir(parents=True, exist_ok=True)
        no_lakerules.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S "$@"\n')
        no_lakerules.chmod(0o755)
    return work / "no-such-python", no_lakerules


FIXED = 10  # the step from which the Java application has a working interpreter


def java_app_command(spark, warehouse, app, ns: str, pre: str, work: Path) -> list[str]:
    """A plain JVM embedding Spark, configured with an interpreter that does not exist: first
    the wrong interpreters' errors, then, fixed by SET, every lake statement, and the registry
    process killed in the middle of one."""
    missing, no_lakerules = interpreters(work)
    conf = {**conf_pairs(lake_flags(warehouse)), "spark.master": "local[2]", "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC", "spark.sql.shuffle.partitions": "2",
            "spark.lakerules.python": str(missing),
            # executors need no Python for lakerules: a Python worker would fail every statement
            "spark.pyspark.python": str(work / "no-python-on-executors")}
    steps = [
        "SELECT 42",
        "EXPLAIN SELECT 42",
        "EXPLAIN SELEC 42",  # a syntax error of a routed statement that names no lake catalog
        f"SELECT * FROM {pre}",
        f"ALTER TABLE {pre} ADD PARTITION FIELD bucket(2, id)",
        "!pid",
        "SELECT 43",
        f"SET spark.lakerules.python={no_lakerules}",
        f"SELECT * FROM {pre}",
        # fixed: the next lake statement starts the registry (a failed start is not remembered)
        f"SET spark.lakerules.python={sys.executable}",
        # FIXED: an EXPLAIN of a write is the first lake statement that runs: the registry
        # starts, and nothing runs
        f"EXPLAIN INSERT INTO {pre} VALUES (9)",
        "!pid",
        *lake_statements(ns),
        # the registry process dies in the middle of a statement: that statement fails clearly...
        f"""!kill-during INSERT INTO lake.{ns}.ev SELECT id + 100, TIMESTAMP'2026-01-05 00:00:00', 'slow'
            FROM range(1) WHERE java_method('java.lang.Thread', 'sleep', 3000L) IS NULL""",
        # ...and the next one starts a new process
        f"SELECT count(*) FROM lake.{ns}.ev",
        "!pid",
    ]
    assert steps[FIXED].startswith("EXPLAIN INSERT")
    # A plain JVM embedding Spark: the JVM options spark-submit would add, from Spark itself.
    jvm_options = spark._jvm.org.apache.spark.launcher.JavaModuleOptions.defaultModuleOptions().split()
    cp = os.pathsep.join([f"{JARS}/*", lakerules.jar_path(), str(app)])
    # and the tests' own (conftest.py puts them where spark-submit takes them)
    jvm_options += shlex.split(os.environ.get("SPARK_SUBMIT_OPTS", ""))
    return ["java", *jvm_options, "-cp", cp, "LakeApp", *(f"{k}={v}" for k, v in conf.items()), "--", *steps]


def test_missing_interpreter_is_a_clear_error(iceberg_catalog, drivers):
    names, started, work = drivers
    r = started["app"].result()
    assert r.returncode == 0, r.stderr[-4000:]
    res = results(r.stdout)
    missing, no_lakerules = interpreters(work / "app")
    # non-lake statements: Spark's answers and errors, no process started for them
    assert res[0]["rows"] == [("42",)]
    assert "Physical Plan" in res[1]["rows"][0][0]
    assert "PARSE_SYNTAX_ERROR" in res[2]["error"] and "lakerules" not in res[2]["error"], res[2]
    for i in (3, 4):  # a query, and a statement only lakerules parses
        error = res[i]["error"]
        assert f"could not run the Python interpreter '{missing}'" in error, error
        assert "--conf spark.lakerules.python=" in error
    assert res[5]["pid"] == -1  # nothing started
    assert res[6]["rows"] == [("43",)]
    error = res[8]["error"]
    assert f"'{no_lakerules} -m lakerules.jvm_driver' exited with code 1" in error, error
    assert "No module named 'lakerules'" in error and "spark.lakerules.python" in error
    assert not iceberg_catalog.load_table(f"{names['pre']}.t").spec().fields  # the ALTER did nothing


def test_java_application(spark, iceberg_catalog, drivers):
    names, started, _ = drivers
    ns, pre = names["app"], f"{names['pre']}.t"
    r = started["app"].result()
    assert r.returncode == 0, r.stderr[-4000:]
    res = results(r.stdout)
    assert "lakerules plan (not run)" in res[FIXED]["rows"][0][0], res[FIXED]
    assert iceberg_catalog.load_table(pre).current_snapshot() is None
    first = res[FIXED + 1]["pid"]
    assert first > 0
    n = len(lake_statements(ns))
    for i in range(FIXED + 2, FIXED + 2 + n):
        assert res[i].get("ok"), res[i]
    assert res[FIXED + 1 + n]["rows"] == EXPECTED
    check_v3(spark, iceberg_catalog, ns, res[FIXED + n]["rows"])
    killed = res[FIXED + 2 + n]["error"]
    assert f"'{sys.executable} -m lakerules.jvm_driver', pid {first}) exited" in killed, killed
    assert "spark.lakerules.python" in killed
    assert res[FIXED + 3 + n]["rows"] == [(str(len(EXPECTED)),)]  # the killed statement committed nothing
    second = res[FIXED + 4 + n]["pid"]
    assert second > 0 and second != first
    check_table(spark, iceberg_catalog, ns)
    # the Python process ends with the JVM
    assert gone(second), f"the registry process {second} outlived its JVM"
