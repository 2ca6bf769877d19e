"""Answers from metadata (issue #19): ``count(*)``, ``min(id)``, ``max(id)`` of a --files table
(default 2,000 files of 50 rows, the scale benchmark's generated table, reused with --reuse)
answered from the manifests vs the same query with Iceberg's aggregate push-down setting off
(Spark reads every file); both must give the same row. Then reading the table's ``files``
metadata table (one row per data file, with its metrics) vs pyiceberg's ``inspect.files()``.
"""

from __future__ import annotations

import scale
from common import Report, side_by_side, verdict

ROWS, COMMITS = 50, 40
QUERY = "SELECT count(*), min(id), max(id) FROM lake.bench.agg"
OFF = "spark.sql.iceberg.aggregate-push-down.enabled"


def size(args) -> str:
    return f"{args.metadata_files:,} files x {ROWS} rows"


def run(spark, args, report: Report) -> None:
    files = args.metadata_files
    info = scale.generate(files, ROWS, COMMITS, args.reuse)
    print(f"  ({files:,} files: {scale._generated(info)})", flush=True)
    scale.register(spark, "agg", info)

    def answered():
        return tuple(spark.sql(QUERY).collect()[0])

    def scanned():
        spark.conf.set(OFF, "false")
        try:
            return tuple(spark.sql(QUERY).collect()[0])
        finally:
            spark.conf.unset(OFF)

    explained = spark.sql(f"EXPLAIN {QUERY}").first()[0]
    from_metadata = "aggregate answered from metadata" in explained and "FileScan" not in explained
    expected = (files * ROWS, 0, files * ROWS - 1)
    same = answered() == scanned() == expected
    t = side_by_side(args.runs, metadata=answered, scan=scanned)
    ratio = t["metadata"] / t["scan"]
    report.add(f"{QUERY.replace('lake.bench.agg', 't')} on {files:,} files x {ROWS} rows ({info['commits']} commits): "
               "answered from the manifests vs the scan of every file (push-down off)",
               f"{t['metadata']:.2f} s vs {t['scan']:.2f} s = **{ratio:.2f}x**; results identical: {same}; "
               f"EXPLAIN says answered from metadata, no FileScan: {from_metadata}",
               "< 1x, identical", verdict(ratio < 1 and same and from_metadata))

    table = scale._catalog().load_table(("bench", "agg"))
    t = side_by_side(args.runs, ours=lambda: spark.sql("SELECT count(*), sum(file_size_in_bytes), "
                                                       "max(readable_metrics.id.upper_bound) FROM lake.bench.agg.files").collect(),
                     theirs=lambda: table.inspect.files())
    ours, theirs = t["ours"], t["theirs"]
    row = spark.sql("SELECT count(*), max(readable_metrics.id.upper_bound) FROM lake.bench.agg.files").first()
    report.add(f"SELECT ... FROM t.files ({files:,} rows with their metrics) through Spark vs pyiceberg inspect.files()",
               f"{ours:.2f} s vs {theirs:.2f} s (warm, median); rows {row[0]:,}, max upper bound of id {row[1]:,} "
               f"(as expected: {tuple(row) == (files, files * ROWS - 1)})")
    report.note("The table is the scale benchmark's generator's (pyarrow files with Iceberg field ids, registered with "
                "pyiceberg add_files; bench/out/scale/cache/, reused with --reuse). Its double column v has no NaN "
                "counts in its metrics, so only count(*) and min/max of id are asked.")
