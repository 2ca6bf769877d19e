"""The bulk pre-filter over cached manifest entries (lakerules.scan.manifests) never drops an entry
pyiceberg's exact evaluators keep, and does drop what bounds clearly exclude."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.conversions import to_bytes
from pyiceberg.expressions import (
    And,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    Or,
)
from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator, bind, rewrite_not
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from lakerules.scan import manifests

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "v", DoubleType(), required=False),
    NestedField(3, "k", StringType(), required=False),
)
TYPES = {1: LongType(), 2: DoubleType(), 3: StringType()}

ints = st.integers(-50, 50)
strings = st.text(alphabet="abcé\U0001f600", max_size=3)
values = {"id": ints, "v": st.floats(-50, 50, allow_nan=False), "k": strings}


@st.composite
def files(draw):
    lower, upper = {}, {}
    for fid, name in ((1, "id"), (2, "v"), (3, "k")):
        if draw(st.booleans()):  # some files have no bounds for a column
            a, b = sorted([draw(values[name]), draw(values[name])])
            lower[fid], upper[fid] = to_bytes(TYPES[fid], a), to_bytes(TYPES[fid], b)
    f = DataFile.from_args(
        content=DataFileContent.DATA, file_path=f"/t/{draw(st.integers())}.parquet", file_format=FileFormat.PARQUET,
        partition=Record(), record_count=10, file_size_in_bytes=100, lower_bounds=lower, upper_bounds=upper,
        value_counts={1: 10, 2: 10, 3: 10}, null_value_counts={1: 0, 2: 0, 3: 0},
    )
    return ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=1, data_file=f)


def predicates():
    leaf = st.one_of(*[
        values[name].map(lambda v, op=op, name=name: op(name, v))
        for name in values
        for op in (EqualTo, LessThan, LessThanOrEqual, GreaterThan, GreaterThanOrEqual, NotEqualTo)
    ], st.lists(ints, min_size=1, max_size=80).map(lambda vs: In("id", vs)),
        st.sampled_from(list(values)).map(IsNull))
    return st.recursive(leaf, lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: And(*p)), st.tuples(inner, inner).map(lambda p: Or(*p)),
        inner.map(Not)), max_leaves=5)


@settings(max_examples=300, deadline=None)
@given(st.lists(files(), min_size=1, max_size=12), predicates())
def test_prefilter_keeps_every_entry_the_exact_evaluator_keeps(entries, predicate):
    cached = manifests.CachedManifest(entries)
    mask = manifests.may_match(bind(SCHEMA, rewrite_not(predicate), True), len(entries), cached.bounds)
    kept = [True] * len(entries) if mask is None else mask.to_pylist()
    exact = _InclusiveMetricsEvaluator(SCHEMA, predicate, True, False).eval
    for entry, keep in zip(entries, kept):
        if exact(entry.data_file):
            assert keep, (predicate, entry.data_file.lower_bounds, entry.data_file.upper_bounds)


def test_prefilter_drops_entries_outside_bounds():
    def entry(lo, hi):
        f = DataFile.from_args(
            content=DataFileContent.DATA, file_path=f"/t/{lo}.parquet", file_format=FileFormat.PARQUET,
            partition=Record(), record_count=10, file_size_in_bytes=100,
            lower_bounds={1: to_bytes(LongType(), lo)}, upper_bounds={1: to_bytes(LongType(), hi)},
        )
        return ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=1, data_file=f)

    cached = manifests.CachedManifest([entry(i * 10, i * 10 + 9) for i in range(100)])
    mask = manifests.may_match(bind(SCHEMA, EqualTo("id", 457), True), 100, cached.bounds)
    assert mask.to_pylist().index(True) == 45 and sum(mask.to_pylist()) == 1
    mask = manifests.may_match(bind(SCHEMA, In("id", list(range(300, 310)) + [5]), True), 100, cached.bounds)
    assert [i for i, k in enumerate(mask.to_pylist()) if k] == [0, 30]


def test_cache_is_bounded_by_entries():
    class Manifest:
        def __init__(self, path, n):
            self.manifest_path, self.n = path, n

        def fetch_manifest_entry(self, io, discard_deleted=True):
            return [object()] * self.n

    cache = manifests.ManifestCache(max_entries=25)
    for i in range(5):
        cache.get(None, Manifest(f"m{i}", 10))
    assert cache.entries <= 25
    first = cache.get(None, Manifest("m4", 10))
    assert cache.get(None, Manifest("m4", 999)) is first  # a hit: never read again
