"""Spark Connect (issue 15): lake statements sent by a remote client run exactly once.

One Spark Connect server for the module, a separate JVM started with the flags `python -m
lakerules conf` prints, on a free localhost port with a throwaway warehouse. A client runs every
kind of lake statement with `.collect()`, with `.show()` and with no action at all; after every
statement the table, read with pyiceberg from this process, must hold what one run gives: exactly
one new snapshot per write, the rows of one run, the same rows as classic PySpark, and the result
rows of one run (a second run of DELETE finds nothing left to delete and says 0).
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Callable

import pytest

# The client needs pyspark's `connect` extra (grpcio, grpcio-status, googleapis-common-protos,
# zstandard); importing pyspark.sql.connect checks them all. The server needs nothing more.
pytest.importorskip(
    "pyspark.sql.connect.session", exc_type=ImportError,
    reason="the Spark Connect client packages are missing: pip install -e '.[connect]' (make setup installs them)",
)

import lakerules  # noqa: E402
from connect_util import ConnectServer, shown_tables  # noqa: E402

# The server's settings: those of the classic `spark` fixture, so both write the same files.
SERVER_CONF = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    # the session catalog is not what is tested: no Derby metastore in the working folder
    "spark.sql.catalogImplementation": "in-memory",
}
# make test: an action that returns rows and no action at all; make soak adds .show()
VARIANTS = ("collect", "none") if os.environ.get("LAKERULES_PROFILE", "small") == "small" else ("collect", "show", "none")


# ---- the server, the client, pyiceberg on the server's warehouse -----------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Launched without waiting: its JVM boots while the classic reference runs."""
    workdir = tmp_path_factory.mktemp("connect")
    s = ConnectServer(workdir / "warehouse", workdir, SERVER_CONF)
    s.launch()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    """A Spark Connect session, as `SparkSession.builder.remote(url).getOrCreate()` makes one.

    Built with the Connect session class directly: pyspark's generic builder refuses a remote
    session in a process that has a classic one (the `spark` fixture) and marks the whole process
    as Connect-only (SPARK_CONNECT_MODE_ENABLED), which would turn every later classic session of
    the test run into a Connect one."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    try:
        url = server.wait()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    session = RemoteSparkSession.builder.remote(url).create()
    yield session
    session.stop()


@pytest.fixture(scope="module")
def lake(server):
    """pyiceberg on the server's catalog (catalog name `lake`, as the server's Spark catalog)."""
    from pyiceberg.catalog import load_catalog

    return load_catalog("lake", **lakerules.embedded_catalog(server.warehouse))


def look(catalog, ident: str) -> tuple[dict, list[tuple]]:
    """What one table holds, as pyiceberg reads it: its state and its rows (sorted), one scan."""
    t = catalog.load_table(ident)
    snap = t.current_snapshot()
    rows = sorted(tuple(r.values()) for r in t.scan().to_arrow().to_pylist()) if snap else []
    return {
        "snapshots": len(t.snapshots()),
        "operation": snap.summary.operation.value if snap else None,
        "rows": len(rows),
        "partition_fields": [str(f.transform) for f in t.spec().fields],
    }, rows


# ---- results as `show()` prints them ------------------------------------------------------------------


def cell(v) -> str:
    """A collected value as `show(truncate=False)` prints it."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, tuple):  # a Row: a struct
        return "{" + ", ".join(cell(x) for x in v) + "}"
    return str(v)


@dataclass
class Result:
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]


def collected(rows) -> Result:
    columns = tuple(rows[0].__fields__) if rows else ()
    return Result(columns, [tuple(cell(v) for v in r) for r in rows])


def run(session, sql: str, variant: str, capsys) -> Result | None:
    """sql through session with .collect(), .show() or no action; the result rows it gave."""
    if variant == "collect":
        return collected(session.sql(sql).collect())
    if variant == "show":
        capsys.readouterr()
        session.sql(sql).show(truncate=False)
        tables = shown_tables(capsys.readouterr().out)
        return Result(*tables[-1]) if tables else Result((), [])
    session.sql(sql)
    return None


# ---- the statements and what one run of each gives ------------------------------------------------


def _optimize_key(r: Result) -> tuple:
    """OPTIMIZE's result: (numFilesAdded, numFilesRemoved), the metrics struct's first fields."""
    (path, metrics), = r.rows
    m = re.match(r"\{(\d+), (\d+), ", metrics)
    assert m, metrics
    return int(m[1]), int(m[2])


@dataclass
class Step:
    name: str
    sql: str | None  # {t}: the table, {ident}: its pyiceberg identifier (namespace.table)
    expect: dict  # the table's state after one run
    result: list[tuple] | None = None  # the result rows of one run, where known by hand
    key: Callable[[Result], object] = field(default=lambda r: r.rows)  # what must equal classic's result
    # holds for the classic (first) run's result and not for a second run's: so a result the
    # Connect run got from running the statement again differs from classic's
    first: Callable[[Result], bool] | None = None
    call: Callable | None = None  # a DataFrame API step: call(session, table)


def _counts(r: Result) -> bool:
    """A maintenance result that did something: some count is not 0 (a second run's are all 0)."""
    return any(v != "0" for row in r.rows for v in row)


def _files_changed(r: Result) -> bool:
    return min(_optimize_key(r)) >= 1


def _append(session, table: str) -> None:
    session.range(200, 203).selectExpr("id", "'w' AS k").writeTo(table).append()


def _s(snapshots, operation, rows, partition_fields=()):
    return {"snapshots": snapshots, "operation": operation, "rows": rows, "partition_fields": list(partition_fields)}


STEPS = [
    Step("CREATE TABLE", "CREATE TABLE {t} (id BIGINT, k STRING)", _s(0, None, 0), result=[]),
    Step("INSERT SELECT", "INSERT INTO {t} SELECT id, CAST(id % 5 AS STRING) FROM range(100)",
         _s(1, "append", 100), result=[]),
    Step("INSERT VALUES", "INSERT INTO {t} VALUES (100, 'a'), (101, 'b')", _s(2, "append", 102), result=[]),
    # ids 0, 7, ..., 98: 15 rows
    Step("DELETE", "DELETE FROM {t} WHERE id % 7 = 0", _s(3, "delete", 87), result=[("15",)]),
    # ids 1..9 but 7
    Step("UPDATE", "UPDATE {t} SET k = 'u' WHERE id < 10", _s(4, "overwrite", 87), result=[("8",)]),
    # 95..104: 95, 96, 97, 99, 100, 101 matched; 98 (deleted), 102, 103, 104 inserted
    Step("MERGE", """MERGE INTO {t} AS x USING (SELECT id, 'm' AS k FROM range(95, 105)) AS s ON x.id = s.id
                     WHEN MATCHED THEN UPDATE SET k = s.k WHEN NOT MATCHED THEN INSERT *""",
         _s(5, "overwrite", 91), result=[("10", "6", "0", "4")]),
    # a second run would find one manifest per content and rewrite nothing (0, 0)
    Step("CALL rewrite_manifests", "CALL lake.system.rewrite_manifests(table => '{ident}')", _s(6, "replace", 91),
         first=_counts),
    # a second run would find one file and rewrite nothing (0, 0)
    Step("OPTIMIZE", "OPTIMIZE {t}", _s(7, "replace", 91), key=_optimize_key, first=_files_changed),
    # a second run would find one cube and rewrite nothing (0, 0)
    Step("OPTIMIZE ZORDER BY", "OPTIMIZE {t} ZORDER BY (id, k)", _s(8, "replace", 91), key=_optimize_key,
         first=_files_changed),
    # a second run would find nothing to expire (all counts 0)
    Step("CALL expire_snapshots",
         "CALL lake.system.expire_snapshots(table => '{ident}', older_than => TIMESTAMP '2999-01-01 00:00:00', "
         "retain_last => 1)", _s(1, "replace", 91), first=_counts),
    # a second run would fail, or add a second field
    Step("ALTER TABLE ADD PARTITION FIELD", "ALTER TABLE {t} ADD PARTITION FIELD bucket(2, id)",
         _s(1, "replace", 91, ["bucket[2]"]), result=[]),
    Step("writeTo(...).append()", None, _s(2, "append", 94, ["bucket[2]"]), call=_append),
    # one commit on the table, reading the table itself (ids below 50 but multiples of 7: 42 rows);
    # a second run would add a fourth snapshot
    Step("CREATE OR REPLACE TABLE AS SELECT", "CREATE OR REPLACE TABLE {t} AS SELECT id, k FROM {t} WHERE id < 50",
         _s(3, "append", 42), result=[]),
]


@dataclass
class After:
    """The classic run's table and result after one step."""
    state: dict
    rows: list[tuple]
    result: Result


@pytest.fixture(scope="module")
def reference(spark, iceberg_catalog, server) -> list[After]:
    """Every step through the classic `spark` session, as the Connect runs must match; and each
    one checked against what one run gives (classic PySpark runs each statement once)."""
    ns = f"connect_ref_{uuid.uuid4().hex[:8]}"
    table, ident = f"lake.{ns}.t", f"{ns}.t"
    spark.sql(f"CREATE NAMESPACE lake.{ns}")
    out = []
    try:
        for step in STEPS:
            if step.call:
                step.call(spark, table)
                result = Result((), [])
            else:
                result = collected(spark.sql(step.sql.format(t=table, ident=ident)).collect())
            after = After(*look(iceberg_catalog, ident), result)
            assert after.state == step.expect, f"classic PySpark, after {step.name}"
            if step.result is not None:
                assert result.rows == step.result, f"classic PySpark, the result of {step.name}"
            if step.first is not None:
                assert step.first(result), f"classic PySpark, the result of {step.name}: {result}"
            out.append(after)
        yield out
    finally:
        spark.sql(f"DROP NAMESPACE IF EXISTS lake.{ns} CASCADE")


# ---- the tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_statement_runs_once(reference, client, lake, variant, capsys):
    """Each step through Connect leaves the table as one run does and as classic PySpark left it,
    and (with an action) returns the result of one run. (`reference` first: the classic run goes
    while the server's JVM boots.)"""
    ns = f"v_{variant}"
    table, ident = f"lake.{ns}.t", f"{ns}.t"
    client.sql(f"CREATE NAMESPACE lake.{ns}")
    for step, classic in zip(STEPS, reference):
        where = f"through Connect with {'no action' if variant == 'none' else f'.{variant}()'}, after {step.name}"
        if step.call:
            step.call(client, table)
            result = None
        else:
            result = run(client, step.sql.format(t=table, ident=ident), variant, capsys)
        now, rows = look(lake, ident)
        assert now == step.expect, where
        assert rows == classic.rows, f"{where}: the rows differ from classic PySpark's"
        if result is None:
            continue
        if step.result is not None:
            assert result.rows == step.result, f"{where}: the result"
        if classic.result.columns:
            assert result.columns == classic.result.columns, f"{where}: the result's columns"
            assert step.key(result) == step.key(classic.result), f"{where}: the result differs from classic PySpark's"


def test_the_client_reaches_the_lake_catalog(client, lake):
    """The harness: the server started with the lakerules flags, a client connects, the lake
    catalog answers (a statement that runs nothing twice-visible: a namespace and an empty table)."""
    assert client.sql("SELECT 42 AS answer").collect()[0].answer == 42
    client.sql("CREATE NAMESPACE lake.harness")
    client.sql("CREATE TABLE lake.harness.t (id BIGINT) PARTITIONED BY (bucket(4, id))")
    assert [r.tableName for r in client.sql("SHOW TABLES IN lake.harness").collect()] == ["t"]
    assert client.sql("SELECT count(*) AS n FROM lake.harness.t").collect()[0].n == 0
    assert look(lake, "harness.t") == (_s(0, None, 0, ["bucket[4]"]), [])


def test_a_lakerules_error_reaches_a_connect_client_as_one_line(client, lake):
    """A lakerules error (issue 30): its one-line message and the exception's class, not the
    server's 80-odd-line JVM stack trace of the Py4J callback that returned it."""
    client.sql("CREATE NAMESPACE lake.clear")
    client.sql("CREATE TABLE lake.clear.t (id BIGINT)")
    client.sql("INSERT INTO lake.clear.t VALUES (1)")
    for statement, needle in (("VACUUM lake.clear.t RETAIN 1 HOURS", "lakerules: VACUUM lake.clear.t RETAIN 1 HOURS"),
                              ("SELECT * FROM lake.clear.t VERSION AS OF 'nope'",
                               "lakerules: table lake.clear.t has no snapshot or reference 'nope'")):
        with pytest.raises(Exception) as info:
            client.sql(statement).collect()
        message = str(info.value).strip()
        assert message.splitlines()[0].startswith(needle), message
        assert "\tat " not in message and len(message.splitlines()) <= 4, message
    assert look(lake, "clear.t")[1] == [(1,)]


def test_a_format_version_3_table_through_connect(client, lake):
    """A v3 table's statements sent by a Connect client: each commits once (deletion vectors, one
    per data file), every row keeps its _row_id, and pyiceberg reads what the client reads."""
    client.sql("CREATE NAMESPACE lake.v3")
    t = "lake.v3.t"
    steps = [
        (f"CREATE TABLE {t} (id BIGINT, k STRING) TBLPROPERTIES ('format-version'='3')", 0),
        (f"INSERT INTO {t} SELECT id, CAST(id % 3 AS STRING) FROM range(12)", 1),
        (f"DELETE FROM {t} WHERE id IN (1, 2)", 2),
        (f"UPDATE {t} SET k = 'u' WHERE id = 3", 3),
        (f"DELETE FROM {t} WHERE id = 4", 4),
        (f"MERGE INTO {t} AS x USING (SELECT 5 AS id, 'm' AS k UNION ALL SELECT 20, 'n') AS s ON x.id = s.id "
         "WHEN MATCHED THEN UPDATE SET k = s.k WHEN NOT MATCHED THEN INSERT *", 5),
        (f"OPTIMIZE {t}", 6),
    ]
    ids = None
    for sql, snapshots in steps:
        client.sql(sql).collect()
        table = lake.load_table("v3.t")
        assert len(table.snapshots()) == snapshots, sql  # run once
        rows = sorted((r.id, r.k) for r in client.sql(f"SELECT * FROM {t}").collect())
        assert sorted(tuple(r.values()) for r in table.scan().to_arrow().to_pylist()) == rows, sql
        now = {r.id: r._row_id for r in client.sql(f"SELECT _row_id, id FROM {t}").collect()}
        if ids is not None:
            assert {i: v for i, v in now.items() if i in ids} == {i: ids[i] for i in now if i in ids}, sql
        ids = now
        for task in table.scan().plan_files():  # at most one deletion vector a data file
            assert len([d for d in task.delete_files if d.file_format.value == "PUFFIN"]) <= 1, sql
    assert table.format_version == 3 and sorted(ids) == [0, 3, 5, 6, 7, 8, 9, 10, 11, 20]
    assert sorted(ids.values()) == sorted(set(ids.values())) and ids[20] >= 12
    # the changes as a view of the client's session: updates known by _row_id
    assert client.sql("CALL lake.system.create_changelog_view(table => 'v3.t', compute_updates => true)") \
        .collect()[0][0] == "t_changes"
    kinds = sorted((r.id, r._change_type) for r in client.sql("SELECT * FROM t_changes WHERE _change_ordinal > 0")
                   .collect())
    assert kinds == [(1, "DELETE"), (2, "DELETE"), (3, "UPDATE_AFTER"), (3, "UPDATE_BEFORE"), (4, "DELETE"),
                     (5, "UPDATE_AFTER"), (5, "UPDATE_BEFORE"), (20, "INSERT")]


def test_bloom_filters_and_equality_positions_through_connect(client, lake):
    """A point query from a Connect client reads only the files whose bloom filters admit the
    key (EXPLAIN says how many of the files), and equality deletes (committed here with
    pyiceberg: delete_by_key is a Python call of a classic session) read through the server's
    positions."""
    client.sql("CREATE NAMESPACE lake.bloom")
    t = "lake.bloom.t"
    client.sql(f"CREATE TABLE {t} (id BIGINT, v STRING) TBLPROPERTIES ('write.parquet.bloom-filter-enabled.column.id'='true')")
    for k in range(3):
        client.sql(f"INSERT INTO {t} SELECT /*+ COALESCE(1) */ id * 3 + {k}, 'v' FROM range(100)").collect()
    text = client.sql(f"EXPLAIN EXTENDED SELECT * FROM {t} WHERE id = 31").collect()[0][0]
    assert "files=1/3" in text, text
    assert [tuple(r) for r in client.sql(f"SELECT * FROM {t} WHERE id = 31").collect()] == [(31, "v")]
    from pyiceberg.typedef import Record
    from deletes_util import commit_deletes, equality_delete_file

    for keys in ([31, 32], [50]):  # past a filter threshold of 0 (below): hash tables, resolved to positions
        commit_deletes(lake, "bloom.t", [equality_delete_file(lake.load_table("bloom.t"), {"id": keys}, Record())])
    client.conf.set("spark.lakerules.read.equalityDeleteFilterThreshold", "0")
    try:
        ours = sorted(r.id for r in client.sql(f"SELECT id FROM {t}").collect())
        assert ours == [i for i in range(300) if i not in (31, 32, 50)]
        assert client.sql(f"SELECT * FROM {t} WHERE id = 32").collect() == []
    finally:
        client.conf.unset("spark.lakerules.read.equalityDeleteFilterThreshold")


EXPLAINED = [
    "EXPLAIN DELETE FROM {t} WHERE id = 1",
    "EXPLAIN EXTENDED DELETE FROM {t} WHERE id = 1",
    "EXPLAIN FORMATTED DELETE FROM {t} WHERE id = 1",
    "EXPLAIN EXTENDED UPDATE {t} SET k = 'x' WHERE id = 2",
    "EXPLAIN FORMATTED MERGE INTO {t} AS x USING (SELECT 3 AS id, 'm' AS k) AS s ON x.id = s.id "
    "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *",
    "EXPLAIN INSERT INTO {t} VALUES (50, 'e')",
    "EXPLAIN OPTIMIZE {t} ZORDER BY (id)",
    "EXPLAIN CALL lake.system.rewrite_manifests(table => '{ident}')",
]


def test_explain_through_connect_runs_nothing(client, lake, capsys):
    ns = "explain"
    table, ident = f"lake.{ns}.t", f"{ns}.t"
    client.sql(f"CREATE NAMESPACE lake.{ns}")
    client.sql(f"CREATE TABLE {table} (id BIGINT, k STRING)")
    for i in range(2):  # two commits, so OPTIMIZE and rewrite_manifests would have work
        client.sql(f"INSERT INTO {table} VALUES ({2 * i + 1}, 'a'), ({2 * i + 2}, 'b')")
    before, rows = look(lake, ident)

    def unchanged(what: str):
        assert look(lake, ident) == (before, rows), f"{what} changed the table"

    for sql in EXPLAINED:
        text = sql.format(t=table, ident=ident)
        for variant in VARIANTS if "DELETE" in sql else ("collect",):
            result = run(client, text, variant, capsys)
            unchanged(f"{text} ({variant})")
            if result is not None:
                assert len(result.rows) == 1 and result.rows[0][0].strip(), f"{text} ({variant}): {result}"
    for mode in (None, "extended", "formatted", "cost"):
        client.table(table).where("id > 1").explain(mode)
        unchanged(f"spark.table(...).explain({mode!r})")

    # A write's DataFrame: the write runs once, when spark.sql sends it; explaining that DataFrame,
    # or collecting it, runs nothing more (a second UPDATE or INSERT would show, a second DELETE
    # finds nothing to delete and says 0).
    writes = [  # (statement, its snapshot's operation, the rows after it, the rows it affects)
        (f"UPDATE {table} SET k = concat(k, '+') WHERE id = 3", "overwrite",
         lambda rows: [(i, k + "+" if i == 3 else k) for i, k in rows], lambda rows: sum(i == 3 for i, _ in rows)),
        (f"INSERT INTO {table} VALUES (9, 'i')", "append", lambda rows: rows + [(9, "i")], None),
        (f"DELETE FROM {table} WHERE id = 4", "delete",
         lambda rows: [(i, k) for i, k in rows if i != 4], lambda rows: sum(i == 4 for i, _ in rows)),
    ]
    for sql, operation, after, affected in writes:
        name = sql.split()[0]
        df = client.sql(sql)
        expected = sorted(after(rows))
        assert look(lake, ident) == (
            {**before, "snapshots": before["snapshots"] + 1, "operation": operation, "rows": len(expected)},
            expected), f"{name} through Connect, with no action"
        count = affected(rows) if affected else None
        before, rows = look(lake, ident)
        for mode in (None, "extended", "formatted"):
            df.explain(mode)
            unchanged(f"df.explain({mode!r}) of the {name}'s DataFrame")
        result = [tuple(r) for r in df.collect()]
        if count is not None:
            assert result == [(count,)], f"the {name}'s result, collected after it ran"
        unchanged(f"collect() of the {name}'s DataFrame that already ran")


def test_streaming_through_connect(client, lake, tmp_path):
    """A JVM driver streams too: a Connect client's stream into a lake table (one snapshot per
    batch, the query and batch ids in the summary), and a lake table streamed into another."""
    import json

    ns, src = "streams", tmp_path / "src"
    src.mkdir()
    client.sql(f"CREATE NAMESPACE lake.{ns}")
    client.sql(f"CREATE TABLE lake.{ns}.ev (id BIGINT, v STRING)")
    client.sql(f"CREATE TABLE lake.{ns}.copy (id BIGINT, v STRING)")
    for n in range(2):
        (src / f"{n}.json").write_text("".join(json.dumps({"id": i, "v": f"v{i}"}) + "\n" for i in range(3 * n, 3 * n + 3)))
    q = (client.readStream.schema("id BIGINT, v STRING").option("maxFilesPerTrigger", 1).json(str(src))
         .writeStream.option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True)
         .toTable(f"lake.{ns}.ev"))
    q.awaitTermination()
    expected = [(i, f"v{i}") for i in range(6)]
    assert look(lake, f"{ns}.ev")[1] == expected
    summaries = [s.summary.additional_properties for s in lake.load_table(f"{ns}.ev").snapshots()]
    assert [(p["spark.sql.streaming.queryId"], p["spark.sql.streaming.epochId"]) for p in summaries] == \
        [(q.id, "0"), (q.id, "1")]
    q2 = (client.readStream.option("streaming-max-files-per-micro-batch", "1").table(f"lake.{ns}.ev")
          .writeStream.option("checkpointLocation", str(tmp_path / "ck2")).trigger(availableNow=True)
          .toTable(f"lake.{ns}.copy"))
    q2.awaitTermination()
    assert look(lake, f"{ns}.copy")[1] == expected
