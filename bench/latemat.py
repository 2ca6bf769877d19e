"""Late materialization benchmark (issue 7, seed 004): a 60-column table, a filter on 3 columns.

- the needle: ``k1 = 7 AND k2 = 13 AND k3 = 'v42'`` selects 100 rows, contiguous in
  id (rows arrive in id order, as a burst of one customer's events would), so they sit in one
  or two of the table's row groups; SELECT * and SELECT of 16 columns, late materialization (``on``
  and ``auto``) vs the plain scan (``off``): wall time and bytes read;
- the spread needle (issue 21: >= 2x faster than the plain scan): 20 rows, one in each of 20 of
  the 32 row groups, so phase two reads only the pages holding them, and ``auto`` must see from
  its first pass's pages that splitting pays; and 100 rows spread over the whole table
  (``k3 = 'v43'``, 3 or 4 in every row group, reported);
- a filter keeping half the rows (``k1 < 500 AND k2 >= 0 AND k3 <> 'v42'``), every column
  written to Spark's noop sink: ``auto`` vs ``off``.

Bytes read: the Hadoop file system's bytes-read counter of the ``file`` scheme (local mode: the
executors share the driver's JVM), taken before and after each query; the same counter Spark's
stage input metrics come from. Parquet's vectored reads of local files bypass that counter, so
the module turns them off (``parquet.hadoop.vectored.io.enabled=false``) for both sides.
"""

from __future__ import annotations

import time

import lakerules
from lakerules.scan.latemat import SETTING

from common import Report, side_by_side, verdict

COLUMNS = 60
FILTER_COLUMNS = ("k1", "k2", "k3")
# each value is common (1 row in 1,000 has it, in every row group and its dictionary, so neither
# statistics nor dictionaries skip a row group); only the conjunction is rare
NEEDLE = "k1 = 7 AND k2 = 13 AND k3 = 'v42'"
SPREAD = "k1 = 7 AND k2 = 13 AND k3 = 'v43'"
HALF = "k1 < 500 AND k2 >= 0 AND k3 <> 'v42'"
_KINDS = ("BIGINT", "DOUBLE", "STRING", "INT")
ROWS_PER_FILE = 625_000
ROW_GROUP_BYTES = 32 * 2**20
SMALL_PAGE_ROWS = 5_000  # write.parquet.page-row-limit of the copy with smaller pages (Spark's default: 20,000)


def _others(columns: int = COLUMNS) -> list[tuple[str, str, str]]:
    """(name, type, expression) of the columns besides id, k1, k2, k3 (56 of the 60 by default)."""
    out = []
    for j in range(4, columns):
        kind = _KINDS[j % 4]
        h = f"pmod(xxhash64(id, {j}), 1000000)"
        expr = {"BIGINT": h, "DOUBLE": f"CAST({h} AS DOUBLE) / 100", "STRING": f"concat('s', {h} % 100000)",
                "INT": f"CAST({h} % 1000 AS INT)"}[kind]
        out.append((f"c{j}", kind, expr))
    return out


def setup(spark, rows: int, files: int) -> tuple[int, int]:
    start = rows * 37 // 100  # the needle's first id
    step = rows // 100  # the spread rows: one in every `step`
    others = _others()
    ddl = ", ".join(["id BIGINT", "k1 INT", "k2 INT", "k3 STRING"] + [f"{n} {t}" for n, t, _ in others])
    needle = f"id BETWEEN {start} AND {start + 99}"
    spread = f"id % {step} = {step // 2}"
    special = f"({needle} OR {spread})"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql(f"CREATE TABLE lake.bench.wide ({ddl}) "
              f"TBLPROPERTIES ('write.parquet.row-group-size-bytes' = '{ROW_GROUP_BYTES}')")
    spark.sql(f"""INSERT INTO lake.bench.wide SELECT id,
        CASE WHEN {special} THEN 7 ELSE CAST(pmod(xxhash64(id, 1), 1000) AS INT) END,
        CASE WHEN {special} THEN 13 ELSE CAST(pmod(xxhash64(id, 2), 1000) AS INT) END,
        CASE WHEN {needle} THEN 'v42' WHEN {spread} THEN 'v43'
             ELSE concat('v', pmod(xxhash64(id, 3), 1000)) END,
        {", ".join(e for _, _, e in others)}
        FROM range(0, {rows}, 1, {files})""")
    return start, step


def bytes_read(spark) -> int:
    total = 0
    for s in spark._jvm.org.apache.hadoop.fs.FileSystem.getAllStatistics():
        if s.getScheme() == "file":
            total += s.getBytesRead()
    return total


def measured(spark, mode: str, fn):
    """(seconds, bytes read, result) of fn under the setting."""
    spark.conf.set(SETTING, mode)
    try:
        b0, t0 = bytes_read(spark), time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, bytes_read(spark) - b0, out
    finally:
        spark.conf.unset(SETTING)


def under(spark, mode: str, fn):
    def run():
        spark.conf.set(SETTING, mode)
        try:
            return fn()
        finally:
            spark.conf.unset(SETTING)
    return run


def explain_note(spark, sql: str, mode: str) -> str:
    spark.conf.set(SETTING, mode)
    try:
        text = spark.sql("EXPLAIN " + sql).collect()[0].plan
    finally:
        spark.conf.unset(SETTING)
    return " ".join(line.strip() for line in text.splitlines() if "late materialization" in line)


def run(spark, args, report: Report) -> None:
    rows = args.rows
    spark.conf.set("parquet.hadoop.vectored.io.enabled", "false")  # so that the bytes-read counter sees every read
    files = max(4, rows // ROWS_PER_FILE)
    t0 = time.perf_counter()
    start, step = setup(spark, rows, files)
    print(f"  (table of {rows:,} rows x {COLUMNS} columns in {files} files written in {time.perf_counter() - t0:.1f} s)",
          flush=True)
    table = lakerules._backend.catalogs.get("lake").load_table("bench.wide")
    data = [task.file for task in table.scan().plan_files()]
    ids = {f.name: f.field_id for f in table.schema().fields}
    total = sum(f.file_size_in_bytes for f in data)
    pred = sum(f.column_sizes.get(ids[c], 0) for f in data for c in FILTER_COLUMNS)
    import pyarrow.parquet as pq

    groups = matched = matched_groups = 0
    for f in data:
        with table.io.new_input(f.file_path).open() as stream:
            meta = pq.read_metadata(stream)
        for i in range(meta.num_row_groups):
            rg = meta.row_group(i)
            groups += 1
            st = rg.column(0).statistics  # id
            if st.min <= start + 99 and st.max >= start:
                matched_groups += 1
                matched += sum(rg.column(j).total_compressed_size for j in range(rg.num_columns))
    bound = 1.3 * (pred + matched)
    report.note(f"Table: {rows:,} rows, {COLUMNS} columns (BIGINT/DOUBLE/STRING/INT), {files} files of "
                f"{rows // files:,} rows in {groups} row groups (write.parquet.row-group-size-bytes {ROW_GROUP_BYTES // 2**20} MiB), "
                f"{total / 2**20:.0f} MiB; the filter columns k1, k2, k3 are {pred / 2**20:.1f} MiB; the needle's "
                f"100 rows are in {matched_groups} row group(s) of {matched / 2**20:.1f} MiB.")

    sixteen = ", ".join(["id", *FILTER_COLUMNS] + [f"c{j}" for j in range(4, 16)])
    for label, cols in (("SELECT *", "*"), ("SELECT of 16 columns", sixteen)):
        sql = f"SELECT {cols} FROM lake.bench.wide WHERE {NEEDLE}"
        q = lambda: sorted(tuple(r) for r in spark.sql(sql).collect())  # noqa: E731
        off, on_ = under(spark, "off", q), under(spark, "on", q)
        assert off() == on_(), "late materialization changed the result"
        assert len(off()) >= 100
        t = side_by_side(args.runs, off=off, on=on_, auto=under(spark, "auto", q))
        _, b_off, _ = measured(spark, "off", q)
        _, b_on, _ = measured(spark, "on", q)
        speed = t["off"] / t["on"]
        ok = speed >= 3 if cols == "*" else True
        report.add(f"needle, {label}: plain scan vs late materialization (on), wall time",
                   f"{t['off']:.2f} s vs {t['on']:.2f} s = **{speed:.1f}x faster**; auto {t['auto']:.2f} s",
                   ">= 3x faster" if cols == "*" else "report", verdict(ok) if cols == "*" else "")
        report.add(f"needle, {label}: bytes read, plain vs late",
                   f"{b_off / 2**20:.1f} MiB vs **{b_on / 2**20:.1f} MiB** (bound 1.3 x (filter columns "
                   f"{pred / 2**20:.1f} MiB + matched row groups {matched / 2**20:.1f} MiB) = {bound / 2**20:.1f} MiB)",
                   "<= bound", verdict(b_on <= bound))
    report.note("EXPLAIN of the needle, SELECT *, auto: " + explain_note(spark, f"SELECT * FROM lake.bench.wide WHERE {NEEDLE}", "auto"))

    def spread(sql: str, rows: int):
        """Times (off, on, auto), bytes read (off, on) and auto's EXPLAIN of a query returning
        ``rows`` rows, after checking the three modes return the same rows."""
        q = lambda: sorted(tuple(r) for r in spark.sql(sql).collect())  # noqa: E731
        plain = under(spark, "off", q)()
        assert plain == under(spark, "on", q)() == under(spark, "auto", q)(), "late materialization changed the result"
        assert len(plain) == rows
        t = side_by_side(args.runs, off=under(spark, "off", q), on=under(spark, "on", q), auto=under(spark, "auto", q))
        _, b_off, _ = measured(spark, "off", q)
        _, b_on, _ = measured(spark, "on", q)
        return t, b_off, b_on, explain_note(spark, sql, "auto")

    t, b_off, b_on, note = spread(f"SELECT * FROM lake.bench.wide WHERE {SPREAD}", 100)
    speed = t["off"] / t["on"]
    report.add("100 rows spread over every row group (3 or 4 a row group), SELECT *: plain scan vs late "
               "materialization (on), wall time",
               f"{t['off']:.2f} s vs {t['on']:.2f} s = **{speed:.1f}x faster**; auto {t['auto']:.2f} s "
               f"({t['off'] / t['auto']:.1f}x, {'split' if ' split (' in note else 'not split'}); rows identical",
               "report", "")
    report.add("100 rows spread over every row group, SELECT *: bytes read, plain vs late",
               f"{b_off / 2**20:.1f} MiB vs **{b_on / 2**20:.1f} MiB** ({b_on / max(b_off, 1):.0%})", "report", "")
    report.note("EXPLAIN of the spread rows, SELECT *, auto: " + note)
    report.note("Bytes read by the spread rows' late read, beyond the pages EXPLAIN counts (phase two) and the filter "
                "columns (phase one): each row group's read re-reads the file's footer and the offset indexes of its "
                "columns, and the local file system reads checksum files (.crc) and refills its buffer after every "
                "seek, which whole-file scans do not pay; Spark's default pages hold 20,000 rows, so 3 rows per row "
                "group of 175,000 rows fall in 3 of its 9 pages of each column.")

    # the same 100 rows in a copy of the table written with smaller pages (the same rows in the same row groups)
    spark.sql(f"""CREATE TABLE lake.bench.wide_pages TBLPROPERTIES ('write.parquet.row-group-size-bytes' =
                  '{ROW_GROUP_BYTES}', 'write.parquet.page-row-limit' = '{SMALL_PAGE_ROWS}')
                  AS SELECT * FROM lake.bench.wide""")
    t, b_off, b_on, note_pages = spread(f"SELECT * FROM lake.bench.wide_pages WHERE {SPREAD}", 100)
    report.add(f"the 100 spread rows, table written with write.parquet.page-row-limit = {SMALL_PAGE_ROWS:,}, SELECT *: "
               "plain scan vs late materialization (on), wall time",
               f"{t['off']:.2f} s vs {t['on']:.2f} s = **{t['off'] / t['on']:.1f}x faster**; auto {t['auto']:.2f} s "
               f"({t['off'] / t['auto']:.1f}x, {'split' if ' split (' in note_pages else 'not split'}); rows identical; "
               f"bytes read {b_off / 2**20:.1f} MiB vs {b_on / 2**20:.1f} MiB", "report", "")
    report.note(f"EXPLAIN of the 100 spread rows, page-row-limit {SMALL_PAGE_ROWS:,}, auto: " + note_pages)
    spark.sql("DROP TABLE lake.bench.wide_pages PURGE")

    # the issue's case: 20 rows spread over 20 of the 32 row groups (every fifth of the spread rows)
    t, b_off, b_on, note20 = spread(f"SELECT * FROM lake.bench.wide WHERE {SPREAD} AND id % {5 * step} = {step // 2}", 20)
    speed = t["off"] / t["on"]
    report.add("the spread needle (issue 21's case): 20 rows spread over 20 of the 32 row groups, SELECT *: plain "
               "scan vs late materialization (on), wall time",
               f"{t['off']:.2f} s vs {t['on']:.2f} s = **{speed:.1f}x faster**; auto {t['auto']:.2f} s "
               f"({t['off'] / t['auto']:.1f}x, {'split' if ' split (' in note20 else 'not split'}); rows identical; "
               f"bytes read {b_off / 2**20:.1f} MiB vs {b_on / 2**20:.1f} MiB", ">= 2x faster", verdict(speed >= 2))
    report.note("EXPLAIN of the 20 spread rows, SELECT *, auto: " + note20)

    sql = f"SELECT * FROM lake.bench.wide WHERE {HALF}"
    q = lambda: spark.sql(sql).write.format("noop").mode("overwrite").save()  # noqa: E731
    t = side_by_side(args.runs, off=under(spark, "off", q), auto=under(spark, "auto", q))
    ratio = t["auto"] / t["off"]
    report.add("filter keeping 50% of rows, SELECT * to the noop sink: auto vs plain",
               f"{t['auto']:.2f} s vs {t['off']:.2f} s = **{ratio:.2f}x**", "<= 1.05x", verdict(ratio <= 1.05))
    report.note("EXPLAIN of the 50% filter, auto: " + explain_note(spark, sql, "auto"))
