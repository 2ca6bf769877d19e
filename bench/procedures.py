"""Iceberg's maintenance procedures against the statements they share an engine with (issue 19):
CALL system.rewrite_data_files(sort_order => 'zorder(a, b)') against OPTIMIZE ... ZORDER BY (a, b),
on the optimize benchmark's table (bench/optimize.py: a and b uniform BIGINTs), into 16 files.

    .venv/bin/python bench/run.py --only procedures --rows 1000000 --runs 1

Both start from the same snapshot (the unclustered table, rolled back to between them). Skipping:
for 2,000 point values on a and on b (uniform between the column's min and max), how many files
each layout's [min, max] ranges can hold (the files a point query reads); and the files EXPLAIN
says 20 point queries on each column read.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
from pathlib import Path

import optimize as opt
from common import Report, timed, verdict

NAME = "procedures"
QUERIES = 20


def size(args) -> str:
    return f"the optimize benchmark's table of {args.rows:,} rows"


def _counts(files, values_a, values_b) -> tuple[list[int], list[int]]:
    ra, rb = opt._iceberg_ranges(files, 1), opt._iceberg_ranges(files, 2)
    return ([sum(1 for lo, hi in ra if lo <= v <= hi) for v in values_a],
            [sum(1 for lo, hi in rb if lo <= v <= hi) for v in values_b])


def _explained(spark, values_a, values_b) -> list[int]:
    """Files EXPLAIN says each point query reads (files=k/n), a's queries then b's."""
    out = []
    for column, values in (("a", values_a), ("b", values_b)):
        for v in values[:QUERIES]:
            text = spark.sql(f"EXPLAIN SELECT * FROM lake.bench.z WHERE {column} = {int(v)}").first()[0]
            out.append(int(re.search(r"files=(\d+)/", text).group(1)))
    return out


def run(spark, args, report: Report) -> None:
    opt.setup(spark, args.rows)
    table = opt._table()
    total = sum(f.file_size_in_bytes for f in opt._live(table))
    target = total // opt.FILES
    spark.sql(f"ALTER TABLE lake.bench.z SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '{target}')")
    start = opt._table().current_snapshot().snapshot_id
    # the point values, between each column's min and max over the unclustered files
    ra, rb = opt._iceberg_ranges(opt._live(table), 1), opt._iceberg_ranges(opt._live(table), 2)
    values_a = opt._probes(min(r[0] for r in ra), max(r[1] for r in ra), 1)
    values_b = opt._probes(min(r[0] for r in rb), max(r[1] for r in rb), 2)
    layouts, explained, times = {}, {}, {"optimize": [], "procedure": []}
    statements = {
        "optimize": "OPTIMIZE lake.bench.z ZORDER BY (a, b)",
        "procedure": ("CALL lake.system.rewrite_data_files(table => 'bench.z', strategy => 'sort', "
                      f"sort_order => 'zorder(a, b)', options => map('target-file-size-bytes', '{target}'))"),
    }
    for run_index in range(args.runs + 1):  # the first turn warms the JVM up, untimed
        for name, sql in statements.items():
            opt._table().manage_snapshots().rollback_to_snapshot(start).commit()  # not timed
            seconds = timed(lambda sql=sql: spark.sql(sql).collect())
            if run_index:
                times[name].append(seconds)
            layouts[name] = opt._live(opt._table())
            explained[name] = _explained(spark, values_a, values_b)
    counts = {name: _counts(files, values_a, values_b) for name, files in layouts.items()}
    same = counts["optimize"] == counts["procedure"] and explained["optimize"] == explained["procedure"]
    o, p = counts["optimize"], counts["procedure"]
    report.add(
        f"files a point query on a / b reads, rewrite_data_files(sort_order => 'zorder(a, b)') vs OPTIMIZE ZORDER BY "
        f"(a, b): total over {len(values_a):,} values each (from the files' ranges), and over {QUERIES} EXPLAINed "
        "queries each",
        f"procedure **{sum(p[0]):,} / {sum(p[1]):,}** ({len(layouts['procedure'])} files), OPTIMIZE "
        f"**{sum(o[0]):,} / {sum(o[1]):,}** ({len(layouts['optimize'])} files); per value "
        f"{'identical' if o == p else 'DIFFERENT'}; EXPLAIN {sum(explained['procedure'])} vs "
        f"{sum(explained['optimize'])} files, per query {'identical' if explained['optimize'] == explained['procedure'] else 'DIFFERENT'}",
        "identical", verdict(same),
    )
    t = {k: statistics.median(v) for k, v in times.items()}
    report.add(
        f"time, rewrite_data_files vs OPTIMIZE (median of {args.runs}, in turns, after a turn of each untimed)",
        f"{t['procedure']:.2f} s vs {t['optimize']:.2f} s = {t['procedure'] / t['optimize']:.2f}x", "report", "",
    )


if __name__ == "__main__":
    os.execv(sys.executable, [sys.executable, str(Path(__file__).with_name("run.py")), "--only", NAME, *sys.argv[1:]])
