"""UPDATE benchmark: UPDATE of 0.1% of rows spread over a table, on fresh copies of it:

- lakerules' split write (one read; position deletes + new rows in one snapshot);
- pyiceberg's copy-on-write: read the rows, then ``table.overwrite(new_rows, In("id", ids))``;
- lakerules as two statements: ``DELETE``, then ``INSERT`` of the new rows read from the
  snapshot before the DELETE (time travel).

Bytes written (data and delete files the snapshots added) and wall time, one run each.
"""

from __future__ import annotations

import statistics
import time

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import In

import lakerules

from common import Report, verdict
from delete import AGG, FRACTION, fresh, setup


def _added_bytes(table, since: int | None) -> int:
    """Bytes of data and delete files added by the snapshots after ``since``."""
    total = 0
    for s in table.snapshots():
        if since is not None and s.sequence_number <= since:
            continue
        total += int(s.summary.get("added-files-size") or 0)
    return total


def run(spark, args, report: Report) -> None:
    t0 = time.perf_counter()
    setup(spark, args.rows)  # lake.bench.base
    print(f"  (table of {args.rows:,} rows written in {time.perf_counter() - t0:.1f} s)", flush=True)
    cat = lakerules._backend.catalogs.get("lake")
    where = f"id % {FRACTION} = 7"
    ids = [r.id for r in spark.sql(f"SELECT id FROM lake.bench.base WHERE {where}").collect()]
    fresh(spark, "warm")  # warm-up, untimed
    spark.sql(f"UPDATE lake.bench.warm SET kind = 'w' WHERE id % {FRACTION} = 3").collect()

    def split():
        spark.sql(f"UPDATE lake.bench.mor SET kind = 'upd', v = v + 1 WHERE {where}").collect()

    def cow_overwrite():
        cow = cat.load_table("bench.cow")
        old = cow.scan(row_filter=In("id", ids)).to_arrow()
        new = old.set_column(old.schema.get_field_index("kind"), old.schema.field("kind"),
                             pa.array(["upd"] * len(old), old.schema.field("kind").type))
        new = new.set_column(new.schema.get_field_index("v"), new.schema.field("v"), pc.add(new.column("v"), 1.0))
        cow.overwrite(new, overwrite_filter=In("id", ids))

    def two_statements():
        before = cat.load_table("bench.two").current_snapshot().snapshot_id
        spark.sql(f"DELETE FROM lake.bench.two WHERE {where}").collect()
        spark.sql(f"""INSERT INTO lake.bench.two SELECT id, ts, 'upd', v + 1, payload
                      FROM lake.bench.two VERSION AS OF {before} WHERE {where}""").collect()

    contenders = {"mor": split, "cow": cow_overwrite, "two": two_statements}
    times = {k: [] for k in contenders}
    seq = {}
    for i in range(args.runs):  # in turns, each on a fresh copy
        for name, fn in contenders.items():
            fresh(spark, name)
            seq[name] = cat.load_table(f"bench.{name}").current_snapshot().sequence_number
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
        print(f"    run {i + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    results = [spark.sql(AGG.format(src=f"lake.bench.{t}")).collect() for t in ("mor", "cow", "two")]
    same = results[0] == results[1] == results[2]
    b = {name: _added_bytes(cat.load_table(f"bench.{name}"), seq[name]) for name in ("mor", "cow", "two")}
    report.add(
        f"UPDATE of {len(ids):,} rows (0.1% of {args.rows:,}, spread): lakerules split write vs pyiceberg "
        "copy-on-write overwrite, bytes written",
        f"{b['mor']:,} B vs {b['cow']:,} B = **{b['mor'] / b['cow']:.4f}x**", "report", "",
    )
    report.add(f"  the same, wall time (median of {args.runs} runs in turns, fresh copies, after a warm-up)",
               f"{med['mor']:.2f} s vs {med['cow']:.2f} s = **{med['mor'] / med['cow']:.2f}x**; "
               f"tables read identically: {same}", "report", verdict(same))
    report.add("lakerules UPDATE (split write, one statement) vs DELETE then INSERT of the same rows",
               f"{med['mor']:.2f} s vs {med['two']:.2f} s = **{med['mor'] / med['two']:.2f}x**; "
               f"bytes {b['mor']:,} vs {b['two']:,}", "split write faster", verdict(med['mor'] < med['two'] and same))
