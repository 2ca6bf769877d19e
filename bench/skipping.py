"""File skipping for any file count (issue 21): lakerules' OPTIMIZE ZORDER BY (k-d layout) and
HILBERT BY against delta-rs's z_order and Spark's linear sort, for k = 2 and 3 columns and n = 8,
12, 16, 18, 32 files, on point and range predicates.

    .venv/bin/python bench/run.py --only skipping --rows 400000 --runs 1

Rows: a, b and c, uniform BIGINTs in [0, 1,000,000), independent. Each contender rewrites the same
rows into n files of about ROW_GROUPS row groups each; skipping is the mean share of its files
(and, a second row, of its row groups) whose [min, max] box can hold VALUES random predicates: a
point on each column (``a = x``), a 1% range of each column (``a BETWEEN x AND x + 10,000``) and
a corner (``a < x AND b < y``). The target for lakerules' z-order: a point on any one column
meets at most 1.2 n^(-1/k) of the files. ZORDER BY and HILBERT BY write the same files (the k-d
layout); the curve orders the rows inside them, which the row-group shares show.
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

from common import OUT, Report, local_path, verdict

NAME = "skipping"
COUNTS = (8, 12, 16, 18, 32)
COLUMNS = ("a", "b", "c")
VALUES = 1000
ROW_GROUPS = 16  # per file: write.parquet.row-group-size-bytes is set for about this many
DOMAIN = 1_000_000
ROW = ("pmod(xxhash64(id, 1), 1000000), pmod(xxhash64(id, 2), 1000000), pmod(xxhash64(id, 3), 1000000), "
       "concat('row-', CAST(id AS STRING)) FROM range({first}, {last})")


def size(args) -> str:
    return f"{args.rows:,} rows, n = {', '.join(map(str, COUNTS))} files, k = 2 and 3 columns"


def _table():
    return lakerules._backend.catalogs.get("lake").load_table("bench.s")


def _live(table):
    return [task.file for task in table.scan().plan_files()]


def _row_group_boxes(paths) -> list[list[tuple]]:
    """Each file's row groups' [min, max] boxes, from the Parquet footers."""
    out = []
    for p in paths:
        meta = pq.read_metadata(local_path(p))
        names = meta.schema.to_arrow_schema().names
        out.append([tuple((s.min, s.max) for s in (meta.row_group(i).column(names.index(c)).statistics for c in COLUMNS))
                    for i in range(meta.num_row_groups)])
    return out


def _file_boxes(groups: list[list[tuple]]) -> list[tuple]:
    return [tuple((min(g[j][0] for g in file), max(g[j][1] for g in file)) for j in range(len(COLUMNS)))
            for file in groups]


def shares(boxes: list[tuple], seed: int) -> dict:
    """Mean share of files each kind of predicate meets."""
    rnd = random.Random(seed)
    n = len(boxes)
    out = {}
    for j, c in enumerate(COLUMNS):
        values = [rnd.randrange(DOMAIN) for _ in range(VALUES)]
        out[c] = statistics.mean(sum(1 for b in boxes if b[j][0] <= v <= b[j][1]) / n for v in values)
    width = DOMAIN // 100
    for j, c in enumerate(COLUMNS):
        lows = [rnd.randrange(DOMAIN - width) for _ in range(VALUES)]
        out["range " + c] = statistics.mean(sum(1 for b in boxes if b[j][0] <= x + width and x <= b[j][1]) / n
                                            for x in lows)
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

    from deltalake import DeltaTable, WriterProperties, write_deltalake

    work = OUT / NAME / "work"
    delta_source = work / "delta-source"
    shutil.rmtree(delta_source, ignore_errors=True)
    rows = ds.dataset([local_path(p) for p in source], format="parquet").to_table()
    rows = rows.cast(pa.schema([pa.field(f.name, f.type) for f in rows.schema]))  # without Iceberg field ids
    write_deltalake(str(delta_source), rows)
    del rows
    delta_total = sum(os.path.getsize(p) for p in glob.glob(str(delta_source / "*.parquet")))
    frame = spark.read.parquet(*source)

    # uncompressed bytes a row takes in Parquet: what the writers' row group sizes count
    footers = [pq.read_metadata(local_path(p)) for p in source]
    row_bytes = sum(m.row_group(i).total_byte_size for m in footers for i in range(m.num_row_groups)) / args.rows
    spark.sql("ALTER TABLE lake.bench.s SET TBLPROPERTIES ('write.parquet.row-group-check-min-record-count' = '10', "
              "'write.parquet.row-group-check-max-record-count' = '100')")
    for k in (2, 3):
        cols = COLUMNS[:k]
        for n in COUNTS:
            group_rows = max(1, args.rows // (n * ROW_GROUPS))
            group_bytes = max(1024, int(group_rows * row_bytes))
            got = {}
            for curve in ("ZORDER", "HILBERT"):
                _table().manage_snapshots().rollback_to_snapshot(start).commit()
                spark.sql(f"ALTER TABLE lake.bench.s SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '{total // n}', "
                          f"'write.parquet.row-group-size-bytes' = '{group_bytes}')")
                spark.sql(f"OPTIMIZE lake.bench.s {curve} BY ({', '.join(cols)})").collect()
                got[curve] = _row_group_boxes([f.file_path for f in _live(_table())])
            out = work / "plain"
            shutil.rmtree(out, ignore_errors=True)
            (frame.repartitionByRange(n, *cols).sortWithinPartitions(*cols).write
             .option("parquet.block.size", group_bytes).option("parquet.block.size.row.check.min", 10)
             .option("parquet.block.size.row.check.max", 100).parquet(str(out)))
            got["linear"] = _row_group_boxes(sorted(glob.glob(str(out / "*.parquet"))))
            copy = work / "delta"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(delta_source, copy)
            DeltaTable(str(copy)).optimize.z_order(list(cols), target_size=delta_total // n,
                                                   writer_properties=WriterProperties(max_row_group_size=group_rows))
            got["delta"] = _row_group_boxes(sorted(glob.glob(str(copy / "*.parquet"))))
            live = {Path(p).name for p in DeltaTable(str(copy)).file_uris()}
            got["delta"] = [g for p, g in zip(sorted(glob.glob(str(copy / "*.parquet"))), got["delta"]) if Path(p).name in live]
            seed = k * 100 + n
            files = {name: shares(_file_boxes(groups), seed) for name, groups in got.items()}
            groups = {name: shares([b for file in g for b in file], seed) for name, g in got.items()}
            bound = 1.2 * n ** (-1 / k)
            worst = max(files["ZORDER"][c] for c in cols)

            def show(measured, name, label, unit):
                m = measured[name]
                count = len(got[name]) if unit == "files" else sum(map(len, got[name]))
                return (f"{label} ({count} {unit}): point {' / '.join(f'{m[c]:.2f}' for c in cols)}, "
                        f"1% range {' / '.join(format(m['range ' + c], '.2f') for c in cols)}, corner {m['corner']:.2f}")

            def line(measured, unit):
                return "; ".join([f"**{show(measured, 'ZORDER', 'lakerules z-order', unit)}**",
                                  f"**{show(measured, 'HILBERT', 'lakerules Hilbert', unit)}**",
                                  show(measured, "delta", "delta-rs z_order", unit),
                                  show(measured, "linear", "Spark linear sort", unit)])

            report.add(
                f"k = {k} ({', '.join(cols)}), n = {n}: share of files met (ideal point {n ** (-1 / k):.2f})",
                line(files, "files"), f"z-order point <= {bound:.2f}", verdict(worst <= bound and len(got["ZORDER"]) == n),
            )
            z, h = groups["ZORDER"], groups["HILBERT"]
            ranges = [f"range {c}" for c in cols]
            mean_z, mean_h = (statistics.mean(m[r] for r in ranges) for m in (z, h))
            ahead = mean_h <= mean_z and max(h[r] for r in ranges) <= max(z[r] for r in ranges)
            report.add(
                f"k = {k}, n = {n}: share of row groups met (about {ROW_GROUPS} a file); 1% ranges, mean over the "
                f"columns: z-order {mean_z:.3f}, Hilbert {mean_h:.3f}",
                line(groups, "row groups"), "Hilbert ranges at or ahead of z-order (mean and worst column)",
                verdict(ahead),
            )
            print(f"  k={k} n={n} done", flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.execv(sys.executable, [sys.executable, str(Path(__file__).with_name("run.py")), "--only", NAME, *sys.argv[1:]])
