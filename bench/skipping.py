"""File skipping for any file count (issue 21): lakerules' OPTIMIZE ZORDER BY (k-d layout) and
HILBERT BY against delta-rs's z_order and Spark's linear sort, for k = 2 and 3 columns and n = 8,
12, 16, 18, 32 files, on point and range predicates.

    .venv/bin/python bench/run.py --only skipping --rows 400000 --runs 1

Rows: a, b and c, uniform BIGINTs in [0, 1,000,000), independent. Each contender rewrites the same
rows into n files; skipping is the mean share of its files whose [min, max] box can hold
VALUES random predicates: a point on each column (``a = x``), a 1% range of a
(``a BETWEEN x AND x + 10,000``) and a corner (``a < x AND b < y``). The target for lakerules'
z-order: a point on any one column meets at most 1.2 n^(-1/k) of the files.
"""

from __future__ import annotations

import glob
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

import lakerules

from common import OUT, Report, verdict

NAME = "skipping"
COUNTS = (8, 12, 16, 18, 32)
COLUMNS = ("a", "b", "c")
VALUES = 1000
DOMAIN = 1_000_000
ROW = ("pmod(xxhash64(id, 1), 1000000), pmod(xxhash64(id, 2), 1000000), pmod(xxhash64(id, 3), 1000000), "
       "concat('row-', CAST(id AS STRING)) FROM range({first}, {last})")


def size(args) -> str:
    return f"{args.rows:,} rows, n = {', '.join(map(str, COUNTS))} files, k = 2 and 3 columns"


def _table():
    return lakerules._backend.catalogs.get("lake").load_table("bench.s")


def _live(table):
    return [task.file for task in table.scan().plan_files()]


def _iceberg_boxes(files) -> list[tuple]:
    def value(b: bytes) -> int:
        return int.from_bytes(b, "little", signed=True)

    return [tuple((value(f.lower_bounds[i + 1]), value(f.upper_bounds[i + 1])) for i in range(3)) for f in files]


def _parquet_boxes(paths) -> list[tuple]:
    out = []
    for p in paths:
        meta = pq.read_metadata(p)
        names = meta.schema.to_arrow_schema().names
        box = []
        for c in COLUMNS:
            stats = [meta.row_group(i).column(names.index(c)).statistics for i in range(meta.num_row_groups)]
            box.append((min(s.min for s in stats), max(s.max for s in stats)))
        out.append(tuple(box))
    return out


def _delta_boxes(path: str) -> list[tuple]:
    from deltalake import DeltaTable

    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    return list(zip(*[list(zip(actions[f"min.{c}"].to_pylist(), actions[f"max.{c}"].to_pylist())) for c in COLUMNS]))


def shares(boxes: list[tuple], seed: int) -> dict:
    """Mean share of files each kind of predicate meets."""
    rnd = random.Random(seed)
    n = len(boxes)
    out = {}
    for j, c in enumerate(COLUMNS):
        values = [rnd.randrange(DOMAIN) for _ in range(VALUES)]
        out[c] = statistics.mean(sum(1 for b in boxes if b[j][0] <= v <= b[j][1]) / n for v in values)
    width = DOMAIN // 100
    lows = [rnd.randrange(DOMAIN - width) for _ in range(VALUES)]
    out["range"] = statistics.mean(sum(1 for b in boxes if b[0][0] <= x + width and x <= b[0][1]) / n for x in lows)
    corners = [(rnd.randrange(DOMAIN), rnd.randrange(DOMAIN)) for _ in range(VALUES)]
    out["corner"] = statistics.mean(sum(1 for b in boxes if b[0][0] < x and b[1][0] < y) / n for x, y in corners)
    return out


def run(spark, args, report: Report) -> None:
    t0 = time.perf_counter()
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql("CREATE TABLE lake.bench.s (a BIGINT, b BIGINT, c BIGINT, s STRING)")
    spark.sql(f"INSERT INTO lake.bench.s SELECT {ROW.format(first=0, last=args.rows)}")
    source = [f.file_path for f in _live(_table())]
    start = _table().current_snapshot().snapshot_id
    total = sum(f.file_size_in_bytes for f in _live(_table()))
    print(f"  (table of {args.rows:,} rows written in {time.perf_counter() - t0:.1f} s)", flush=True)

    from deltalake import DeltaTable, write_deltalake

    work = OUT / NAME / "work"
    delta_source = work / "delta-source"
    shutil.rmtree(delta_source, ignore_errors=True)
    rows = ds.dataset([p.replace("file://", "") for p in source], format="parquet").to_table()
    rows = rows.cast(pa.schema([pa.field(f.name, f.type) for f in rows.schema]))  # without Iceberg field ids
    write_deltalake(str(delta_source), rows)
    del rows
    delta_total = sum(os.path.getsize(p) for p in glob.glob(str(delta_source / "*.parquet")))
    frame = spark.read.parquet(*source)

    for k in (2, 3):
        cols = COLUMNS[:k]
        for n in COUNTS:
            got = {}
            for curve in ("ZORDER", "HILBERT"):
                _table().manage_snapshots().rollback_to_snapshot(start).commit()
                spark.sql(f"ALTER TABLE lake.bench.s SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '{total // n}')")
                spark.sql(f"OPTIMIZE lake.bench.s {curve} BY ({', '.join(cols)})").collect()
                got[curve] = _iceberg_boxes(_live(_table()))
            out = work / "plain"
            shutil.rmtree(out, ignore_errors=True)
            frame.repartitionByRange(n, *cols).sortWithinPartitions(*cols).write.parquet(str(out))
            got["linear"] = _parquet_boxes(sorted(glob.glob(str(out / "*.parquet"))))
            copy = work / "delta"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(delta_source, copy)
            DeltaTable(str(copy)).optimize.z_order(list(cols), target_size=delta_total // n)
            got["delta"] = _delta_boxes(str(copy))
            measured = {name: shares(boxes, seed=k * 100 + n) for name, boxes in got.items()}
            bound = 1.2 * n ** (-1 / k)
            z = measured["ZORDER"]
            worst = max(z[c] for c in cols)

            def show(name, label):
                m = measured[name]
                return (f"{label} ({len(got[name])} files): point {' / '.join(f'{m[c]:.2f}' for c in cols)}, "
                        f"1% range {m['range']:.2f}, corner {m['corner']:.2f}")

            report.add(
                f"k = {k} ({', '.join(cols)}), n = {n}: share of files met (ideal point {n ** (-1 / k):.2f})",
                "; ".join([f"**{show('ZORDER', 'lakerules z-order')}**", show("HILBERT", "lakerules Hilbert"),
                           show("delta", "delta-rs z_order"), show("linear", "Spark linear sort")]),
                f"z-order point <= {bound:.2f}", verdict(worst <= bound and len(got["ZORDER"]) == n),
            )
            print(f"  k={k} n={n} done", flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.execv(sys.executable, [sys.executable, str(Path(__file__).with_name("run.py")), "--only", NAME, *sys.argv[1:]])
