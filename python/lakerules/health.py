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
  optional ``plot`` extra), e.g. before and after ``OPTIMIZE ... ZORDER BY``.
"""

from __future__ import annotations

import datetime
import decimal
import random
import statistics
from collections import Counter
from dataclasses import dataclass, field

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
                             else (from_bytes(f.field_type, lo), from_bytes(f.field_type, hi)))
    h.most_deleted = sorted((p for p in per_file if p[0]), reverse=True)[:5]
    h.columns = [ColumnLayout(f.name, r, _share(r, seed=i + 1)) for i, (f, r) in enumerate(zip(fields, ranges))]
    return h


def plot(h: Health, path, title: str | None = None) -> None:
    """Each data file's [min, max] box over the first two columns of ``h``, as a PNG at ``path``."""
    if len(h.columns) < 2:
        raise LakeError("lakerules inspect --plot draws two columns: give two --column")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError:
        raise LakeError("lakerules inspect --plot needs matplotlib: pip install 'lakerules[plot]'") from None
    x, y = h.columns[0], h.columns[1]
    boxes = []
    for rx, ry in zip(x.ranges, y.ranges):
        if rx is None or ry is None:
            continue
        (x0, x1), (y0, y1) = (_number(v) for v in rx), (_number(v) for v in ry)
        if None in (x0, x1, y0, y1):
            raise LakeError(f"lakerules inspect --plot draws numeric, date and time columns, not {x.name}, {y.name}")
        boxes.append((x0, x1, y0, y1))
    fig, ax = plt.subplots(figsize=(6, 6), dpi=100)
    cmap = plt.get_cmap("tab20")
    for i, (x0, x1, y0, y1) in enumerate(boxes):
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, facecolor=cmap(i % 20), alpha=0.25,
                               edgecolor=cmap(i % 20), linewidth=1.2))
    if boxes:
        ax.set_xlim(min(b[0] for b in boxes), max(b[1] for b in boxes))
        ax.set_ylim(min(b[2] for b in boxes), max(b[3] for b in boxes))
    ax.set_xlabel(x.name)
    ax.set_ylabel(y.name)
    ax.set_title(title or f"{h.table}: {len(boxes)} data files, [min, max] of {x.name} x {y.name}", fontsize=10)
    ax.text(0.01, -0.12, f"a point predicate reads {x.share:.0%} of files on {x.name}, {y.share:.0%} on {y.name}",
            transform=ax.transAxes, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def load(name: str, catalog_properties: dict[str, str] | None = None):
    """The pyiceberg Table ``catalog.namespace.table``: through the attached session's catalogs when
    lakerules runs in this process, else a pyiceberg catalog from ``catalog_properties``."""
    parts = name.split(".")
    if len(parts) < 3:
        raise LakeError(f"lakerules inspect: name a table as catalog.namespace.table, not {name!r}")
    from pyiceberg import exceptions as ie

    try:
        if catalog_properties is None:
            from lakerules import _attached_catalog

            catalog = _attached_catalog(parts[0])
        else:
            from pyiceberg.catalog import load_catalog

            try:
                catalog = load_catalog(parts[0], **catalog_properties)
            except Exception as e:  # noqa: BLE001 - pyiceberg raises ValueError, ImportError, ...
                raise LakeError(f"lakerules inspect: cannot open catalog {parts[0]!r}: {e}") from None
        return catalog.load_table(tuple(parts[1:]))
    except (ie.NoSuchTableError, ie.NoSuchNamespaceError):
        raise LakeError(f"lakerules inspect: no table {name}") from None
