"""Structured Streaming into lake tables (lakerules.streaming.sink): each micro-batch one snapshot with
the query id and batch id in its summary, append and complete modes, and exactly once across a
driver killed between a batch's commit and its checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
QUERY_ID, EPOCH_ID = "spark.sql.streaming.queryId", "spark.sql.streaming.epochId"


def put(directory: Path, name: str, ids) -> None:
    """One JSON file of rows (id, v='v<id>'): one micro-batch with maxFilesPerTrigger=1."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{name}.tmp"
    tmp.write_text("".join(json.dumps({"id": i, "v": f"v{i}"}) + "\n" for i in ids))
    tmp.rename(directory / f"{name}.json")  # whole, as a file source must see it


def stream_batches(iceberg_catalog, table: str) -> list[tuple[str, str, str]]:
    """(operation, query id, batch id) of each snapshot, oldest first."""
    t = iceberg_catalog.load_table(table.split(".", 1)[1])
    out = []
    for s in t.snapshots():
        props = s.summary.additional_properties
        out.append((s.summary.operation.value, props.get(QUERY_ID), props.get(EPOCH_ID)))
    return out


def source(spark, directory: Path):
    return spark.readStream.schema("id BIGINT, v STRING").option("maxFilesPerTrigger", 1).json(str(directory))


def test_append_and_complete_one_snapshot_per_batch(spark, ns, tmp_path, engines, iceberg_catalog):
    table = f"lake.{ns}.ev"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING) PARTITIONED BY (bucket(4, id))")
    src, checkpoint = tmp_path / "src", tmp_path / "ck"
    put(src, "a", range(0, 6))
    put(src, "b", range(6, 9))
    q = source(spark, src).writeStream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).toTable(table)
    q.awaitTermination()
    put(src, "c", range(9, 12))
    # the second run, as Iceberg's runtime spells it: format("iceberg").start(<table name>)
    q2 = (source(spark, src).writeStream.format("iceberg").option("checkpointLocation", str(checkpoint))
          .trigger(availableNow=True).start(table))
    q2.awaitTermination()
    assert str(q.id) == str(q2.id)
    engines.assert_same(table, expected=[(i, f"v{i}") for i in range(12)])
    assert stream_batches(iceberg_catalog, table) == [("append", str(q.id), str(b)) for b in range(3)]

    # complete: each batch replaces the table's rows with the aggregate so far
    counts = f"lake.{ns}.counts"
    spark.sql(f"CREATE TABLE {counts} (bucket BIGINT, n BIGINT)")
    agg = source(spark, src).selectExpr("id % 2 AS bucket").groupBy("bucket").count().withColumnRenamed("count", "n")
    q3 = (agg.writeStream.outputMode("complete").option("checkpointLocation", str(tmp_path / "ck2"))
          .trigger(availableNow=True).toTable(counts))
    q3.awaitTermination()
    engines.assert_same(counts, expected=[(0, 6), (1, 6)])
    ops = stream_batches(iceberg_catalog, counts)
    assert [o[0] for o in ops] == ["append", "overwrite", "overwrite"] and [o[2] for o in ops] == ["0", "1", "2"]


def test_bad_streams_are_refused_and_change_nothing(spark, ns, tmp_path, iceberg_catalog):
    from pyspark.errors import StreamingQueryException

    table = f"lake.{ns}.ev"
    spark.sql(f"CREATE TABLE {table} (id BIGINT NOT NULL, v STRING)")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'x')")
    before = iceberg_catalog.load_table(f"{ns}.ev").current_snapshot().snapshot_id
    src = tmp_path / "src"
    put(src, "a", range(3))
    cases = [
        (source(spark, src).writeStream.option("fanout-enabled", "true"), "fanout-enabled"),
        (source(spark, src).selectExpr("id", "v", "1 AS extra").writeStream, "extra"),
        (source(spark, src).selectExpr("v").writeStream, "requires"),
        (source(spark, src).selectExpr("CAST(id AS STRING) AS id", "v").writeStream, "does not widen"),
    ]
    for i, (writer, message) in enumerate(cases):
        q = writer.option("checkpointLocation", str(tmp_path / f"ck{i}")).trigger(availableNow=True).toTable(table)
        with pytest.raises(StreamingQueryException, match=message):
            q.awaitTermination()
    with pytest.raises(Exception, match="(?i)update"):
        source(spark, src).writeStream.outputMode("update").option(
            "checkpointLocation", str(tmp_path / "cku")).toTable(table).awaitTermination()
    t = iceberg_catalog.load_table(f"{ns}.ev")
    assert t.current_snapshot().snapshot_id == before
    assert spark.table(table).collect() == [(1, "x")]


def run_driver(warehouse, table, src, checkpoint, stop_after=None, timeout=300):
    """stream_driver.py in a process of its own; with stop_after, killed (with its JVM) once it
    committed that batch. Its output lines."""
    args = [sys.executable, str(HERE / "stream_driver.py"), str(warehouse), table, str(src), str(checkpoint)]
    if stop_after is not None:
        args.append(str(stop_after))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines = []
    try:
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            lines.append(line.strip())
            if lines[-1] in ("COMMITTED", "DONE"):
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert lines and lines[-1] in ("COMMITTED", "DONE"), (lines, proc.stderr.read()[-3000:])
    return lines


def test_killed_between_commit_and_checkpoint_every_row_once(spark, ns, warehouse, tmp_path, engines, iceberg_catalog):
    table = f"lake.{ns}.ev"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    src, checkpoint = tmp_path / "src", tmp_path / "ck"
    for n, name in enumerate("abc"):
        put(src, name, range(n * 4, n * 4 + 4))
    run_driver(warehouse, table, src, checkpoint, stop_after=1)
    # batch 1 landed in the table; the checkpoint does not say it is done
    assert [b[2] for b in stream_batches(iceberg_catalog, table)] == ["0", "1"]
    assert (checkpoint / "offsets" / "1").exists() and not (checkpoint / "commits" / "1").exists()
    assert run_driver(warehouse, table, src, checkpoint)[-1] == "DONE"
    # the restart replayed batch 1 (now marked done) without committing it again, then ran batch 2
    assert (checkpoint / "commits" / "1").exists()
    batches = stream_batches(iceberg_catalog, table)
    assert [b[2] for b in batches] == ["0", "1", "2"] and len({b[1] for b in batches}) == 1
    engines.assert_same(table, expected=[(i, f"v{i}") for i in range(12)])


# ---- the source: readStream.table / format("iceberg").load ------------------------------------


def run_source(spark, reader_options: dict, table: str, checkpoint: Path, via_format: bool = False):
    """One availableNow run of a stream of the table into foreachBatch: the rows of each batch."""
    batches = []
    reader = spark.readStream
    for k, v in reader_options.items():
        reader = reader.option(k, v)
    df = reader.format("iceberg").load(table) if via_format else reader.table(table)
    q = (df.writeStream.foreachBatch(lambda d, b: batches.append(sorted(tuple(r) for r in d.collect())))
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    q.awaitTermination()
    return batches


def appended_files(iceberg_catalog, name: str) -> int:
    t = iceberg_catalog.load_table(name)
    return sum(int(s.summary.additional_properties.get("added-data-files", 0)) for s in t.snapshots()
               if s.summary.operation.value == "append")


def test_source_streams_appended_rows_once_across_delete_and_optimize(spark, ns, tmp_path, iceberg_catalog):
    from pyspark.errors import StreamingQueryException

    table, checkpoint = f"lake.{ns}.src", tmp_path / "ck"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"INSERT INTO {table} VALUES (3, 'c')")
    limit = {"streaming-max-files-per-micro-batch": "1"}
    first = run_source(spark, limit, table, checkpoint)
    assert sorted(r for b in first for r in b) == [(1, "a"), (2, "b"), (3, "c")]
    assert len(first) == appended_files(iceberg_catalog, f"{ns}.src")  # one file per batch

    spark.sql(f"INSERT INTO {table} VALUES (4, 'd')")
    spark.sql(f"OPTIMIZE {table}")  # a replace snapshot: skipped, its rewritten rows not streamed again
    spark.sql(f"INSERT INTO {table} VALUES (5, 'e')")
    second = run_source(spark, {}, table, checkpoint, via_format=True)
    assert sorted(r for b in second for r in b) == [(4, "d"), (5, "e")]

    spark.sql(f"DELETE FROM {table} WHERE id = 1")
    spark.sql(f"INSERT INTO {table} VALUES (6, 'f')")
    with pytest.raises(StreamingQueryException, match="streaming-skip-delete-snapshots"):
        run_source(spark, {}, table, checkpoint)
    third = run_source(spark, {"streaming-skip-delete-snapshots": "true"}, table, checkpoint)
    assert [r for b in third for r in b] == [(6, "f")]
    offsets = sorted((checkpoint / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    assert '"snapshot_id"' in offsets[-1].read_text()

    # where a new stream starts: after a snapshot, or from a time; per-batch row limits
    snapshots = iceberg_catalog.load_table(f"{ns}.src").snapshots()
    after = run_source(spark, {"start-snapshot-id": str(snapshots[1].snapshot_id),
                               "streaming-skip-delete-snapshots": "true"}, table, tmp_path / "ck2")
    assert sorted(r for b in after for r in b) == [(4, "d"), (5, "e"), (6, "f")]
    rows = run_source(spark, {"stream-from-timestamp": str(snapshots[-1].timestamp_ms),
                              "streaming-max-rows-per-micro-batch": "1"}, table, tmp_path / "ck3")
    assert rows == [[(6, "f")]]
    with pytest.raises(StreamingQueryException, match="not supported"):
        run_source(spark, {"fanout": "x"}, table, tmp_path / "ck4")


# ---- CDC upserts with foreachBatch (examples/cdc_upserts.py) ----------------------------------


@pytest.mark.parametrize("fast", [False, True], ids=["merge", "delete_by_key"])
def test_cdc_upserts_apply_each_batch_once(spark, ns, engines, fast):
    sys.path.insert(0, str(HERE.parent / "examples"))
    try:
        import cdc_upserts
    finally:
        sys.path.pop(0)
    table = f"lake.{ns}.customers"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    schema = "id BIGINT, v STRING, op STRING, seq BIGINT"
    batches = [
        [(1, "a", "upsert", 1), (2, "b", "upsert", 2), (3, "c", "upsert", 3), (1, "a2", "upsert", 4)],
        [(2, None, "delete", 5), (3, "c2", "upsert", 6), (4, "d", "upsert", 7)],
    ]
    for batch_id, rows in enumerate(batches):
        assert cdc_upserts.upsert_batch(spark.createDataFrame(rows, schema), batch_id, table, "app", fast=fast)
    expected = [(1, "a2"), (3, "c2"), (4, "d")]

    def same(rows):
        if not fast:
            return engines.assert_same(table, expected=rows)
        # equality deletes: pyiceberg cannot read them; DuckDB can
        assert engines.lakerules(table) == sorted(rows) == engines.duckdb(table)

    same(expected)
    history = spark.sql(f"DESCRIBE HISTORY {table}").collect()
    # replayed after a restart: found in the history, nothing applied again
    assert not cdc_upserts.upsert_batch(spark.createDataFrame(batches[1], schema), 1, table, "app", fast=fast)
    assert len(spark.sql(f"DESCRIBE HISTORY {table}").collect()) == len(history)
    # another application's batch 1 is its own
    assert cdc_upserts.upsert_batch(spark.createDataFrame([(5, "e", "upsert", 8)], schema), 1, table, "other", fast=fast)
    same([*expected, (5, "e")])
    assert spark.conf.get("spark.lakerules.snapshot-property.cdc.batch-id", None) is None  # the session as it was


# OPTIMIZE and rewrite_data_files racing a stream: tests/test_stream_small_files.py


def test_a_checkpoint_inside_the_table_survives_cleanup(spark, ns, tmp_path, iceberg_catalog, caplog):
    """Issue #30 case 6: remove_orphan_files deleted a checkpoint kept in the table's folder, and
    the restarted stream replayed its source (80 rows where 60 were expected)."""
    from test_path_safety import age

    import faults_util as fu

    table = f"lake.{ns}.ev"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    location = fu.local(iceberg_catalog.load_table(f"{ns}.ev").location())
    src, checkpoint = tmp_path / "src", location / "checkpoint"
    put(src, "a", range(0, 20))
    put(src, "b", range(20, 40))
    with caplog.at_level("WARNING", logger="lakerules"):
        q = source(spark, src).writeStream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).toTable(table)
        q.awaitTermination()
    assert any("checkpoint" in r.getMessage() and "inside the folder of lake table" in r.getMessage() for r in caplog.records)
    kept = {p for p in checkpoint.rglob("*") if p.is_file()}
    assert kept
    age(location)
    spark.conf.set("spark.lakerules.removeOrphanFiles.minAge", "0")
    try:
        dry = spark.sql(f"VACUUM {table} RETAIN 168 HOURS DRY RUN").collect()
        assert not [r for r in dry if "/checkpoint/" in r.path]
        spark.sql(f"CALL lake.system.remove_orphan_files(table => '{ns}.ev', "
                  "older_than => TIMESTAMP '2999-01-01 00:00:00')").collect()
    finally:
        spark.conf.unset("spark.lakerules.removeOrphanFiles.minAge")
    assert kept <= {p for p in checkpoint.rglob("*") if p.is_file()}
    put(src, "c", range(40, 60))
    q2 = source(spark, src).writeStream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).toTable(table)
    q2.awaitTermination()
    ids = [r.id for r in spark.sql(f"SELECT id FROM {table}").collect()]
    assert sorted(ids) == list(range(60))
