"""OPTIMIZE ... ZORDER BY (seed 001): file skipping and wall time of lakerules' z-order against a
plain Spark range-partitioned sort and delta-rs's z_order, on the same rows, into 16 files.

    .venv/bin/python bench/run.py --only optimize --rows 4000000

Rows: a and b, uniform BIGINTs in [0, 1,000,000) (independent hashes of the row number), a string
and a double.
Skipping is measured as the mean share of the output files whose [min, max] of a column can hold
a point predicate's value (2,000 values drawn uniformly between the column's min and max): for 2
columns and 16 files a perfect 4 x 4 grid gives 0.25 on each; a linear sort gives about 1/16 on
its first column and 1.0 on the second.
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

from common import OUT, Report, timed, verdict

NAME = "optimize"
FILES = 16
VALUES = 2000
ROW = ("pmod(xxhash64(id, 1), 1000000), pmod(xxhash64(id, 2), 1000000), concat('row-', CAST(id AS STRING)), "
       "rand(3) FROM range({first}, {last})")


def _catalog():
    return lakerules._backend.catalogs.get("lake")


def _table():
    return _catalog().load_table("bench.z")


def _live(table):
    return [task.file for task in table.scan().plan_files()]


def setup(spark, rows: int) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql("CREATE TABLE lake.bench.z (a BIGINT, b BIGINT, s STRING, d DOUBLE)")
    spark.sql(f"""INSERT INTO lake.bench.z SELECT {ROW.format(first=0, last=rows)}""")


# ---- skipping ---------------------------------------------------------------------------------


def _probes(lo: int, hi: int, seed: int) -> list[int]:
    rnd = random.Random(seed)
    return [rnd.randint(lo, hi) for _ in range(VALUES)]


def _share(ranges: list[tuple[int, int]], values: list[int]) -> float:
    """Mean share of files whose [min, max] can hold each value."""
    return statistics.mean(sum(1 for lo, hi in ranges if lo <= v <= hi) / len(ranges) for v in values)


def _iceberg_ranges(files, field_id: int) -> list[tuple[int, int]]:
    def value(b: bytes) -> int:
        return int.from_bytes(b, "little", signed=True)

    return [(value(f.lower_bounds[field_id]), value(f.upper_bounds[field_id])) for f in files]


def _parquet_ranges(paths, column: str) -> list[tuple[int, int]]:
    out = []
    for p in paths:
        meta = pq.read_metadata(p)
        index = meta.schema.to_arrow_schema().get_field_index(column)
        stats = [meta.row_group(i).column(index).statistics for i in range(meta.num_row_groups)]
        out.append((min(s.min for s in stats), max(s.max for s in stats)))
    return out


def _delta_ranges(path: str, column: str) -> list[tuple[int, int]]:
    from deltalake import DeltaTable

    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True))  # arro3 -> pyarrow
    return list(zip(actions[f"min.{column}"].to_pylist(), actions[f"max.{column}"].to_pylist()))


# ---- contenders -------------------------------------------------------------------------------


def zorder(spark, runs: int, report: Report, rows: int) -> dict:
    table = _table()
    start = table.current_snapshot().snapshot_id
    source = [f.file_path for f in _live(table)]
    total = sum(f.file_size_in_bytes for f in _live(table))
    spark.sql(f"ALTER TABLE lake.bench.z SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '{total // FILES}')")
    before = _table().current_snapshot().snapshot_id
    work = OUT / NAME / "work"

    def lake():
        # each run starts from the unclustered files: roll back to them first (not timed)
        _table().manage_snapshots().rollback_to_snapshot(before).commit()
        return timed(lambda: spark.sql("OPTIMIZE lake.bench.z ZORDER BY (a, b)").collect())

    def plain():
        out = work / "plain"
        shutil.rmtree(out, ignore_errors=True)
        df = spark.read.parquet(*source)
        return timed(lambda: df.repartitionByRange(FILES, "a", "b").sortWithinPartitions("a", "b")
                     .write.option("compression", "zstd").parquet(str(out)))

    # delta-rs: the same rows as a Delta table, copied afresh for each run (not timed)
    from deltalake import DeltaTable, write_deltalake

    delta_source = work / "delta-source"
    shutil.rmtree(delta_source, ignore_errors=True)
    rows_ = ds.dataset([p.replace("file://", "") for p in source], format="parquet").to_table()
    rows_ = rows_.cast(pa.schema([pa.field(f.name, f.type) for f in rows_.schema]))  # without Iceberg field ids
    write_deltalake(str(delta_source), rows_)
    del rows_
    delta_total = sum(os.path.getsize(p) for p in glob.glob(str(delta_source / "*.parquet")))

    def delta():
        copy = work / "delta"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(delta_source, copy)
        dt = DeltaTable(str(copy))
        return timed(lambda: dt.optimize.z_order(["a", "b"], target_size=delta_total // FILES))

    times = {"lake": [], "plain": [], "delta": []}
    for _ in range(runs):
        for name, fn in (("lake", lake), ("plain", plain), ("delta", delta)):
            times[name].append(fn())
    t = {k: statistics.median(v) for k, v in times.items()}

    # skipping of each contender's last output
    lake_files = _live(_table())
    plain_files = sorted(glob.glob(str(work / "plain" / "*.parquet")))
    lo_a, hi_a = min(r[0] for r in _iceberg_ranges(lake_files, 1)), max(r[1] for r in _iceberg_ranges(lake_files, 1))
    lo_b, hi_b = min(r[0] for r in _iceberg_ranges(lake_files, 2)), max(r[1] for r in _iceberg_ranges(lake_files, 2))
    pa_, pb_ = _probes(lo_a, hi_a, 1), _probes(lo_b, hi_b, 2)
    share = {
        "lake": (_share(_iceberg_ranges(lake_files, 1), pa_), _share(_iceberg_ranges(lake_files, 2), pb_), len(lake_files)),
        "plain": (_share(_parquet_ranges(plain_files, "a"), pa_), _share(_parquet_ranges(plain_files, "b"), pb_), len(plain_files)),
        "delta": (_share(_delta_ranges(str(work / "delta"), "a"), pa_), _share(_delta_ranges(str(work / "delta"), "b"), pb_),
                  len(_delta_ranges(str(work / "delta"), "a"))),
    }
    ok = share["lake"][0] <= 0.30 and share["lake"][1] <= 0.30
    report.add(
        f"file skipping, point predicates on a / b: mean share of the output files whose [min, max] can hold the value "
        f"(ideal for 2 columns and {FILES} files: 0.25)",
        f"lakerules **{share['lake'][0]:.2f} / {share['lake'][1]:.2f}** ({share['lake'][2]} files); "
        f"delta-rs z_order {share['delta'][0]:.2f} / {share['delta'][1]:.2f} ({share['delta'][2]} files); "
        f"linear sort {share['plain'][0]:.2f} / {share['plain'][1]:.2f} ({share['plain'][2]} files)",
        "<= 0.30 on each", verdict(ok),
    )
    ratio = t["lake"] / t["plain"]
    per_run = [a / b for a, b in zip(times["lake"], times["plain"])]
    best = min(times["lake"]) / min(times["plain"])
    report.add(
        f"OPTIMIZE ZORDER BY (a, b) of {rows:,} rows into {FILES} files vs plain Spark "
        f"repartitionByRange({FILES}, a, b).sortWithinPartitions(a, b) rewrite (median of {runs}, in turns)",
        f"{t['lake']:.2f} s vs {t['plain']:.2f} s = **{ratio:.2f}x**; each run's ratio "
        f"{', '.join(f'{r:.2f}x' for r in per_run)} (median {statistics.median(per_run):.2f}x); best run of each "
        f"{min(times['lake']):.2f} s vs {min(times['plain']):.2f} s = {best:.2f}x",
        "<= 1.3x", verdict(ratio <= 1.3),
    )
    report.add(
        "OPTIMIZE ZORDER BY (a, b) vs delta-rs (deltalake) optimize.z_order([a, b]) of the same rows",
        f"{t['lake']:.2f} s vs {t['delta']:.2f} s = **{t['lake'] / t['delta']:.2f}x**", "report", "",
    )
    report.add(
        "  per run (lakerules / plain Spark / delta-rs, s)",
        ", ".join(f"{a:.2f} / {b:.2f} / {c:.2f}" for a, b, c in zip(times["lake"], times["plain"], times["delta"])),
    )
    return {"share": share, "times": t}


def incremental(spark, rows: int, report: Report) -> None:
    """Rule 6: after the z-order, 1% new rows arrive; OPTIMIZE ZORDER BY again, by default (the
    new rows are under incrementalRatio 0.1 of the cube: they are clustered on their own) and with
    incrementalRatio 0 (the cube and the new rows are z-ordered together again)."""
    spark.sql(f"""INSERT INTO lake.bench.z SELECT {ROW.format(first=rows, last=rows + rows // 100)}""")
    arrived = _table().current_snapshot().snapshot_id

    def measure(ratio: float):
        _table().manage_snapshots().rollback_to_snapshot(arrived).commit()
        spark.sql(f"ALTER TABLE lake.bench.z SET TBLPROPERTIES ('lakerules.optimize.zorder.incrementalRatio' = '{ratio}')")
        seconds = timed(lambda: spark.sql("OPTIMIZE lake.bench.z ZORDER BY (a, b)").collect())
        files = _live(_table())
        rewritten = int(_table().current_snapshot().summary["deleted-data-files"])
        ra, rb = _iceberg_ranges(files, 1), _iceberg_ranges(files, 2)
        pa_ = _probes(min(r[0] for r in ra), max(r[1] for r in ra), 1)
        pb_ = _probes(min(r[0] for r in rb), max(r[1] for r in rb), 2)
        return seconds, rewritten, len(files), _share(ra, pa_), _share(rb, pb_)

    full = measure(0.0)
    inc = measure(0.1)  # the default, last: the table is left as it would be
    again = timed(lambda: spark.sql("OPTIMIZE lake.bench.z ZORDER BY (a, b)").collect())
    report.add(
        f"1% new rows ({rows // 100:,}) after the z-order, OPTIMIZE ZORDER BY (a, b) again: by default (the new rows "
        "are under incrementalRatio 0.1 of the cube: clustered on their own) vs incrementalRatio 0 (all z-ordered again)",
        f"default: {inc[0]:.2f} s, {inc[1]} files rewritten, skipping a / b **{inc[3]:.2f} / {inc[4]:.2f}** "
        f"({inc[2]} files); all again: {full[0]:.2f} s, {full[1]} files rewritten, skipping "
        f"{full[3]:.2f} / {full[4]:.2f} ({full[2]} files); then the same OPTIMIZE again: {again:.2f} s, nothing rewritten",
        "report", "",
    )


def run(spark, args, report: Report) -> None:
    t0 = time.perf_counter()
    setup(spark, args.rows)
    print(f"  (table of {args.rows:,} rows written in {time.perf_counter() - t0:.1f} s)", flush=True)
    zorder(spark, args.runs, report, args.rows)
    incremental(spark, args.rows, report)
    shutil.rmtree(OUT / NAME / "work", ignore_errors=True)


if __name__ == "__main__":
    # the runner, as its own program (it imports this module: no import circle)
    os.execv(sys.executable, [sys.executable, str(Path(__file__).with_name("run.py")), "--only", NAME, *sys.argv[1:]])
