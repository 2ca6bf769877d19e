"""Streams x maintenance, a property test (issue #51, item 4): hypothesis interleaves micro-batches
of a Structured Streaming query into a lake table (some of them "crashed": the batch's commit landed
but the checkpoint's commit marker is gone, as when the driver dies between the two), restarts of
the query, and the maintenance a table gets while a stream is down or running (expire_snapshots
after another commit, CREATE OR REPLACE TABLE ... AS SELECT of itself, OPTIMIZE, INSERT, DELETE).
After every step the table holds exactly the model's rows, read by lakerules and pyiceberg: every
batch once, however the table's snapshots were rewritten or expired before the restart.

Profiles (env LAKERULES_PROFILE, as tests/test_model.py): `small` (default, `make test`): three short
sequences from a fixed seed; `soak` (`make soak`): LAKERULES_SOAK_EXAMPLES (default 40) sequences of
15 steps. Each run prints its counts (RELIABILITY.md records them).
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import seed
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

import profiles_util

PROFILE = profiles_util.PROFILE
CHOSEN = profiles_util.register("streams-small", "streams-soak", small_examples=3, small_steps=6, soak_steps=15)
STATS = {"sequences": 0, "steps": 0, "batches": 0, "crashes": 0, "restarts": 0, "maintenance": 0}
OLD_ENOUGH = "TIMESTAMP '2999-01-01 00:00:00'"
_seq = itertools.count()


class StreamsAndMaintenance(RuleBasedStateMachine):
    spark = iceberg_catalog = scratch = ns = None  # set by the test

    def __init__(self):
        super().__init__()
        n = next(_seq)
        self.name = f"k{n}"
        self.table = f"lake.{self.ns}.{self.name}"
        self.root = Path(self.scratch) / f"s{n}"
        self.source, self.checkpoint = self.root / "src", self.root / "ck"
        self.rows: list[int] = []
        self.ids = itertools.count(1)
        self.files = itertools.count()
        self.pending = False  # a crashed batch the next run of the query replays
        self.log: list[str] = []

    def sql(self, text: str):
        self.log.append(text)
        return self.spark.sql(text).collect()

    def run_stream(self) -> None:
        self.log.append("-- the stream runs (availableNow)")
        rows = self.spark.readStream.schema("id BIGINT").option("maxFilesPerTrigger", 1).json(str(self.source))
        query = (rows.writeStream.option("checkpointLocation", str(self.checkpoint)).trigger(availableNow=True)
                 .toTable(self.table))
        query.awaitTermination()

    @initialize(crash=st.booleans())
    def start(self, crash):
        """The table, and a first batch (crashed or not): every sequence has a stream to restart."""
        STATS["sequences"] += 1
        self.source.mkdir(parents=True)
        self.sql(f"CREATE TABLE {self.table} (id BIGINT)")
        self.batch(2, crash)

    @rule(count=st.integers(1, 3), crash=st.booleans())
    def batch(self, count, crash):
        """A new source file, streamed as one batch; with ``crash`` its commit marker is removed
        afterwards (the batch landed, the checkpoint does not say so): the next run replays it."""
        ids = [next(self.ids) for _ in range(count)]
        (self.source / f"{next(self.files):04d}.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
        self.run_stream()
        self.rows += ids
        self.pending = crash
        STATS["batches"] += 1
        if crash:
            commits = sorted((p for p in (self.checkpoint / "commits").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
            last = commits[-1]
            last.unlink()
            (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
            self.log.append(f"-- crashed: commit marker {last.name} removed")
            STATS["crashes"] += 1

    @precondition(lambda self: self.pending)
    @rule()
    def restart(self):
        """The query restarted with no new input: it replays the crashed batch, which the table holds."""
        self.run_stream()
        self.pending = False
        STATS["restarts"] += 1

    @rule(kind=st.sampled_from(["expire", "replace", "optimize", "insert", "delete"]))
    def maintain(self, kind):
        STATS["maintenance"] += 1
        ident = f"{self.ns}.{self.name}"
        if kind == "expire":
            self.insert()
            self.sql(f"CALL lake.system.expire_snapshots(table => '{ident}', older_than => {OLD_ENOUGH}, retain_last => 1)")
        elif kind == "replace":
            self.sql(f"CREATE OR REPLACE TABLE {self.table} AS SELECT * FROM {self.table}")
        elif kind == "optimize":
            self.sql(f"OPTIMIZE {self.table}")
        elif kind == "insert":
            self.insert()
        else:
            self.sql(f"DELETE FROM {self.table} WHERE id % 3 = 0")
            self.rows = [i for i in self.rows if i % 3]

    def insert(self):
        i = 100_000 + next(self.ids)
        self.sql(f"INSERT INTO {self.table} VALUES ({i})")
        self.rows.append(i)

    @invariant()
    def every_batch_once(self):
        STATS["steps"] += 1
        got = sorted(r.id for r in self.spark.sql(f"SELECT id FROM {self.table}").collect())
        trail = "\nstatements so far:\n" + ";\n".join(self.log)
        assert got == sorted(self.rows), f"lakerules reads {got}, the model {sorted(self.rows)}" + trail
        pyiceberg = sorted(self.iceberg_catalog.load_table(f"{self.ns}.{self.name}").scan().to_arrow()["id"].to_pylist())
        assert pyiceberg == got, f"pyiceberg reads {pyiceberg}" + trail

    def teardown(self):
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.mark.parametrize("seed_", [20261205] if PROFILE == "small" else [None])
def test_streams_survive_maintenance(spark, iceberg_catalog, ns, tmp_path, seed_):
    StreamsAndMaintenance.spark, StreamsAndMaintenance.iceberg_catalog = spark, iceberg_catalog
    StreamsAndMaintenance.scratch, StreamsAndMaintenance.ns = tmp_path, ns
    machine = (StreamsAndMaintenance if seed_ is None
               else seed(seed_)(type(f"StreamsSeed{seed_}", (StreamsAndMaintenance,), {})))
    run_state_machine_as_test(machine, settings=CHOSEN)
    print(f"\nstreams x maintenance ({PROFILE}, seed {seed_}): {STATS}")
