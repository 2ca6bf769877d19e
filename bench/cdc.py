"""Streaming CDC upserts and small files (issue 22, items 3 and 4).

CDC: a table of --cdc-rows rows (id, v), two copies; --cdc-batches micro-batches of
--cdc-changes change events each (half updates of existing ids, 30% inserts of new ids, 20%
deletes of existing ids; a few ids twice in a batch, the newest wins), streamed from JSON files
(one file a micro-batch) into one ``foreachBatch`` function that applies each batch to both
copies in turns (the order alternating per batch), with examples/cdc_upserts.upsert_batch:

- ``merge``: one ``MERGE INTO ... ON t.id = c.id`` per batch, idempotent per batch (the batch
  id in the snapshot summary, found again with DESCRIBE HISTORY);
- ``eqdel``: ``lakerules.delete_by_key`` (equality deletes, no read of the target) then an
  append of the upserted rows.

Reported: per-batch latency (median, p90) of each, a replayed batch skipped, the two copies
read identically, and the reads (a full-scan aggregate, a point query) after the batches and
after OPTIMIZE as slowdowns against the same reads before the batches, each read timed
relative to the same read of a third, never changed copy (the reference) measured in turns
with it, so that the machine's load, which differs from one phase to the next, cancels. After
the batches, the delete_by_key copy is also read with its equality deletes anti-joined
(``spark.lakerules.read.equalityDeleteSetBytes=0``) in the same turns as with the JVM hash set (its
deleted rows resolved to positions per data file once, then dropped in the reader),
both checked to read the same rows; issue 33's rows: those reads against the reference table
(target <= 1.5x) and OPTIMIZE of the delete_by_key copy against OPTIMIZE of the MERGE copy
(target <= 2x).

MERGE against the minimal work (step ``merge``, issue 33): a fresh table of --cdc-rows rows
(--cdc-rows / 1,000,000 files, at least 2) and --cdc-batches batches of --cdc-changes changes
(the newest per id), twice: keys spread over every file (as above), and keys clustered (the
updates and deletes hit the last file's ids, the inserts are new ids). Per batch, in turns
(the order rotating): the MERGE of the example; the minimal work, a plain Spark join of the
batch's ids with the table's key column stored as plain Parquet (written once, before the
batches) plus writing the batch's rows as Parquet; and delta-rs's ``merge`` of the same batch
into a Delta table of the same rows (when the ``deltalake`` package is installed). Reported:
the median per-batch times and the median of the per-batch ratios MERGE / minimal; the tables
read identically after the batches (lakerules, pyiceberg and delta-rs: count, sum of ids, count
and total length of v).

Small files: --stream-batches micro-batches of a streaming append (``toTable``, 10 rows each,
one JSON file a batch): per-batch latency (Spark's triggerExecution), the data files left, then
OPTIMIZE's time and the files after.
"""

from __future__ import annotations

import importlib.util
import json
import random
import statistics
import time
from pathlib import Path

import lakerules

from common import OUT, Report, side_by_side, verdict

# the example's functions, loaded by path (examples/ has modules named like bench's: delete, update)
_spec = importlib.util.spec_from_file_location(
    "cdc_upserts", Path(__file__).resolve().parent.parent / "examples" / "cdc_upserts.py")
cdc_upserts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cdc_upserts)

SCHEMA = "id BIGINT, v STRING, op STRING, seq BIGINT"
AGG = "SELECT count(*), sum(id), count(v), max(length(v)), sum(hash(v)) FROM {t}"
POINT = "SELECT id, v FROM {t} WHERE id = {id}"
# the CDC tables (and their reference) write Parquet bloom filters of the key, as a table read by
# key should: a point query then skips the batch files that do not hold the key (docs/planning.md)
KEYED = "TBLPROPERTIES ('write.parquet.bloom-filter-enabled.column.id' = 'true')"
APPEND_ROWS = 10  # rows per streaming-append micro-batch


def size(args) -> str:
    steps = args.cdc_steps or "changes,appends,merge"
    if steps == "merge":
        return f"{args.cdc_rows:,} rows, {args.cdc_batches} batches of {args.cdc_changes:,} changes, keys spread and clustered"
    if steps == "changes":
        return f"{args.cdc_rows:,} rows, {args.cdc_batches} batches of {args.cdc_changes:,} changes"
    if steps == "appends":
        return f"{args.stream_batches:,} streaming appends"
    return (f"{args.cdc_rows:,} rows, {args.cdc_batches} batches of {args.cdc_changes:,} changes; "
            f"{args.stream_batches:,} streaming appends")


def _catalog():
    return lakerules._backend.catalogs.get("lake")


def _put(directory: Path, name: str, lines) -> None:
    """One whole JSON file (renamed into place, as a file source must see it)."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{name}.tmp"
    tmp.write_text("".join(json.dumps(x) + "\n" for x in lines))
    tmp.rename(directory / f"{name}.json")


def changes(batch: int, rows: int, per_batch: int):
    """The change events of one batch (deterministic)."""
    rng = random.Random(batch)
    for k in range(per_batch):
        seq = batch * per_batch + k
        r = rng.random()
        if r < 0.5:
            yield {"id": rng.randrange(rows), "v": f"u{seq}", "op": "upsert", "seq": seq}
        elif r < 0.8:
            yield {"id": rows + seq, "v": f"n{seq}", "op": "upsert", "seq": seq}
        else:
            yield {"id": rng.randrange(rows), "v": None, "op": "delete", "seq": seq}


def _files(table) -> tuple[int, int]:
    """(data files, delete files) of the table's current snapshot."""
    s = table.current_snapshot().summary
    return int(s.get("total-data-files") or 0), int(s.get("total-delete-files") or 0)


def _quantiles(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]
    return f"median {statistics.median(xs):.2f} s, p90 {p90:.2f} s"


EQ_SET_BYTES = "spark.lakerules.read.equalityDeleteSetBytes"


def _with_anti_join(spark, fn):
    """fn run with the equality deletes applied by the anti-join (no JVM hash set)."""
    def run():
        spark.conf.set(EQ_SET_BYTES, "0")
        try:
            return fn()
        finally:
            spark.conf.unset(EQ_SET_BYTES)
    return run


def _reads(spark, runs: int, point_id: int, anti_join: bool = False) -> tuple[dict, list]:
    """Median seconds of the aggregate and the point query on both copies and on the reference
    table (never changed), in turns; the copies' results. With ``anti_join``, also the
    delete_by_key copy read with its equality deletes anti-joined (``eqjoin``) instead of the
    per-file hash set, in the same turns."""
    fns = {}
    for t in ("merge", "eqdel", "ref"):
        fns[f"agg_{t}"] = lambda t=t: spark.sql(AGG.format(t=f"lake.bench.{t}")).collect()
        fns[f"point_{t}"] = lambda t=t: spark.sql(POINT.format(t=f"lake.bench.{t}", id=point_id)).collect()
    if anti_join:
        fns["agg_eqjoin"] = _with_anti_join(spark, fns["agg_eqdel"])
        fns["point_eqjoin"] = _with_anti_join(spark, fns["point_eqdel"])
    times = side_by_side(runs, **fns)
    keys = ["agg_merge", "agg_eqdel", "point_merge", "point_eqdel"]
    results = [sorted(tuple(r) for r in fns[k]()) for k in keys]
    if anti_join:  # the hash set and the anti-join read the same rows
        assert results[1] == sorted(tuple(r) for r in fns["agg_eqjoin"]()), "hash set and anti-join differ"
        assert results[3] == sorted(tuple(r) for r in fns["point_eqjoin"]()), "hash set and anti-join differ"
    return times, results


def _slowdown(phase: dict, before: dict, key: str, t: str) -> float:
    """How much slower a read of table t is in this phase than before the batches, each time
    taken relative to the same read of the reference table measured in turns with it (so that the
    machine's load, which differs between phases, cancels)."""
    return (phase[f"{key}_{t}"] / phase[f"{key}_ref"]) / (before[f"{key}_{t}"] / before[f"{key}_ref"])


def run(spark, args, report: Report) -> None:
    steps = [x.strip() for x in (args.cdc_steps or "changes,appends,merge").split(",") if x.strip()]
    unknown = [x for x in steps if x not in ("changes", "appends", "merge")]
    if unknown:
        raise SystemExit(f"--cdc-steps: unknown step(s) {unknown}; the steps are changes, appends, merge")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    cat = _catalog()  # after the catalog's first use
    if "changes" in steps:
        _changes(spark, args, report, cat)
    if "appends" in steps:
        _small_files(spark, args, report, cat)
    if "merge" in steps:
        _merge_vs_minimal(spark, args, report)


def _changes(spark, args, report: Report, cat) -> None:
    rows, batches, per_batch = args.cdc_rows, args.cdc_batches, args.cdc_changes
    t0 = time.perf_counter()
    parts = max(2, rows // 1_000_000)
    for t in ("merge", "eqdel", "ref"):  # ref: never changed, read in turns with the others
        spark.sql(f"CREATE TABLE lake.bench.{t} (id BIGINT, v STRING) {KEYED}")
        spark.sql(f"INSERT INTO lake.bench.{t} SELECT id, concat('v', CAST(id AS STRING)) "
                  f"FROM range(0, {rows}, 1, {parts})")
    print(f"  (three tables of {rows:,} rows written in {time.perf_counter() - t0:.1f} s)", flush=True)
    src = OUT / "cdc" / "changes"
    for b in range(batches):
        _put(src, f"b{b:05d}", changes(b, rows, per_batch))
    point_id = rows // 2 + 17
    before, before_results = _reads(spark, args.runs, point_id)
    assert before_results[0] == before_results[1] and before_results[2] == before_results[3], before_results

    latency = {"merge": [], "eqdel": []}

    def apply(df, batch_id: int) -> None:
        df = df.persist()
        try:
            df.count()
            order = ["merge", "eqdel"] if batch_id % 2 == 0 else ["eqdel", "merge"]
            for t in order:
                started = time.perf_counter()
                applied = cdc_upserts.upsert_batch(df, batch_id, f"lake.bench.{t}", app_id="bench-cdc", fast=t == "eqdel")
                latency[t].append(time.perf_counter() - started)
                assert applied, (t, batch_id)
            if batch_id % 10 == 0 or batch_id == batches - 1:
                print(f"    batch {batch_id}: merge {latency['merge'][-1]:.2f} s, eqdel {latency['eqdel'][-1]:.2f} s", flush=True)
        finally:
            df.unpersist()

    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))
    q = (stream.writeStream.foreachBatch(apply).option("checkpointLocation", str(OUT / "cdc" / "ck-changes"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert len(latency["merge"]) == batches == len(latency["eqdel"]), latency

    # a batch replayed (a restart after the commit, before the checkpoint) is skipped
    last = spark.read.schema(SCHEMA).json(str(src / f"b{batches - 1:05d}.json"))
    snapshots = {t: len(cat.load_table(f"bench.{t}").snapshots()) for t in ("merge", "eqdel")}
    replayed = [cdc_upserts.upsert_batch(last, batches - 1, f"lake.bench.{t}", app_id="bench-cdc", fast=t == "eqdel")
                for t in ("merge", "eqdel")]
    skipped = replayed == [False, False] and all(
        len(cat.load_table(f"bench.{t}").snapshots()) == n for t, n in snapshots.items())

    files_after = {t: _files(cat.load_table(f"bench.{t}")) for t in ("merge", "eqdel")}
    after, after_results = _reads(spark, args.runs, point_id, anti_join=True)
    same_after = after_results[0] == after_results[1] and after_results[2] == after_results[3]
    optimize_s = {}
    for t in ("merge", "eqdel"):
        started = time.perf_counter()
        spark.sql(f"OPTIMIZE lake.bench.{t}").collect()
        optimize_s[t] = time.perf_counter() - started
    files_opt = {t: _files(cat.load_table(f"bench.{t}")) for t in ("merge", "eqdel")}
    compacted, compacted_results = _reads(spark, args.runs, point_id)
    same_opt = compacted_results == after_results

    m, e = latency["merge"], latency["eqdel"]
    report.add(f"CDC, {batches} batches of {per_batch:,} changes into {rows:,} rows: foreachBatch + MERGE INTO "
               "(idempotent per batch), per-batch latency",
               f"{_quantiles(m)}; total {sum(m):.1f} s", "report", "")
    report.add("  the same batches, delete_by_key (equality deletes) + append, per-batch latency",
               f"{_quantiles(e)}; total {sum(e):.1f} s; median ratio to MERGE **{statistics.median(e) / statistics.median(m):.2f}x**",
               "faster than MERGE", verdict(statistics.median(e) < statistics.median(m)))
    report.add("  both tables read identically after the batches and after OPTIMIZE; a replayed batch skipped by both",
               f"{same_after and same_opt}; replay skipped: {skipped}", "true", verdict(same_after and same_opt and skipped))
    for t, label in (("merge", "MERGE"), ("eqdel", "delete_by_key")):
        fa, fo = files_after[t], files_opt[t]
        for key, what in (("agg", "full-scan aggregate"), ("point", f"point query (id = {point_id})")):
            report.add(f"  {label} table: {what}, slowdown after the batches / after OPTIMIZE (vs before, "
                       "each relative to the unchanged reference table read in turns)",
                       f"**{_slowdown(after, before, key, t):.2f}x** / **{_slowdown(compacted, before, key, t):.2f}x** "
                       f"(s, table vs reference: before {before[key + '_' + t]:.2f} vs {before[key + '_ref']:.2f}; "
                       f"after {after[key + '_' + t]:.2f} vs {after[key + '_ref']:.2f}; "
                       f"after OPTIMIZE {compacted[key + '_' + t]:.2f} vs {compacted[key + '_ref']:.2f})", "report", "")
        report.add(f"  {label} table: files (data / delete) after the batches, OPTIMIZE time, files after it",
                   f"{fa[0]:,} / {fa[1]:,}; OPTIMIZE {optimize_s[t]:.1f} s; {fo[0]:,} / {fo[1]:,}", "report", "")
    # issue 33: the equality deletes applied per data file by the default read (lakerules.scan.equality_deletes:
    # a JVM hash set, its deleted rows resolved to positions once per process and dropped in the reader)
    for key, what in (("agg", "full-scan aggregate"), ("point", f"point query (id = {point_id})")):
        ratio = after[f"{key}_eqdel"] / after[f"{key}_ref"]
        report.add(f"  delete_by_key table after the batches (no OPTIMIZE): {what}, time vs the reference table "
                   "(the default read: JVM hash set resolved to positions; the anti-join in the same turns)",
                   f"**{ratio:.2f}x** ({after[key + '_eqdel']:.2f} s vs {after[key + '_ref']:.2f} s; anti-join "
                   f"{after[key + '_eqjoin']:.2f} s = {after[key + '_eqjoin'] / after[key + '_ref']:.2f}x)",
                   "<= 1.5x", verdict(ratio <= 1.5))
    ratio = optimize_s["eqdel"] / optimize_s["merge"]
    report.add("  OPTIMIZE of the delete_by_key table vs OPTIMIZE of the MERGE table (same rows)",
               f"**{ratio:.2f}x** ({optimize_s['eqdel']:.1f} s vs {optimize_s['merge']:.1f} s)", "<= 2x", verdict(ratio <= 2))


def _small_files(spark, args, report: Report, cat) -> None:
    n = args.stream_batches
    src = OUT / "cdc" / "appends"
    for b in range(n):
        _put(src, f"a{b:05d}", ({"id": b * APPEND_ROWS + k, "v": f"v{b}"} for k in range(APPEND_ROWS)))
    spark.sql("CREATE TABLE lake.bench.appends (id BIGINT, v STRING)")
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", str(n + 10))
    started = time.perf_counter()
    q = (spark.readStream.schema("id BIGINT, v STRING").option("maxFilesPerTrigger", 1).json(str(src))
         .writeStream.option("checkpointLocation", str(OUT / "cdc" / "ck-appends"))
         .trigger(availableNow=True).toTable("lake.bench.appends"))
    q.awaitTermination()
    wall = time.perf_counter() - started
    per_batch = [p["durationMs"]["triggerExecution"] / 1000 for p in q.recentProgress if p["numInputRows"]]
    files = _files(cat.load_table("bench.appends"))[0]
    started = time.perf_counter()
    spark.sql("OPTIMIZE lake.bench.appends").collect()
    optimize_s = time.perf_counter() - started
    after = _files(cat.load_table("bench.appends"))[0]
    count = spark.table("lake.bench.appends").count()
    ok = count == n * APPEND_ROWS and len(per_batch) == n
    report.add(f"Streaming append, {n:,} micro-batches of {APPEND_ROWS} rows (toTable, availableNow, one file a batch): "
               "per-batch latency (Spark's triggerExecution)",
               f"{_quantiles(per_batch)}; {wall:.0f} s in all", "report", "")
    report.add("  data files left, then OPTIMIZE: time and data files after; every row once",
               f"{files:,} files; OPTIMIZE {optimize_s:.1f} s; {after:,} file(s); {count:,} rows",
               f"{n * APPEND_ROWS:,} rows", verdict(ok))


MERGE_SQL = """MERGE INTO {t} AS t USING cdc_changes AS c ON t.id = c.id
    WHEN MATCHED AND c.op = 'delete' THEN DELETE
    WHEN MATCHED THEN UPDATE SET v = c.v
    WHEN NOT MATCHED AND c.op = 'upsert' THEN INSERT (id, v) VALUES (c.id, c.v)"""


def _clustered(events, rows: int, parts: int):
    """The batch's events with the ids of existing rows moved into the last file's range."""
    width = rows // parts
    for e in events:
        if e["id"] < rows:
            e = {**e, "id": rows - width + e["id"] % width}
        yield e


def _delta_table(path: Path, rows: int, parts: int):
    """A Delta table (delta-rs) of the same rows as the lake table, or None without deltalake."""
    try:
        import deltalake
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        return None
    width = rows // parts
    for k in range(parts):  # one file each, as the lake table's
        end = rows if k == parts - 1 else (k + 1) * width
        ids = pa.array(range(k * width, end), pa.int64())
        data = pa.table({"id": ids, "v": pc.binary_join_element_wise("v", pc.cast(ids, pa.string()), "")})
        deltalake.write_deltalake(str(path), data, mode="append")
    return deltalake.__version__


def _delta_merge(path: Path, batch) -> None:
    from deltalake import DeltaTable

    (DeltaTable(str(path)).merge(source=batch, predicate="t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_delete(predicate="s.op = 'delete'").when_matched_update(updates={"v": "s.v"})
     .when_not_matched_insert(updates={"id": "s.id", "v": "s.v"}, predicate="s.op = 'upsert'").execute())


def _aggregates_arrow(table) -> tuple:
    import pyarrow.compute as pc

    return (table.num_rows, pc.sum(table["id"]).as_py(), table.num_rows - table["v"].null_count,
            pc.sum(pc.utf8_length(table["v"])).as_py())


def _merge_vs_minimal(spark, args, report: Report) -> None:
    rows, batches, per_batch = args.cdc_rows, args.cdc_batches, args.cdc_changes
    parts = max(2, rows // 1_000_000)
    out = OUT / "cdc" / "merge"
    keys_path, written_path = out / "keys.parquet", out / "batch.parquet"
    cat = _catalog()
    started = time.perf_counter()
    spark.sql("CREATE TABLE lake.bench.mt (id BIGINT, v STRING)")
    spark.sql(f"INSERT INTO lake.bench.mt SELECT id, concat('v', CAST(id AS STRING)) FROM range(0, {rows}, 1, {parts})")
    spark.range(0, rows, 1, parts).write.parquet(str(keys_path))
    delta_path = out / "delta"
    delta = _delta_table(delta_path, rows, parts)
    print(f"  (lake table, key Parquet{' and Delta table' if delta else ''} of {rows:,} rows written in "
          f"{time.perf_counter() - started:.1f} s)", flush=True)
    keys = spark.read.parquet(str(keys_path))
    times = {layout: {"merge": [], "minimal": [], "delta": []} for layout in ("spread", "clustered")}
    turn = 0
    for layout in ("spread", "clustered"):
        for b in range(batches):
            events = changes(10_000 + b if layout == "clustered" else b, rows, per_batch)
            if layout == "clustered":
                events = _clustered(events, rows, parts)
            batch = cdc_upserts.newest_per_id(spark.createDataFrame(list(events), SCHEMA)).persist()
            batch.count()
            batch.createOrReplaceTempView("cdc_changes")
            arrow = batch.toArrow() if delta else None

            def merge():
                spark.sql(MERGE_SQL.format(t="lake.bench.mt")).collect()

            def minimal():
                keys.join(batch.select("id"), "id").count()
                batch.select("id", "v").write.mode("overwrite").parquet(str(written_path))

            contenders = {"merge": merge, "minimal": minimal}
            if delta:
                contenders["delta"] = lambda: _delta_merge(delta_path, arrow)
            order = list(contenders)
            order = order[turn % len(order):] + order[:turn % len(order)]
            turn += 1
            for name in order:
                t0 = time.perf_counter()
                contenders[name]()
                times[layout][name].append(time.perf_counter() - t0)
            batch.unpersist()
            print(f"    {layout} batch {b}: " + ", ".join(f"{n} {times[layout][n][-1]:.2f} s" for n in order), flush=True)
    lake = spark.sql("SELECT count(*), sum(id), count(v), sum(length(v)) FROM lake.bench.mt").collect()[0]
    lake = tuple(int(x) for x in lake)
    py = _aggregates_arrow(cat.load_table("bench.mt").scan().to_arrow())
    same = lake == py
    if delta:
        from deltalake import DeltaTable

        same = same and lake == _aggregates_arrow(DeltaTable(str(delta_path)).to_pyarrow_table())
    for layout in ("spread", "clustered"):
        t = times[layout]
        ratios = [m / n for m, n in zip(t["merge"], t["minimal"])]
        ratio = statistics.median(ratios)
        report.add(f"MERGE of {per_batch:,} changes into {rows:,} rows ({parts} files), keys {layout}: per-batch MERGE "
                   "/ minimal work (join of the batch with the key column as plain Parquet + writing the batch as "
                   "Parquet), in turns",
                   f"**{ratio:.2f}x** (median of per-batch ratios; MERGE median {statistics.median(t['merge']):.2f} s, "
                   f"minimal {statistics.median(t['minimal']):.2f} s)", "<= 2x", verdict(ratio <= 2))
        if delta:
            d = statistics.median(t["delta"])
            report.add(f"  the same batches, delta-rs {delta} merge into a Delta table of the same rows",
                       f"median {d:.2f} s; MERGE / delta-rs **{statistics.median(t['merge']) / d:.2f}x**", "report", "")
    report.add("  the tables read identically after the batches (lakerules, pyiceberg"
               f"{', delta-rs' if delta else ''}: count, sum of ids, count and total length of v)",
               f"{same} ({lake[0]:,} rows)", "true", verdict(same))
    if not delta:
        report.note("delta-rs: the deltalake package is not installed (pip install -e '.[bench]'); not compared.")
