"""Which files OPTIMIZE (and rewrite_data_files) rewrites, and into how many files: step 3 of
lakerules.optimize.rewrite, from the table's metadata alone.

Files are grouped by the partition of the current spec their rows are written into
(:func:`groups`), so that each such partition is one file group, whichever spec wrote its
files. A file of the current spec belongs to its partition. A file of an earlier spec belongs to
the partition its own partition values give in the current spec (the same field, an identity
field the current transform applies to, or a finer time transform: hours to days), or, failing
that, its column bounds (every row has the same value of the current transform: min and max
transform alike, no NULLs, or only NULLs). A file of an earlier spec that may hold rows of
several current partitions (``spanning``: an unpartitioned file once the table is partitioned by
a column it holds several values of) is rewritten with the files of every current partition it
may write into (by its partition values and, for a monotonic transform, its bounds) (whether the WHERE selected them or not: its rows land there anyway), the rows
distributed by their current partition, so that each of those partitions gets one new file.
Iceberg's rewrite groups such files on their own, which leaves their partitions with the new
file beside the old ones.

Within a group, as before: bin-packing (:func:`compaction_units`) or z-order cubes
(:func:`zorder_units`). Files larger than maxFileSize (Iceberg's max-file-size-bytes: 1.8 times
the target unless set) are split into round(size / target) files, and a cube whose files are on
average larger than that is rewritten into files of the target, so that OPTIMIZE with a smaller
target re-splits what an earlier one wrote.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from dataclasses import dataclass, field

from pyiceberg.conversions import from_bytes
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from pyiceberg.types import DateType, DoubleType, FloatType, TimestampType, TimestamptzType

from pyiceberg.typedef import Record

from lakerules.scan.planning import PATH_FIELD_ID, PlannedFile

ZORDER_COLUMNS = "lakerules.zorder.columns"  # snapshot summary: the field ids a cube is z-ordered by
CURVE = "lakerules.zorder.curve"  # snapshot summary: "hilbert" for HILBERT BY cubes (absent: z-order)
MAX_FILE_SIZE_RATIO = 1.8  # Iceberg's max-file-size-bytes default: 180% of the target


@dataclass
class Unit:
    """Files rewritten together: a bin (num_files output files: one, or a large file's pieces), a
    partition's z-order cube, or (``by_partition``) files whose rows spread over several
    partitions, distributed by their partition into num_files tasks: one file a partition."""

    files: list[PlannedFile]
    num_files: int
    merged_cubes: int = 0
    by_partition: bool = False


@dataclass
class Stats:
    considered: int = 0
    skipped_to_reduce_write: list = field(default_factory=list)  # DataFiles left alone
    other_spec: int = 0
    cube_files: list = field(default_factory=list)
    other_files: list = field(default_factory=list)
    cubes: int = 0
    heavy: int = 0  # files past deleteFileThreshold or deleteRatioThreshold


# ---- grouping by the current spec's partition ------------------------------------------------------

_WILD = object()  # a partition value a file of an earlier spec does not determine


@dataclass(frozen=True)
class _Range:
    """Partition values a file of an earlier spec may hold, from its column bounds: lo to hi (a
    monotonic transform of them), and NULL if ``nulls``."""

    lo: object
    hi: object
    nulls: bool

    def holds(self, v) -> bool:
        if v is None:
            return self.nulls
        try:
            return self.lo <= v <= self.hi
        except TypeError:
            return True

    def meets(self, other: "_Range") -> bool:
        try:
            return (self.nulls and other.nulls) or (self.lo <= other.hi and other.lo <= self.hi)
        except TypeError:
            return True


def _exact(v) -> bool:
    return v is not _WILD and not isinstance(v, _Range)


_TIME = {HourTransform: 0, DayTransform: 1, MonthTransform: 2, YearTransform: 3}
_MONOTONIC = (IdentityTransform, TruncateTransform, YearTransform, MonthTransform, DayTransform, HourTransform)


@dataclass
class Group:
    files: list[PlannedFile]
    spanning: bool = False  # holds files whose rows may fall into several current partitions


def groups(table, scan_files, selected, rewrite_other_specs: bool) -> list[Group]:
    """The selected files (``selected(spec_id, partition)``: the WHERE may match that partition
    of that spec) grouped by the partition of the current spec their rows are written into; a
    file of an earlier spec is selected by that partition when it is known, else by its own.
    A group with spanning files also holds every file of the partitions they may write into.
    Files of earlier specs count only with ``rewrite_other_specs``."""
    spec, schema = table.spec(), table.schema()
    exact: dict[tuple, list[PlannedFile]] = defaultdict(list)
    chosen: set[str] = set()
    spanning: list[tuple[tuple, PlannedFile]] = []
    for p in scan_files:
        if p.file.spec_id != spec.spec_id and not rewrite_other_specs:
            continue
        key = tuple(p.file.partition) if p.file.spec_id == spec.spec_id else output_key(table, spec, schema, p)
        if not all(_exact(v) for v in key):
            if selected(p.file.spec_id, p.file.partition):
                spanning.append((key, p))
            continue
        is_selected = selected(spec.spec_id, Record(*key))
        exact[key].append(p)
        if is_selected:
            chosen.add(p.file.file_path)

    # components: a spanning file joins every partition it may write into, and every other
    # spanning file that may write into the same partition
    parent = list(range(len(spanning)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    touched: dict[tuple, int] = {}
    anywhere = [i for i, (a, _) in enumerate(spanning) if all(v is _WILD for v in a)]
    if anywhere:  # a file that may write into any partition: one group of everything it meets
        for i in range(len(spanning)):
            parent[i] = anywhere[0]
        touched = dict.fromkeys(exact, anywhere[0])
    else:
        for i, (a, _) in enumerate(spanning):
            for j in range(i):
                if _compatible(a, spanning[j][0]):
                    parent[find(i)] = find(j)
        for key in exact:
            for i, (a, _) in enumerate(spanning):
                if _compatible(a, key):
                    if key in touched:
                        parent[find(i)] = find(touched[key])
                    touched[key] = find(i)
    components: dict[int, list[PlannedFile]] = defaultdict(list)
    for i, (_, p) in enumerate(spanning):
        components[find(i)].append(p)
    for key, root in touched.items():
        components[find(root)].extend(exact[key])
    out = [Group(files, spanning=True) for files in components.values()]
    for key, files in exact.items():
        if key not in touched:
            picked = [p for p in files if p.file.file_path in chosen]
            if picked:
                out.append(Group(picked))
    return out


def _compatible(a: tuple, b: tuple) -> bool:
    """Whether two partial partition tuples may name the same partition."""
    return all(_may_meet(x, y) for x, y in zip(a, b))


def _may_meet(x, y) -> bool:
    if x is _WILD or y is _WILD:
        return True
    if isinstance(x, _Range):
        return x.meets(y) if isinstance(y, _Range) else x.holds(y)
    if isinstance(y, _Range):
        return y.holds(x)
    return x == y


def output_key(table, spec, schema, p: PlannedFile) -> tuple:
    """The partition of the current spec that every row of a file of an earlier spec falls into,
    field by field; _WILD where the file does not determine it."""
    old = table.specs()[p.file.spec_id]
    return tuple(_derive(f, old, schema, p.file) for f in spec.fields)


def _derive(f, old, schema, data_file):
    t = f.transform
    if isinstance(t, VoidTransform):
        return None
    source = schema.find_field(f.source_id).field_type
    for i, of in enumerate(old.fields):
        if of.source_id != f.source_id:
            continue
        value = data_file.partition[i]
        if of.transform == t:
            return value
        if isinstance(of.transform, IdentityTransform):
            return t.transform(source)(value)
        coarser = _coarsened(of.transform, t, source, value)
        if coarser is not _WILD:
            return coarser
    return _from_bounds(t, f.source_id, source, data_file)


def _coarsened(old, new, source, value):
    """new's value of a row whose old time transform value is ``value``, when new is coarser
    (hours to days, days to months, ...): new of the start of old's period."""
    if type(old) not in _TIME or type(new) not in _TIME or _TIME[type(old)] >= _TIME[type(new)]:
        return _WILD
    if value is None:
        return None
    if isinstance(old, MonthTransform):
        days = (datetime.date(1970 + value // 12, value % 12 + 1, 1) - datetime.date(1970, 1, 1)).days
    elif isinstance(old, DayTransform):
        days = value
    else:  # hours
        if not isinstance(source, (TimestampType, TimestamptzType)):
            return _WILD
        return new.transform(source)(value * 3_600_000_000)
    if isinstance(source, DateType):
        return new.transform(source)(days)
    if isinstance(source, (TimestampType, TimestamptzType)):
        return new.transform(source)(days * 86_400_000_000)
    return _WILD


def _from_bounds(t, source_id: int, source, data_file):
    """t's value for every row, from the file's column metrics: only NULLs -> None; no NULLs and
    t of the lower bound equal to t of the upper (t monotonic; bucket only for equal bounds).
    Else, for a monotonic t, the _Range of values its rows may have; else _WILD."""
    if isinstance(source, (FloatType, DoubleType)) or not source.is_primitive:
        return _WILD
    nulls = (data_file.null_value_counts or {}).get(source_id)
    if nulls is None:
        return _WILD
    if data_file.record_count > 0 and nulls == data_file.record_count:
        return None
    lower = (data_file.lower_bounds or {}).get(source_id)
    upper = (data_file.upper_bounds or {}).get(source_id)
    if lower is None or upper is None:
        return _WILD
    lo, hi = from_bytes(source, lower), from_bytes(source, upper)
    fn = t.transform(source)
    if isinstance(t, _MONOTONIC) or (isinstance(t, BucketTransform) and lo == hi):
        a, b = fn(lo), fn(hi)
        if a == b and not nulls:
            return a
        return _Range(a, b, nulls > 0) if isinstance(t, _MONOTONIC) else _WILD
    return _WILD


# ---- choosing files within a group -----------------------------------------------------------------


def cube_columns(table) -> dict[int, str]:
    """snapshot id -> the clustering of the files it added, for OPTIMIZE ZORDER|HILBERT BY's: the
    columns (field ids), prefixed by the curve when not z-order ("hilbert:1,2")."""
    out = {}
    for s in table.metadata.snapshots:
        columns = s.summary.get(ZORDER_COLUMNS) if s.summary is not None else None
        if columns:
            curve = s.summary.get(CURVE)
            out[s.snapshot_id] = f"{curve}:{columns}" if curve else columns
    return out


def cube_id(curve: str, columns) -> str:
    ids = ",".join(str(f.field_id) for _, f in columns)
    return ids if curve == "zorder" else f"{curve}:{ids}"


def deletes(p: PlannedFile) -> int:
    """The delete files that apply to the data file, as the planner matched them: position deletes
    naming it (equal file_path bounds) or whose file_path bounds hold its path, equality deletes
    of its partition with a later sequence number."""
    return len(p.position_deletes) + len(p.equality_deletes)


def deleted_ratio(p: PlannedFile) -> float:
    """The share of the file's rows known deleted, as Iceberg's delete-ratio-threshold counts it:
    the rows of the position delete files scoped to this one file (equal file_path bounds; every
    row of such a file deletes a row of it), at most the file's rows. Equality deletes and
    position deletes of several files are not counted (their rows here are not known without
    reading them)."""
    if not p.position_deletes or not p.file.record_count:
        return 0.0
    known = 0
    for d in p.position_deletes:
        lower = (d.lower_bounds or {}).get(PATH_FIELD_ID)
        if lower is not None and lower == (d.upper_bounds or {}).get(PATH_FIELD_ID):
            known += d.record_count
    return min(known, p.file.record_count) / p.file.record_count


def heavy(p: PlannedFile, settings) -> bool:
    """Rewritten for its deletes: deleteFileThreshold or more delete files, or deleted rows at
    least deleteRatioThreshold of its rows."""
    return deletes(p) >= settings.delete_file_threshold or deleted_ratio(p) >= settings.delete_ratio_threshold


def size(files) -> int:
    return sum(p.file.file_size_in_bytes for p in files)


def _pieces(settings, nbytes: int) -> int:
    return max(1, round(nbytes / settings.target_file_size))


def _new_for_cubes(p, ids: str, cubes_of: dict, settings, spec_id: int) -> bool:
    """Whether a file is new to a z-order by these columns: in no cube of them (or with many deletes,
    or of an earlier spec)."""
    return (settings.rewrite_all or p.file.spec_id != spec_id or cubes_of.get(p.snapshot_id) != ids
            or heavy(p, settings))


def zorder_units(files: list[PlannedFile], ids: str, cubes_of: dict, settings, stats: Stats,
                 spec_id: int = 0) -> list[Unit]:
    """One partition's z-order: its new files and unstable cubes into one new cube, or nothing.

    A cube of at least minCubeSize stays. So does the largest smaller one when all that would be
    merged into it (new files, other small cubes) is at most incrementalRatio of its size: at
    most about that share of the partition's files then lie outside its layout, so skipping
    stays near its own, and the new rows are clustered on their own instead of rewriting it.
    A cube whose files are on average larger than maxFileSize was written for a larger target:
    it is rewritten into files of this one. When what is left to rewrite is one cube or nothing,
    the partition is already clustered.
    """
    cubes: dict[int, list[PlannedFile]] = defaultdict(list)
    new = []
    for p in files:
        if _new_for_cubes(p, ids, cubes_of, settings, spec_id):
            new.append(p)
        else:
            cubes[p.snapshot_id].append(p)
    stats.cube_files += [p.file for c in cubes.values() for p in c]
    stats.other_files += [p.file for p in new]
    stats.cubes += len(cubes)
    oversized = [c for c in cubes.values() if size(c) / len(c) > settings.max_file_size]
    stable = [c for c in cubes.values() if size(c) / len(c) <= settings.max_file_size]
    kept = [c for c in stable if size(c) >= settings.min_cube_size]
    merged = sorted((c for c in stable if size(c) < settings.min_cube_size), key=size)
    if merged and size(new) + sum(size(c) for c in merged[:-1] + oversized) <= settings.incremental_ratio * size(merged[-1]):
        kept.append(merged.pop())  # the largest small cube: the rest is small beside it
    merged += oversized
    if not new and len(merged) <= 1 and not oversized:
        return []  # already clustered by these columns
    stats.skipped_to_reduce_write += [p.file for c in kept for p in c]
    rewrite = new + [p for c in merged for p in c]
    return [Unit(rewrite, _pieces(settings, size(rewrite)), len(merged))]


def _compaction_candidate(p, cubes_of: dict, settings, stats: Stats, spec_id: int) -> bool:
    if settings.rewrite_all or p.file.spec_id != spec_id:
        return True  # every file, or one of an earlier partition spec
    is_heavy = heavy(p, settings)
    if p.snapshot_id in cubes_of and not is_heavy:
        stats.skipped_to_reduce_write.append(p.file)  # a z-order cube keeps its layout
        return False
    return (is_heavy or p.file.file_size_in_bytes < settings.min_file_size
            or p.file.file_size_in_bytes > settings.max_file_size)


def compaction_units(files: list[PlannedFile], cubes_of: dict, settings, stats: Stats,
                     spec_id: int = 0) -> list[Unit]:
    """One partition's bin-packing: small files and files with many deletes, into target-size
    bins; a file larger than maxFileSize on its own, split into round(size / target) files."""
    candidates = [p for p in files if _compaction_candidate(p, cubes_of, settings, stats, spec_id)]
    bins, current, total = [], [], 0
    for p in sorted(candidates, key=lambda p: (p.file.file_size_in_bytes, p.file.file_path)):
        if current and total + p.file.file_size_in_bytes > settings.target_file_size:
            bins.append(current)
            current, total = [], 0
        current.append(p)
        total += p.file.file_size_in_bytes
    if current:
        bins.append(current)
    units = []
    for b in bins:
        # only a bin of one file can pass the target: split when it passes maxFileSize
        pieces = _pieces(settings, size(b)) if len(b) == 1 and size(b) > settings.max_file_size else 1
        # a bin of one file gains nothing (nor, by min_input_files, of a few), unless the rewrite
        # drops deletes or splits it; rewrite_all rewrites every bin
        if (settings.rewrite_all or len(b) >= max(2, settings.min_input_files) or pieces > 1
                or any(heavy(p, settings) or p.file.spec_id != spec_id for p in b)):
            units.append(Unit(b, pieces))
    return units


def spanning_unit(files: list[PlannedFile], cubes_of: dict, settings, stats: Stats, spec_id: int,
                  ids: str | None = None) -> list[Unit]:
    """A group with files of an earlier spec whose rows spread over several current partitions:
    those files, with the files of those partitions that bin-packing (or, ``ids`` given, a
    z-order by those columns) would rewrite, in one unit distributed by partition."""
    if ids is not None:
        rewrite = [p for p in files if _new_for_cubes(p, ids, cubes_of, settings, spec_id)]
        chosen = {id(p) for p in rewrite}
        left = [p.file for p in files if id(p) not in chosen]
        stats.cube_files += left
        stats.other_files += [p.file for p in rewrite]
        stats.skipped_to_reduce_write += left
    else:
        rewrite = [p for p in files if _compaction_candidate(p, cubes_of, settings, stats, spec_id)]
    return [Unit(rewrite, _pieces(settings, size(rewrite)), by_partition=True)] if rewrite else []
