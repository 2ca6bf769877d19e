"""Small files from a stream (issue 22, item 4): many quick micro-batches leave one small file
each; OPTIMIZE and CALL rewrite_data_files, run again and again from another thread while the
stream commits, fail neither the stream nor themselves (an append and a rewrite of other files do
not conflict: the loser of a commit race is retried), compact what has landed, and every row is
in the table exactly once afterwards.

Profiles (env LAKERULES_PROFILE): `small` (default, `make test`): 20 micro-batches; `soak`
(`make soak`): 1,000 (LAKERULES_STREAM_BATCHES overrides either).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from test_streaming import put, source, stream_batches

PROFILE = os.environ.get("LAKERULES_PROFILE", "small")
BATCHES = int(os.environ.get("LAKERULES_STREAM_BATCHES", "20" if PROFILE == "small" else "1000"))
ROWS = 3  # rows per micro-batch


def data_files(iceberg_catalog, name: str) -> int:
    return len(list(iceberg_catalog.load_table(name).scan().plan_files()))


def test_compaction_races_a_stream_of_many_micro_batches(spark, ns, tmp_path: Path, engines, iceberg_catalog):
    table, src = f"lake.{ns}.ev", tmp_path / "src"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    for n in range(BATCHES):  # one file, one micro-batch (maxFilesPerTrigger=1), one data file
        put(src, f"f{n:05d}", range(ROWS * n, ROWS * n + ROWS))
    q = (source(spark, src).writeStream.option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).toTable(table))

    compactions, errors, done = [], [], threading.Event()

    def compact() -> None:
        """OPTIMIZE and rewrite_data_files in turns, while the stream runs."""
        turn = 0
        while not done.is_set():
            try:
                if turn % 2 == 0:
                    metrics = spark.sql(f"OPTIMIZE {table}").collect()[0]["metrics"]
                    compactions.append(("optimize", metrics["numFilesRemoved"], metrics["numFilesAdded"]))
                else:
                    row = spark.sql(f"CALL lake.system.rewrite_data_files(table => '{ns}.ev', "
                                    "options => map('min-input-files', '2'))").collect()[0]
                    compactions.append(("rewrite", row["rewritten_data_files_count"], row["added_data_files_count"]))
            except Exception as e:  # noqa: BLE001 - the test fails on it below
                errors.append(f"{type(e).__name__}: {str(e)[:2000]}")
                return
            turn += 1
            time.sleep(0.2)  # leave the stream some of the 2 cores

    worker = threading.Thread(target=compact, name="compactor", daemon=True)
    worker.start()
    try:
        q.awaitTermination(timeout=max(300, BATCHES * 3))
    finally:
        done.set()
        worker.join(timeout=300)
        if q.isActive:
            q.stop()
    assert not worker.is_alive(), "the compaction thread did not finish"
    assert q.exception() is None, str(q.exception())[:3000]
    assert errors == [], errors

    # every batch committed once, one small file each, in order
    batches = stream_batches(iceberg_catalog, table)
    appends = [b for b in batches if b[0] == "append"]
    assert [int(b[2]) for b in appends] == list(range(BATCHES)) and len({b[1] for b in appends}) == 1
    t = iceberg_catalog.load_table(f"{ns}.ev")
    added = [int(s.summary.additional_properties.get("added-data-files", 0))
             for s in t.snapshots() if s.summary.operation.value == "append"]
    assert added == [1] * BATCHES
    # the compactions ran between the stream's commits and compacted what had landed
    operations = [b[0] for b in batches]
    last_append = len(operations) - 1 - operations[::-1].index("append")
    assert "replace" in operations[:last_append], f"no compaction landed while the stream ran: {operations}"
    assert any(c[1] > 0 for c in compactions), compactions
    per_batch = sorted(p["durationMs"]["triggerExecution"] for p in q.recentProgress if p["numInputRows"])
    print(f"\n{BATCHES} micro-batches (median {per_batch[len(per_batch) // 2] if per_batch else '?'} ms, "
          f"load {os.getloadavg()[0]:.1f}); compactions (kind, files removed, added): {compactions[:40]}"
          f"{' ...' if len(compactions) > 40 else ''}; snapshots {len(operations)}, "
          f"replace {operations.count('replace')}, live files {data_files(iceberg_catalog, f'{ns}.ev')}")

    # every row exactly once, as all three engines read it
    expected = [(i, f"v{i}") for i in range(ROWS * BATCHES)]
    engines.assert_same(table, expected=expected)
    # one more compaction of what is left: one file
    spark.sql(f"OPTIMIZE {table}")
    assert data_files(iceberg_catalog, f"{ns}.ev") == 1
    assert sorted(engines.lakerules(table)) == expected
