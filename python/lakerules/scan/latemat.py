"""Late materialization (seed 004): read the filter columns first, the rest only where rows match.

The needle-in-a-haystack query: a selective filter on a few columns that are neither partition
nor sort keys, many other columns selected. The plain scan decodes every selected column of
every file it could not prune. The rule ``late_materialize`` (registry batch
``late-materialization``, right after scans are planned) rewrites

    Filter (k1 = 7 AND k2 = 13 AND k3 = 'x')
      [Project (the columns the query reads)]
        LakeScan lake.db.t files=40/40

into a ``LateScan`` (a LakeScan that also carries the filter), read in two phases:

1. **phase one** reads only the filter's columns, with the file and row index of each row
   (``_metadata.file_path`` / ``_metadata.row_index``), through lakerules.scan.read, so position and
   equality deletes are applied there, once. The filter is the query's own conjunction, never
   rewritten into a normal form (the seed measured CNF costing up to 40x); Spark pushes it into
   the Parquet reader (row groups skipped by statistics) and evaluates it on the vectorized
   reader's batches. Phase one runs when the scan is planned and yields the matches' (file,
   row index) pairs, at most ``spark.lakerules.read.lateMaterialization.maxRows`` of them.
2. **phase two** reads the columns the query needs only where rows matched: of the files that
   hold a match, the row groups that hold one (io.lakerules.RowGroupParquetFormat: Spark's
   Parquet reader, handed each such row group's byte span), and of those, only the pages that
   hold a matched row. The driver reads the footers and offset indexes of those files in one
   JVM call (io.lakerules.PageRanges.plan), which writes each row group's matched rows as row
   ranges; on the executors, Spark's vectorized reader of the row group is made to fetch it
   with parquet-mr's ``readFilteredRowGroup(ranges)``, so only the pages overlapping the
   ranges are read and only those rows decoded, with their row indexes, as Spark's own
   column-index filtering does (a file without offset indexes, or the row-based reader: the
   row group is read whole). Phase two keeps only the matched rows: a broadcast left-semi join
   on (file, row index) with phase one's pairs. Those rows are live (phase one applied the
   deletes), so no delete is applied again. The Filter stays above, so the result is the plain
   scan's, row for row.

``spark.lakerules.read.lateMaterialization`` = ``auto`` (default) | ``on`` | ``off``. ``on`` splits
every scan it can (deterministic filter without subqueries, on columns of the scan, and some
other column to read late). ``auto`` splits only when, from what is known before reading:

- the filter's columns are at most 25% of the bytes the scan would read (the Iceberg column
  sizes of the planned files, from the manifests), so the worst case, phase one wasted, costs at
  most a quarter more;
- the columns read late are at least ``spark.lakerules.read.lateMaterialization.minBytes``
  (default 64 MiB, again from the manifests' column sizes): below that, the extra Spark jobs of
  the first pass and of phase one cost about what the split could save;
- the filter is not dense by the manifests' bounds (lakerules.scan.selectivity: each file's
  rows taken as spread evenly between its bounds): an estimate of at least 5,000 matching
  rows and 0.1% of the rows (most pages would hold a match, even at 1,000 rows a page) reads
  plainly with no first pass; a filter without an estimate (a string equality, a function of a
  column) goes on to the first pass;
- at run time, the first pass is phase one itself, over every file, stopped after 1,000
  matches (a tenth of ``maxRows`` if less). It is one Spark job whatever the number of files,
  so a table of one file is judged as one of a thousand:
  - stopped short (all the matches known): the pages phase two would read for them (from the
    matched files' offset indexes: row groups without a match cost nothing, a row group without
    offset indexes costs all its pages) must be at most half of the bytes the plain scan reads
    (the manifests' column sizes of the columns read, over every planned file); otherwise the
    query reads plainly, having spent only the filter's columns;
  - stopped at the cap: if its matches hit more than half of the pages they ran through (those
    of their row groups up to each group's last match), the filter is dense (a 1% or 50% filter
    spread over the rows) and the query reads plainly, having spent a few pages of the filter's
    columns (each partition of the read stops at the cap too); otherwise the matches are
    clustered, phase one runs in full (up to ``maxRows``) and the pages decide as above.

``EXPLAIN`` shows, under ``== lakerules scans ==``, whether each filtered scan was split and why.

The rule alone, on a plan built by hand (tests/unit/test_late_materialize.py has the decisions
on plans Spark optimized):

>>> from types import SimpleNamespace
>>> from lakerules.plan.nodes import TableRef
>>> scan = LakeScan(TableRef("lake", ("db",), "t"), 42, output=(), iceberg=None, schema=None, plan=None)
>>> plan = Filter(jvm=None, kids=(scan,), conjuncts=())
>>> late_materialize(plan, SimpleNamespace(conf=lambda key, default=None: "off")) is plan
True
>>> late_materialize(plan, SimpleNamespace(conf=lambda key, default=None: "sometimes"))
Traceback (most recent call last):
...
lakerules.errors.LakeError: lakerules: spark.lakerules.read.lateMaterialization must be one of auto, on, off, not 'sometimes'
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pyiceberg.expressions import And
from pyiceberg.schema import Schema
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from lakerules.spark import attributes, jvm as J, settings
from lakerules.iceberg import schema as schemas
from lakerules.errors import LakeError
from lakerules.scan.explain import remember
from lakerules.plan.expressions import to_iceberg
from lakerules.plan.nodes import Filter, LakeScan, Node, SparkNode
from lakerules.scan.read import (
    FILE_COL, POS_COL, aliased_plan, lower_scan, read_files, scan_dataframe, status_names,
)
from lakerules.scan import lineage as row_lineage, selectivity

SETTING = "spark.lakerules.read.lateMaterialization"
MODES = ("auto", "on", "off")
MAX_ROWS_KEY = "spark.lakerules.read.lateMaterialization.maxRows"
MAX_ROWS_DEFAULT = 100_000
PREDICATE_SHARE = 0.25  # auto: the filter's columns are at most this share of the bytes read
MIN_BYTES_KEY = "spark.lakerules.read.lateMaterialization.minBytes"
MIN_BYTES_DEFAULT = 64 * 2**20  # auto: at least this many bytes of columns read late
FIRST_PASS_CAP = 1_000  # auto: the first pass stops after this many matches (or a tenth of maxRows)
MATCHED_SHARE = 0.5  # auto: phase two reads at most this share of the bytes the plain scan reads
# auto, before any read: the manifests' bounds estimating at least this many matching rows, and this
# share of the rows (spread evenly, even at 1,000 rows a page, most pages then hold a match), read plainly
DENSE_ROWS = 5 * FIRST_PASS_CAP
DENSE_SHARE = 0.001
# a conjunct with one of these cannot run on its own in phase one
_NOT_ALONE = {"ScalarSubquery", "Exists", "ListQuery", "InSubquery", "LateralSubquery", "OuterReference"}


@dataclass(frozen=True, eq=False)
class LateScan(LakeScan):
    """A LakeScan read in two phases (``split``), or read plainly for the ``reason`` given."""

    conjuncts: tuple = field(default=(), repr=False)  # JVM expressions over ``output``
    predicate_columns: tuple[str, ...] = ()
    needed_columns: tuple[str, ...] = ()
    mode: str = "auto"
    split: bool = True
    reason: str = ""

    def describe(self) -> str:
        verdict = "split" if self.split else "not split"
        return f"{super().describe()} late_materialization={self.mode}: {verdict} ({self.reason})"


def mode(ctx) -> str:
    value = (ctx.conf(SETTING, "auto") or "auto").strip().lower()
    if value not in MODES:
        raise LakeError(f"lakerules: {SETTING} must be one of {', '.join(MODES)}, not {value!r}")
    return value


# ---- the rule ------------------------------------------------------------------------------------


def late_materialize(plan: Node, ctx) -> Node:
    match plan:
        case Filter(kids=(child,)) if (found := _scan_below(child)) is not None:
            scan, project = found
            m = mode(ctx)
            if m == "off":
                return plan
            late = decide(scan, plan.conjuncts, project, m, min_bytes=min_bytes(ctx))
            return plan.with_children((late if project is None else project.with_children((late,)),))
        # A Project or Aggregate right over such a Filter (no column-pruning Project below it
        # yet): its output is its expressions, so it tells which columns the scan must read.
        case SparkNode(kids=(Filter(kids=(LateScan() as late,)) as filt,)) if (
                late.needed_columns == tuple(a.name for a in late.output)
                and J.simple_name(plan.jvm) in ("Project", "Aggregate")):
            ids = set(attributes.expr_ids(plan.jvm.references().toSeq()))
            narrowed = decide(late, filt.conjuncts, None, late.mode, needed_ids=ids, min_bytes=min_bytes(ctx))
            if narrowed.needed_columns == late.needed_columns:
                return plan
            return plan.with_children((filt.with_children((narrowed,)),))
        case _:
            return plan


def _scan_below(node: Node):
    """(LakeScan, the column-pruning Project between it and the Filter or None)."""
    if isinstance(node, LakeScan):
        return None if isinstance(node, LateScan) else (node, None)
    if (isinstance(node, SparkNode) and not isinstance(node, Filter) and len(node.kids) == 1
            and J.simple_name(node.jvm) == "Project"
            and isinstance(node.kids[0], LakeScan) and not isinstance(node.kids[0], LateScan)
            and all(J.simple_name(e) == "AttributeReference" for e in J.from_seq(node.jvm.projectList()))):
        return node.kids[0], node
    return None


def _has_subquery(expr) -> bool:
    """A subquery, or a correlated subquery's reference to its outer query."""
    if J.simple_name(expr) in _NOT_ALONE:
        return True
    return any(_has_subquery(c) for c in J.from_seq(expr.children()))


def min_bytes(ctx) -> int:
    value = ctx.conf(MIN_BYTES_KEY, str(MIN_BYTES_DEFAULT))
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = -1
    if n < 0:
        raise LakeError(f"lakerules: {MIN_BYTES_KEY} must be a number of bytes >= 0, not {value!r}")
    return n


def decide(scan: LakeScan, conjuncts: tuple, project, m: str, needed_ids: set | None = None,
           min_bytes: int = MIN_BYTES_DEFAULT) -> LateScan:
    """The static part of the decision: what the filter reads, against what the scan reads
    (the columns under ``project``, or ``needed_ids`` plus the filter's, or all)."""
    by_id = {a.expr_id: a.name for a in scan.output}
    if project is not None:
        needed = [by_id[i] for i in attributes.expr_ids(project.jvm.output()) if i in by_id]
    else:
        needed = [a.name for a in scan.output]
    predicate: list[str] = []
    for c in conjuncts:
        for i in attributes.expr_ids(c.references().toSeq()):
            name = by_id.get(i)
            if name is not None and name not in predicate:
                predicate.append(name)
    order = {a.name: i for i, a in enumerate(scan.output)}
    predicate.sort(key=order.get)
    if needed_ids is not None:
        needed = [a.name for a in scan.output if a.expr_id in needed_ids or a.name in predicate]
    late = LateScan(**{f: getattr(scan, f) for f in LakeScan.__dataclass_fields__},
                    conjuncts=tuple(conjuncts), predicate_columns=tuple(predicate),
                    needed_columns=tuple(needed), mode=m)

    def plain(reason: str) -> LateScan:
        return replace(late, split=False, reason=reason)

    if any(not c.deterministic() or _has_subquery(c) for c in conjuncts):
        return plain("the filter is not deterministic, has a subquery or is correlated")
    if row_lineage.requested(scan.iceberg, scan.schema, scan.output):
        return plain("the scan reads row lineage columns (_row_id, _last_updated_sequence_number)")
    if not predicate:
        return plain("the filter reads no column")
    rest = [n for n in needed if n not in predicate]
    if not rest:
        return plain("every column read is a filter column: nothing to read late")
    sizes = _column_bytes(scan, predicate, rest)
    shown = f"filter columns {', '.join(predicate)}: {len(predicate)} of {len(needed)} columns read"
    if sizes is not None:
        p, r = sizes
        shown += f", {p / max(p + r, 1):.1%} of {_size(p + r)}"
    if m == "on":
        return replace(late, reason=shown)
    if sizes is None:
        return plain("the manifests have no column sizes for these files")
    p, r = sizes
    if p > PREDICATE_SHARE * (p + r):
        return plain(f"{shown}; auto needs at most {PREDICATE_SHARE:.0%}")
    if r < min_bytes:
        return plain(f"{shown}; {_size(r)} to read late, auto needs at least {_size(min_bytes)} ({MIN_BYTES_KEY})")
    dense = _dense_by_bounds(scan, conjuncts, by_id)
    if dense is not None:
        return plain(f"{shown}; {dense}")
    return replace(late, reason=shown)


def _dense_by_bounds(scan: LakeScan, conjuncts: tuple, by_id: dict) -> str | None:
    """Why the filter is dense by the manifests' bounds (lakerules.scan.selectivity): at least
    DENSE_ROWS rows and DENSE_SHARE of the planned files' rows estimated to match, so most pages
    hold a match and phase two would read nearly what the plain scan reads; else None (no
    estimate, or not dense: the first pass decides)."""
    parts = []
    for c in conjuncts:
        expr, exact = to_iceberg(c, by_id)
        if not exact:
            return None
        parts.append(expr)
    if not parts:
        return None
    files = [p.file for p in scan.plan.files]
    rows = sum(f.record_count for f in files)
    expected = selectivity.expected_rows(scan.schema, parts[0] if len(parts) == 1 else And(*parts), files)
    if expected is None or expected < DENSE_ROWS or expected < DENSE_SHARE * rows:
        return None
    return (f"the manifests' bounds estimate {expected:,.0f} of {rows:,} rows ({expected / max(rows, 1):.1%}) match, "
            f"auto reads plainly from {DENSE_ROWS:,} rows and {DENSE_SHARE:.1%} (no first pass)")


def _column_bytes(scan: LakeScan, predicate: list[str], rest: list[str]) -> tuple[int, int] | None:
    """Bytes of the filter's columns and of the other columns read, over the planned files,
    from the Iceberg column sizes (a nested column: the sum of its leaves)."""
    ids = {}
    for f in scan.schema.as_struct().fields:
        ids[f.name] = schemas.field_ids(f)
    totals = [0, 0]
    for planned in scan.plan.files:
        sizes = planned.file.column_sizes
        if not sizes:
            return None
        for k, names in enumerate((predicate, rest)):
            totals[k] += sum(sizes.get(i, 0) for n in names for i in ids.get(n, ()))
    return totals[0], totals[1]


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# ---- lowering: the two phases ---------------------------------------------------------------------


def lower_late_scan(ctx, scan: LateScan, lower):
    """LateScan -> the JVM plan reading it: phase two's rows (aliased to the scan's output), or
    the plain scan when the decision (static, or auto's first pass, or maxRows) says so."""
    spark = ctx.spark
    head = f"late materialization ({scan.mode}):"
    if not scan.split:
        return _plain(ctx, scan, lower, f"{head} not split: {scan.reason}")
    files = list(scan.plan.files)
    limit = settings.count(MAX_ROWS_KEY, ctx.conf(MAX_ROWS_KEY, None), MAX_ROWS_DEFAULT, "rows")
    names = status_names(spark, [p.file.file_path for p in files])
    ids = _field_ids(scan, scan.needed_columns)
    if scan.mode == "auto":
        rows, why = _first_pass(ctx, scan, files, names, ids, limit)
        if rows is None:
            return _plain(ctx, scan, lower, f"{head} not split: {scan.reason}; {why}")
    else:
        rows, why = _matches(_phase_one(ctx, scan, files), limit + 1), ""
    if len(rows) > limit:
        return _plain(ctx, scan, lower, f"{head} not split: phase one matched more than {MAX_ROWS_KEY}={limit} rows")
    by_name = _by_name(rows)
    keep = [p.file for p in files if names[p.file.file_path] in by_name]
    reads = _page_plan(spark, [names[f.file_path] for f in keep], by_name, ids)
    t = _totals(reads.values())
    if scan.mode == "auto":
        plain_bytes = sum(_column_bytes(scan, list(scan.needed_columns), []) or (t.bytes, 0))
        why += (f"phase two would read {_size(t.bytes_hit)} of the {_size(plain_bytes)} the plain scan reads "
                f"({t.bytes_hit / max(plain_bytes, 1):.0%})")
        if t.bytes_hit > MATCHED_SHARE * plain_bytes:
            return _plain(ctx, scan, lower, f"{head} not split: {scan.reason}; {why}, auto needs at most "
                                            f"{MATCHED_SHARE:.0%}: phase one matched {len(rows)} row(s) in {len(keep)} "
                                            f"of {len(files)} file(s), {t.groups_hit} of their {t.groups} row "
                                            f"group(s), {t.pages_hit} of those row groups' {t.pages} pages")
        why = f"{scan.reason}; {why}"
    else:
        why = scan.reason
    spans = "\n".join(f"{name}\t{r.spans}" for name, r in reads.items())
    positions = J.local_frame(spark, [(r[0], r[1]) for r in rows],
                              StructType([StructField(FILE_COL, StringType()), StructField(POS_COL, LongType())]))
    data = read_files(spark, scan.schema, list(keep), with_positions=True, row_groups=spans)
    data = data.join(F.broadcast(positions), [FILE_COL, POS_COL], "left_semi")
    plan = aliased_plan(ctx, scan, data)
    remember(scan, f"{head} split ({why}); phase one read {len(scan.predicate_columns)} column(s) of "
                   f"{len(files)} file(s): {len(rows)} row(s) matched in {len(keep)} file(s); phase two read "
                   f"those rows from {len(keep)} of {len(files)} file(s), {t.groups_hit} of their {t.groups} "
                   f"row group(s), {t.pages_hit} of those row groups' {t.pages} pages "
                   f"({_size(t.bytes_hit)} of {_size(t.bytes)})")
    return plan


def _first_pass(ctx, scan: LateScan, files: list, names: dict, ids: list[int], limit: int):
    """auto's first pass: phase one over every file, stopped after 1,000 matches (a tenth of
    ``maxRows`` if less; each partition of the read stops there too, so a dense filter costs a
    few of its pages). (all the matches, a note) when it stopped short. When it did not, the
    pages its matches hit among those of their row groups it ran through tell a dense filter
    (most pages hit: (None, why), read plainly) from a clustered one (phase one runs in full,
    up to ``maxRows`` matches: (those, a note))."""
    cap = max(1, min(FIRST_PASS_CAP, limit // 10))
    found = _matches(_phase_one(ctx, scan, files), cap + 1)
    if len(found) <= cap:
        return found, ""
    by_name = _by_name(found)
    reads = _page_plan(ctx.spark, [n for n in (names[p.file.file_path] for p in files) if n in by_name], by_name, ids)
    t = _totals(reads.values())
    seen = (f"the first pass stopped at {cap + 1} matches, which hit {t.pages_hit} of the {t.pages_covered} pages "
            f"it ran through ({t.pages_hit / max(t.pages_covered, 1):.0%})")
    if t.pages_hit > MATCHED_SHARE * t.pages_covered:
        return None, f"{seen}, auto needs at most {MATCHED_SHARE:.0%}"
    return _matches(_phase_one(ctx, scan, files), limit + 1), f"{seen}; "


def _matches(phase_one, limit: int) -> list[tuple[str, int]]:
    """At most ``limit`` of phase one's (file, row index) pairs, through Arrow (a pickled Row
    each would cost a tenth of a second per 10,000)."""
    got = phase_one.limit(limit).toArrow()
    return list(zip(got.column(0).to_pylist(), got.column(1).to_pylist()))


def _by_name(rows) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for name, pos in rows:
        out.setdefault(name, []).append(pos)
    return out


def _field_ids(scan: LakeScan, names) -> list[int]:
    by_name = {f.name: f.field_id for f in scan.schema.as_struct().fields}
    return [by_name[n] for n in names if n in by_name]


@dataclass(frozen=True)
class PageReads:
    """What phase two reads of one file (io.lakerules.PageRanges.plan): the spans for
    io.lakerules.RowGroupParquetFormat, and counts over the columns read."""

    spans: str
    groups_hit: int
    groups: int
    pages_hit: int  # pages of the columns read, in the row groups hit, holding a match
    pages: int  # pages of the columns read, in the row groups hit
    bytes_hit: int  # compressed bytes of those pages (and of their dictionary pages)
    bytes: int  # compressed bytes of the columns read, in every row group
    pages_covered: int  # of ``pages``, those starting at or before their row group's last match


def _page_plan(spark, names: list[str], by_name: dict, ids: list[int]) -> dict[str, PageReads]:
    """Spark's file name -> PageReads, from the files' footers and offset indexes: one JVM call
    for all the files."""
    if not names:
        return {}
    request = "\n".join(f"{n}\t{','.join(map(str, sorted(by_name.get(n, ()))))}" for n in names)
    answer = J.page_ranges(spark, request, ",".join(map(str, ids)))
    out = {}
    for line in answer.splitlines():
        name, spans, counts = line.rsplit("\t", 2)
        out[name] = PageReads(spans, *map(int, counts.split()))
    return out


def _totals(reads) -> PageReads:
    reads = list(reads)
    return PageReads("", *(sum(getattr(r, f) for r in reads) for f in
                           ("groups_hit", "groups", "pages_hit", "pages", "bytes_hit", "bytes",
                            "pages_covered")))


def _plain(ctx, scan: LateScan, lower, note: str):
    plan = lower_scan(ctx, scan, lower)
    remember(scan, note)
    return plan


def _phase_one(ctx, scan: LateScan, files: list):
    """(file, row index) of the live rows of ``files`` (PlannedFiles) the filter keeps: the scan's own read
    (deletes applied) under the query's filter, as one compact conjunction."""
    spark = ctx.spark
    # only the filter's columns, and those equality deletes compare, are read (and named)
    keys = {i for p in files for d in p.equality_deletes for i in d.equality_ids}
    keep = {f.name for f in scan.schema.fields if f.name in scan.predicate_columns or keys & schemas.field_ids(f)}
    schema = Schema(*[f for f in scan.schema.fields if f.name in keep], schema_id=scan.schema.schema_id)
    part = replace(scan, schema=schema, output=tuple(a for a in scan.output if a.name in keep),
                   plan=replace(scan.plan, files=tuple(files)))
    df = scan_dataframe(ctx, part, positions=True)
    aliased = aliased_plan(ctx, part, df, extra=[FILE_COL, POS_COL])
    filtered = J.filter_plan(spark, J.all_of(spark, scan.conjuncts), aliased)
    return J.dataframe(spark, filtered).select(FILE_COL, POS_COL)
