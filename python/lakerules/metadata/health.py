"""A table's layout and health, read from its metadata alone (manifests, no data file opened):

    python -m lakerules inspect lake.db.t [--column a --column b] [--plot out.png] [--warehouse W]
    lakerules.inspect("lake.db.t", columns=["a", "b"], plot="out.png")   # after lakerules.session()

- data files: count, rows, bytes and a histogram of file sizes;
- delete files: position and equality delete files, how many apply to each data file, and the
  share of rows position delete files delete;
- partitions: how many, files per partition;
- for each given column, each file's [min, max] (its metrics) and the expected share of files a
  point predicate ``column = v`` reads: the mean, over values v drawn uniformly between the
  column's min and max (or, for other types, over the bounds themselves), of the share of files
  whose [min, max] holds v; a file without bounds counts as read;
- ``plot=``: each file's min/max box over the first two columns, drawn with matplotlib (the
  optional ``plot`` extra), e.g. before and after ``OPTIMIZE ... ZORDER BY``: outlined, each in
  its own colour, over a shading of how many files' boxes hold each point; strings, binaries
  and booleans by their ranks among the files' bounds.
"""

from __future__ import annotations

import datetime
import decimal
import random
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from lakerules.errors import LakeError

PROBES = 2000
_SIZE_EDGES = [0] + [1 << s for s in range(16, 42, 2)]  # 64 KiB, 256 KiB, ... x4 each


@dataclass
class ColumnLayout:
    name: str
    ranges: list  # per data file: (min, max), or None where the file has no bounds
    share: float  # expected share of files a point predicate reads


@dataclass
class Health:
    table: str
    snapshot_id: int | None
    sizes: list[int] = field(default_factory=list)
    rows: int = 0
    deletes_per_file: Counter = field(default_factory=Counter)
    most_deleted: list = field(default_factory=list)  # (delete files, data file path), the top 5
    position_delete_files: int = 0
    equality_delete_files: int = 0
    position_deleted_rows: int = 0
    equality_delete_rows: int = 0
    partitions: Counter = field(default_factory=Counter)  # partition path -> data files
    columns: list[ColumnLayout] = field(default_factory=list)

    @property
    def data_files(self) -> int:
        return len(self.sizes)

    @property
    def deleted_share(self) -> float:
        return self.position_deleted_rows / self.rows if self.rows else 0.0

    def __str__(self) -> str:
        return self.text()

    def text(self) -> str:
        out = [f"table {self.table}, snapshot {self.snapshot_id}"]
        if not self.sizes:
            return "\n".join(out + ["no data files"])
        out.append(f"data files: {self.data_files}, rows: {self.rows:,}, bytes: {sum(self.sizes):,} "
                   f"(file size min {_human(min(self.sizes))}, median {_human(int(statistics.median(self.sizes)))}, "
                   f"max {_human(max(self.sizes))})")
        out.append("file sizes:")
        out += _histogram(self.sizes)
        out.append(f"delete files: {self.position_delete_files} position ({self.position_deleted_rows:,} rows, "
                   f"{self.deleted_share:.1%} of the data files' rows), {self.equality_delete_files} equality "
                   f"({self.equality_delete_rows:,} delete rows)")
        per = ", ".join(f"{n} delete file{'s' if n != 1 else ''}: {k} data file{'s' if k != 1 else ''}"
                        for n, k in sorted(self.deletes_per_file.items()))
        out.append(f"delete files per data file: {per}")
        for n, path in self.most_deleted:
            out.append(f"  {n} delete files on {path}")
        if list(self.partitions) == [""]:
            out.append("partitions: unpartitioned")
        else:
            counts = sorted(self.partitions.values())
            out.append(f"partitions: {len(self.partitions)}, data files per partition: min {counts[0]}, "
                       f"median {statistics.median(counts):g}, max {counts[-1]}")
            for path, n in self.partitions.most_common(3):
                out.append(f"  {path}: {n} files")
        for c in self.columns:
            known = [r for r in c.ranges if r is not None]
            out.append(f"column {c.name}: a point predicate reads {c.share:.1%} of the data files "
                       f"(expected, over {PROBES} values; {len(c.ranges) - len(known)} files without bounds)")
            for i, r in enumerate(c.ranges[:20]):
                out.append(f"  file {i:>4}: " + ("no bounds" if r is None else f"[{r[0]}, {r[1]}]"))
            if len(c.ranges) > 20:
                out.append(f"  ... {len(c.ranges) - 20} more files")
        return "\n".join(out)


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _histogram(sizes: list[int]) -> list[str]:
    bins = Counter()
    for s in sizes:
        bins[max(i for i, e in enumerate(_SIZE_EDGES) if s >= e)] += 1
    lo, hi, top = min(bins), max(bins), max(bins.values())
    out = []
    for i in range(lo, hi + 1):
        edge = _SIZE_EDGES[i]
        label = f"{_human(edge) if edge else '0'} .. {_human(_SIZE_EDGES[i + 1]) if i + 1 < len(_SIZE_EDGES) else ''}"
        out.append(f"  {label:>22} {'#' * max(1 if bins[i] else 0, round(40 * bins[i] / top)):<40} {bins[i]}")
    return out


def _number(v):
    """A bound as a number to draw uniformly between (dates and times as their ordinals)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, datetime.datetime):
        return v.timestamp() if v.tzinfo else v.replace(tzinfo=datetime.timezone.utc).timestamp()
    if isinstance(v, datetime.date):
        return v.toordinal()
    if isinstance(v, datetime.time):
        return v.hour * 3600 + v.minute * 60 + v.second + v.microsecond / 1e6
    return None


def _value(t, v):
    """A bound as its Python value: dates, times and timestamps as such (pyiceberg gives days and
    microseconds)."""
    from pyiceberg.types import DateType, TimestampType, TimestamptzType, TimeType

    if isinstance(v, int) and not isinstance(v, bool):
        if isinstance(t, DateType):
            return datetime.date(1970, 1, 1) + datetime.timedelta(days=v)
        if isinstance(t, (TimestampType, TimestamptzType)):
            value = datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=v)
            return value.replace(tzinfo=datetime.timezone.utc) if isinstance(t, TimestamptzType) else value
        if isinstance(t, TimeType):
            return (datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=v)).time()
    return v


def _share(ranges: list, seed: int) -> float:
    """Mean share of files whose [min, max] can hold a point value (files without bounds: all)."""
    if not ranges:
        return 0.0
    known = [r for r in ranges if r is not None]
    unknown = len(ranges) - len(known)
    if not known:
        return 1.0
    numeric = [(_number(lo), _number(hi)) for lo, hi in known]
    rnd = random.Random(seed)
    if all(lo is not None and hi is not None for lo, hi in numeric):
        lo, hi = min(r[0] for r in numeric), max(r[1] for r in numeric)
        probes = [rnd.uniform(lo, hi) for _ in range(PROBES)]
        spans = numeric
    else:  # strings, binary, booleans: the bounds themselves are the values to probe
        values = sorted({v for r in known for v in r})
        probes = [rnd.choice(values) for _ in range(PROBES)]
        spans = known
    hits = [sum(1 for lo, hi in spans if lo <= v <= hi) for v in probes]
    return (statistics.mean(hits) + unknown) / len(ranges)


def health(table, columns=(), name: str | None = None) -> Health:
    """The layout and health of a pyiceberg Table's current snapshot."""
    from pyiceberg.conversions import from_bytes
    from pyiceberg.manifest import DataFileContent

    schema = table.schema()
    fields = []
    for c in columns:
        try:
            f = schema.find_field(c, case_sensitive=False)
        except ValueError:
            raise LakeError(f"lakerules inspect: the table has no column {c!r}") from None
        if not f.field_type.is_primitive:
            raise LakeError(f"lakerules inspect: column {c!r} is not primitive: files keep no [min, max] for it")
        fields.append(f)
    snapshot = table.current_snapshot()
    h = Health(name or ".".join(table.name()), snapshot.snapshot_id if snapshot else None)
    if snapshot is None:
        h.columns = [ColumnLayout(f.name, [], 0.0) for f in fields]
        return h
    specs = table.specs()
    seen_deletes: set[str] = set()
    ranges: list[list] = [[] for _ in fields]
    per_file = []
    for task in table.scan().plan_files():
        data = task.file
        h.sizes.append(data.file_size_in_bytes)
        h.rows += data.record_count
        h.deletes_per_file[len(task.delete_files)] += 1
        per_file.append((len(task.delete_files), data.file_path))
        spec = specs[data.spec_id]
        h.partitions[spec.partition_to_path(data.partition, schema) if spec.fields else ""] += 1
        for d in task.delete_files:
            if d.file_path in seen_deletes:
                continue
            seen_deletes.add(d.file_path)
            if d.content == DataFileContent.POSITION_DELETES:
                h.position_delete_files += 1
                h.position_deleted_rows += d.record_count
            else:
                h.equality_delete_files += 1
                h.equality_delete_rows += d.record_count
        for i, f in enumerate(fields):
            lo, hi = (data.lower_bounds or {}).get(f.field_id), (data.upper_bounds or {}).get(f.field_id)
            ranges[i].append(None if lo is None or hi is None
                             else (_value(f.field_type, from_bytes(f.field_type, lo)),
                                   _value(f.field_type, from_bytes(f.field_type, hi))))
    h.most_deleted = sorted((p for p in per_file if p[0]), reverse=True)[:5]
    h.columns = [ColumnLayout(f.name, r, _share(r, seed=i + 1)) for i, (f, r) in enumerate(zip(fields, ranges))]
    return h


def plot(h: Health, path, title: str | None = None) -> None:
    """Each data file's [min, max] box over the first two columns of ``h``, as a PNG at ``path``."""
    import matplotlib.pyplot as plt

    fig = figure(h, title)
    try:
        fig.savefig(path)
    finally:
        plt.close(fig)


_GRID = 256  # cells per axis of the coverage shading


@dataclass
class _Axis:
    """A column's axis: each file's (low, high) on it (None: no bounds), and for columns without
    a numeric order (strings, binary, booleans) the sorted distinct bounds their ranks stand for."""

    name: str
    spans: list
    labels: list | None = None
    tick: Callable | None = None  # a numeric axis's value -> tick label (dates and times)

    @property
    def ordinal(self) -> bool:
        return self.labels is not None


def _axis(c: ColumnLayout) -> _Axis:
    numeric = [None if r is None else (_number(r[0]), _number(r[1])) for r in c.ranges]
    if all(r is None or None not in r for r in numeric):
        sample = next((r[0] for r in c.ranges if r is not None), None)
        return _Axis(c.name, numeric, tick=_tick(sample))
    # no numeric order: each bound's rank among the distinct bounds, a box from the rank of its
    # min to that of its max (widened by 0.45 so that a single value shows, and neighbours do not touch)
    try:
        values = sorted({v for r in c.ranges if r is not None for v in r})
    except TypeError:
        raise LakeError(f"lakerules inspect --plot: the bounds of column {c.name} cannot be ordered") from None
    rank = {v: i for i, v in enumerate(values)}
    spans = [None if r is None else (rank[r[0]] - 0.45, rank[r[1]] + 0.45) for r in c.ranges]
    return _Axis(c.name, spans, values)


def _tick(sample) -> Callable | None:
    """How to label a numeric axis of dates, times or timestamps (the values _number made)."""
    if isinstance(sample, datetime.datetime):
        return lambda v: datetime.datetime.fromtimestamp(v, datetime.timezone.utc).strftime("%Y-%m-%d\n%H:%M:%S")
    if isinstance(sample, datetime.date):
        return lambda v: datetime.date.fromordinal(max(1, int(round(v)))).isoformat()
    if isinstance(sample, datetime.time):
        return lambda v: f"{int(v) // 3600:02d}:{int(v) % 3600 // 60:02d}:{v % 60:06.3f}"
    return None


def _coverage(boxes: list, x_lim: tuple, y_lim: tuple):
    """How many boxes hold each cell's centre, on a _GRID x _GRID grid over the limits (a box
    thinner than a cell holds the cell it lies in)."""
    import numpy as np

    counts = np.zeros((_GRID, _GRID), dtype=np.int32)

    def cells(lo, hi, lim):
        step = (lim[1] - lim[0]) / _GRID
        first, last = int(np.ceil((lo - lim[0]) / step - 0.5)), int(np.floor((hi - lim[0]) / step - 0.5))
        if last < first:
            first = last = int((lo - lim[0]) / step)
        return max(0, first), min(_GRID - 1, last)

    for x0, x1, y0, y1 in boxes:
        i0, i1 = cells(x0, x1, x_lim)
        j0, j1 = cells(y0, y1, y_lim)
        counts[j0:j1 + 1, i0:i1 + 1] += 1
    return counts


def _limits(lows, highs) -> tuple[float, float]:
    lo, hi = min(lows), max(highs)
    pad = (hi - lo) * 0.03 or max(abs(lo) * 0.03, 0.5)
    return lo - pad, hi + pad


def figure(h: Health, title: str | None = None):
    """The matplotlib Figure :func:`plot` draws: each data file's [min, max] box over the first two
    columns, outlined in its own colour, over a shading of how many files' boxes hold each point
    (the overlap a point predicate on both columns meets). Strings, binaries and booleans are
    drawn by their ranks among the files' bounds, the axis labelled with the values."""
    if len(h.columns) < 2:
        raise LakeError("lakerules inspect --plot draws two columns: give two --column")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
        from matplotlib.colors import BoundaryNorm
        from matplotlib.patches import Rectangle
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise LakeError("lakerules inspect --plot needs matplotlib: pip install 'lakerules[plot]'") from None
    x, y = _axis(h.columns[0]), _axis(h.columns[1])
    boxes = [(sx[0], sx[1], sy[0], sy[1]) for sx, sy in zip(x.spans, y.spans) if sx is not None and sy is not None]
    missing = len(x.spans) - len(boxes)
    fig, ax = plt.subplots(figsize=(7.5, 6.5), dpi=100)
    head = title or f"{h.table}: {len(boxes)} data files, [min, max] of {x.name} \u00d7 {y.name}"
    if not boxes:
        ax.set_title(f"{head}\nno data file has bounds of both columns", fontsize=10)
        return fig
    x_lim = _limits([b[0] for b in boxes], [b[1] for b in boxes])
    y_lim = _limits([b[2] for b in boxes], [b[3] for b in boxes])
    counts = _coverage(boxes, x_lim, y_lim)
    covered = counts[counts > 0]
    top = int(covered.max())
    levels = BoundaryNorm(np.arange(0.5, max(top, 2) + 1.0), 256)  # one shade per count, 1 lightest
    image = ax.imshow(np.ma.masked_equal(counts, 0), origin="lower", extent=(*x_lim, *y_lim), aspect="auto",
                      cmap=plt.get_cmap("Greys"), norm=levels, alpha=0.6, interpolation="nearest")
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    bar.set_ticks(range(1, max(top, 2) + 1, max(1, -(-top // 10))))
    bar.set_label("data files whose box holds the point")
    colours = plt.get_cmap("tab20" if len(boxes) > 10 else "tab10")
    for i, (x0, x1, y0, y1) in enumerate(boxes):
        colour = colours(i % colours.N)
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, facecolor="none", edgecolor=colour, linewidth=1.4,
                               label=f"file {i}"))
    ax.set_xlim(*x_lim)
    ax.set_ylim(*y_lim)
    for axis, a in ((ax.xaxis, x), (ax.yaxis, y)):
        if a.tick is not None:
            axis.set_major_formatter(FuncFormatter(lambda v, _pos, f=a.tick: f(v)))
        if a.ordinal:
            step = max(1, -(-len(a.labels) // 12))  # at most 12 labels
            ticks = list(range(0, len(a.labels), step))
            axis.set_ticks(ticks, [_short(a.labels[i]) for i in ticks])
    if x.ordinal or x.tick is not None:
        plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    ax.set_xlabel(x.name + (" (files' bounds, in order)" if x.ordinal else ""))
    ax.set_ylabel(y.name + (" (files' bounds, in order)" if y.ordinal else ""))
    overlap = (f"a covered point lies in {covered.mean():.1f} files' boxes on average, in {covered.max()} at most"
               + (f"; {missing} files without bounds not drawn" if missing else ""))
    ax.set_title(f"{head}\n{overlap}", fontsize=9)
    fig.text(0.01, 0.01, f"a point predicate reads {h.columns[0].share:.0%} of files on {x.name}, "
                         f"{h.columns[1].share:.0%} on {y.name}", fontsize=9)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def _short(v) -> str:
    text = v.hex() if isinstance(v, (bytes, bytearray)) else str(v)
    return text if len(text) <= 14 else text[:13] + "…"


def load(name: str, catalog_properties: dict[str, str] | None = None, attached=None):
    """The pyiceberg Table ``catalog.namespace.table``: through the attached session's catalogs
    (``attached(catalog name)``) when lakerules runs in this process, else a pyiceberg catalog
    from ``catalog_properties``."""
    parts = name.split(".")
    if len(parts) < 3:
        raise LakeError(f"lakerules inspect: name a table as catalog.namespace.table, not {name!r}")
    from pyiceberg import exceptions as ie

    try:
        if catalog_properties is None:
            if attached is None:
                raise LakeError("lakerules inspect: no session attached in this process: give the catalog's "
                                "properties (python -m lakerules inspect --warehouse W, or catalog_properties=)")
            catalog = attached(parts[0])
        else:
            from pyiceberg.catalog import load_catalog

            try:
                catalog = load_catalog(parts[0], **catalog_properties)
            except Exception as e:  # noqa: BLE001 - pyiceberg raises ValueError, ImportError, ...
                raise LakeError(f"lakerules inspect: cannot open catalog {parts[0]!r}: {e}") from None
        return catalog.load_table(tuple(parts[1:]))
    except (ie.NoSuchTableError, ie.NoSuchNamespaceError):
        raise LakeError(f"lakerules inspect: no table {name}") from None
