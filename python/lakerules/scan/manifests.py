"""Manifest entries, cached across statements and pruned in bulk.

A manifest never changes once written, so its live entries are read once per process and kept,
keyed by path, up to a total number of entries (``spark.lakerules.planning.manifestCacheEntries``,
least recently used out first; 0 turns the cache off).

For each cached manifest, the values a filter tests are decoded once, on first use, into one
Arrow array per column: partition values, and column lower and upper bounds. A filter is then
evaluated over all entries of a manifest at once (``may_match``): a *pre-filter* that keeps every
entry pyiceberg's evaluators could keep and drops only entries whose values prove no row matches.
Planning runs pyiceberg's exact per-entry evaluators on what it keeps, so the pre-filter decides
cost, never results. Predicates it does not know (and types it does not decode) keep everything.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.conversions import from_bytes
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundEqualTo,
    BoundGreaterThan,
    BoundGreaterThanOrEqual,
    BoundIn,
    BoundLessThan,
    BoundLessThanOrEqual,
    Or,
)
from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestEntry, ManifestFile
from pyiceberg.types import (
    BinaryType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

from lakerules.spark import settings

CACHE_KEY = "spark.lakerules.planning.manifestCacheEntries"
CACHE_DEFAULT = 500_000  # about 2.3 KB of driver memory each (measured with a 3-column table)
IN_VALUES_TESTED = 64  # an IN list longer than this is tested by its smallest and largest value

_ARROW_TYPES = {
    IntegerType: pa.int64(), LongType: pa.int64(), DateType: pa.int64(), TimeType: pa.int64(),
    TimestampType: pa.int64(), TimestamptzType: pa.int64(),
    FloatType: pa.float64(), DoubleType: pa.float64(),
    StringType: pa.string(), BinaryType: pa.binary(),
}


def arrow_type(iceberg_type) -> pa.DataType | None:
    """The Arrow type bounds of an Iceberg type are compared in, or None: not pre-filtered."""
    return _ARROW_TYPES.get(type(iceberg_type))


@dataclass(eq=False)
class CachedManifest:
    """The live entries of one manifest, and their values as Arrow columns (built on first use)."""

    entries: list[ManifestEntry]
    _bounds: dict = field(default_factory=dict)  # (field id, type) -> (lower, upper)
    _partitions: dict = field(default_factory=dict)  # (position, type) -> values
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def size(self) -> int:
        return len(self.entries)

    def take(self, indices) -> list[ManifestEntry]:
        return [self.entries[i] for i in indices]

    def bounds(self, field_id: int, iceberg_type) -> tuple[pa.Array, pa.Array] | None:
        """(lower, upper) bound of a column per entry (null where a file has none)."""
        kind = arrow_type(iceberg_type)
        if kind is None:
            return None
        key = (field_id, type(iceberg_type))
        with self._lock:
            if key not in self._bounds:
                lower, upper = [], []
                for e in self.entries:
                    f = e.data_file
                    lo = (f.lower_bounds or {}).get(field_id)
                    hi = (f.upper_bounds or {}).get(field_id)
                    lower.append(None if lo is None else from_bytes(iceberg_type, lo))
                    upper.append(None if hi is None else from_bytes(iceberg_type, hi))
                self._bounds[key] = (pa.array(lower, kind), pa.array(upper, kind))
            return self._bounds[key]

    def partition_values(self, position: int, iceberg_type) -> pa.Array | None:
        kind = arrow_type(iceberg_type)
        if kind is None:
            return None
        key = (position, type(iceberg_type))
        with self._lock:
            if key not in self._partitions:
                values = []
                for e in self.entries:
                    p = e.data_file.partition
                    values.append(p[position] if p is not None and position < len(p) else None)
                try:
                    self._partitions[key] = pa.array(values, kind)
                except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
                    self._partitions[key] = None  # a value of an unexpected kind: test nothing
            return self._partitions[key]


class ManifestCache:
    def __init__(self, max_entries: int = CACHE_DEFAULT):
        self.max_entries = max_entries
        self._items: OrderedDict[str, CachedManifest] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, io: FileIO, manifest: ManifestFile) -> CachedManifest:
        """The manifest's live entries, cached; read by pyiceberg when not cached."""
        key = manifest.manifest_path
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit
        cached = CachedManifest(manifest.fetch_manifest_entry(io, discard_deleted=True))
        self._add(key, cached)
        return cached

    def fill(self, manifests: list[ManifestFile], read_many) -> dict:
        """Read the manifests not cached with ``read_many(manifests)`` (a dict of their path to
        what it read, lakerules.scan.manifest_columns: in the JVM, in one call) and cache them.
        Returns what it read (the callers use it even when the cache is off)."""
        missing = [m for m in manifests if m.manifest_path not in self]
        if not missing:
            return {}
        read = read_many(missing)
        for key, cached in read.items():
            self._add(key, cached)
        return read

    def _add(self, key: str, cached) -> None:
        with self._lock:
            if self.max_entries > 0 and key not in self._items:
                self._items[key] = cached
                self._size += cached.size
                while self._size > self.max_entries and self._items:
                    _, old = self._items.popitem(last=False)
                    self._size -= old.size

    def peek(self, manifest_path: str):
        """What is cached for a manifest path (None: nothing), leaving the order alone."""
        with self._lock:
            return self._items.get(manifest_path)

    def put(self, manifest_path: str, cached) -> None:
        """Cache what a manifest holds, known without reading it (a manifest a commit merged)."""
        self._add(manifest_path, cached)

    def __contains__(self, manifest_path: str) -> bool:
        with self._lock:
            return manifest_path in self._items

    def clear(self) -> None:
        """Forget every cached manifest (the next planning reads each again), the limit kept."""
        with self._lock:
            self._items.clear()
            self._size = 0

    def resize(self, max_entries: int) -> None:
        with self._lock:
            self.max_entries = max_entries
            while self._items and (self._size > max_entries or max_entries <= 0):
                _, old = self._items.popitem(last=False)
                self._size -= old.size

    @property
    def entries(self) -> int:
        return self._size


CACHE = ManifestCache()


def configure(value: str | None) -> None:
    """Apply the session's CACHE_KEY setting (entries, 0 for no cache) to the process's cache."""
    limit = settings.count(CACHE_KEY, value, CACHE_DEFAULT, "manifest entries")
    if limit != CACHE.max_entries:
        CACHE.resize(limit)


# ---- the pre-filter ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ops:
    """How the pre-filter's tests are made over some representation of per-entry bounds (Arrow
    arrays here; Spark columns in lakerules.scan.manifest_job): comparisons of a bound with a value
    (null where the bound is unknown), and, or, ``keep`` (true unless the test proved no row
    matches: a null proves nothing) and ``none`` (no entry matches)."""

    gt: Callable
    ge: Callable
    lt: Callable
    le: Callable
    and_: Callable
    or_: Callable
    keep: Callable
    none: Callable


def arrow_ops(n: int) -> Ops:
    def compare(fn):
        return lambda bound, value: fn(bound, pa.scalar(value, bound.type))

    return Ops(gt=compare(pc.greater), ge=compare(pc.greater_equal), lt=compare(pc.less),
               le=compare(pc.less_equal), and_=pc.and_, or_=pc.or_,
               keep=lambda out: pc.invert(pc.fill_null(out, False)),
               none=lambda: pa.array([False] * n, pa.bool_()))


def may_match(expr: BooleanExpression, n: int, column, ops: Ops | None = None):
    """Over n entries, which may hold a row where the bound, NOT-free expr holds: a boolean
    array (or what ``ops`` make), or None for all of them. ``column(field_id, iceberg_type)``
    gives (lower, upper) bounds of a column per entry (None when unknown). Conservative: an
    entry is dropped only where its bounds prove the predicate false for every row."""
    ops = ops or arrow_ops(n)
    if isinstance(expr, AlwaysTrue):
        return None
    if isinstance(expr, AlwaysFalse):
        return ops.none()
    if isinstance(expr, (And, Or)):
        left, right = may_match(expr.left, n, column, ops), may_match(expr.right, n, column, ops)
        if isinstance(expr, And):
            return right if left is None else left if right is None else ops.and_(left, right)
        return None if left is None or right is None else ops.or_(left, right)
    kind = type(expr)
    if kind not in (BoundEqualTo, BoundLessThan, BoundLessThanOrEqual, BoundGreaterThan, BoundGreaterThanOrEqual,
                    BoundIn):
        return None  # IS NULL, NOT NULL, NOT IN, STARTS WITH, NaN tests, ...: keep every entry
    ref = expr.term.ref()
    bounds = column(ref.field.field_id, ref.field.field_type)
    if bounds is None:
        return None
    lower, upper = bounds

    def outside(lo, hi):  # every row of the entry lies below lo or above hi
        return ops.or_(ops.gt(lower, lo), ops.lt(upper, hi))

    if kind is BoundEqualTo:
        out = outside(expr.literal.value, expr.literal.value)
    elif kind is BoundIn:
        values = sorted(lit.value for lit in expr.literals)
        if not values:
            return ops.none()
        if len(values) > IN_VALUES_TESTED:
            out = outside(values[-1], values[0])
        else:
            out = None
            for v in values:
                out = outside(v, v) if out is None else ops.and_(out, outside(v, v))
    elif kind is BoundLessThan:
        out = ops.ge(lower, expr.literal.value)
    elif kind is BoundLessThanOrEqual:
        out = ops.gt(lower, expr.literal.value)
    elif kind is BoundGreaterThan:
        out = ops.le(upper, expr.literal.value)
    else:
        out = ops.lt(upper, expr.literal.value)
    return ops.keep(out)


def _scalar(value, kind: pa.DataType) -> pa.Scalar:
    return pa.scalar(value, kind)

