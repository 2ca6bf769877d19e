"""Pictures of the optimize benchmark's table (bench/optimize.py: a and b uniform in
[0, 1,000,000), 16 files) drawn by `lakerules.inspect(..., plot=...)`: each data file's [min, max]
box over (a, b) as written, after OPTIMIZE ... ZORDER BY (a, b), and after a linear sort by
(a, b) into 16 files for comparison. Needs the `plot` extra (matplotlib).

    .venv/bin/python bench/layout.py [--rows 4000000] [--out docs/img]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lakerules  # noqa: E402
from common import session  # noqa: E402
from optimize import FILES, ROW  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "img"))
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spark = session("layout")
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    spark.conf.set("spark.sql.shuffle.partitions", str(FILES))
    spark.sql("CREATE NAMESPACE lake.bench")
    for t in ("z", "linear"):
        spark.sql(f"CREATE TABLE lake.bench.{t} (a BIGINT, b BIGINT, s STRING, d DOUBLE)")
    # the benchmark's rows, written by 16 tasks: 16 files
    spark.sql(f"INSERT INTO lake.bench.z SELECT {ROW.format(first=0, last=args.rows)[:-1]}, 1, {FILES})")
    rows = f"{args.rows:,} rows"

    def draw(table: str, name: str, what: str):
        h = lakerules.inspect(table, ["a", "b"])
        from lakerules.metadata.health import plot

        plot(h, out / name, title=f"{what}: {h.data_files} files, {rows}")
        print(f"{what}: {h.data_files} files; a point predicate reads {h.columns[0].share:.2f} of files on a, "
              f"{h.columns[1].share:.2f} on b -> {out / name}")

    draw("lake.bench.z", "layout-as-written.png", "as written")
    total = sum(lakerules.inspect("lake.bench.z").sizes)
    spark.sql("INSERT INTO lake.bench.linear SELECT * FROM lake.bench.z ORDER BY a, b")
    spark.sql(f"ALTER TABLE lake.bench.z SET TBLPROPERTIES ('lakerules.optimize.targetFileSize' = '{total // FILES}')")
    spark.sql("OPTIMIZE lake.bench.z ZORDER BY (a, b)").collect()
    draw("lake.bench.z", "layout-zorder.png", "OPTIMIZE ZORDER BY (a, b)")
    draw("lake.bench.linear", "layout-linear-sort.png", "linear sort ORDER BY a, b")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
