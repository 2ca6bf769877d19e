"""Z-order clustering: rows range-repartitioned by their z-value into files (seed 001).

As Delta's ``MultiDimClustering`` (ZOrderClustering), with the sampling that Delta's
``range_partition_id`` leaves to Spark's RangePartitioner done here, once, for all columns:

1. Each z-order column becomes an orderable value: BIGINT (integers, booleans, dates as days,
   timestamps as microseconds), DOUBLE (floating point, decimals), STRING or BINARY.
2. A sample of each group's rows (about 100 rows a range, as Spark's RangePartitioner samples:
   read once, neither sorted nor shuffled) comes to the driver through Arrow, which sorts it
   and picks each column's N - 1 range boundaries evenly. On the rows, ``range_id(value, boundaries)`` maps a
   value to 1 .. N and NULL to 0: Delta's ``range_partition_id(col, N)``.
3. The files (``layout``): z-order makes each group's files the leaves of a k-d tree whose shape
   depends only on the file count n and the column count k, chosen so that a value of any one
   column is confined to about n^(-1/k) of the files for any n (cutting the z-curve itself does
   that only for n a power of 2^k). Each node cuts its rows along one column in proportion to
   its files, at a quantile of the sample's keys: a column's range id with a random byte (noise)
   below it, so that many rows of one value (skew) can spread over several files. On the rows,
   ``kd_cell(keys, tree, cuts)`` finds the file. ZORDER BY and HILBERT BY share these files:
   cutting either curve into n pieces of equal rows confines a column to n^(-1/k) of them only
   for n a power of 2^k, and a Hilbert piece is then the same square as a z-order piece.
4. Inside each file rows are sorted by the curve's key: ``interleave_bits(bits, array(range
   ids))`` (the z-value) or ``hilbert_index(bits, array(range ids))``, the ids first spread
   evenly over their 2^bits codes so that each bit halves a column's rows, with the noise byte
   below. The writer sorts each file by it, so row groups and pages are pieces of the curve:
   the z-curve's pieces favour the first column (its top bit) and jump across the file, the
   Hilbert curve's stay together, so each column's values and ranges meet fewer of them.

Every per-row step on the table's rows is a Spark SQL expression or one of the shim's functions
(``range_id``, ``interleave_bits``, ``hilbert_index``, ``kd_cell``), run in the JVM on executors; the boundaries reach the rows
through a broadcast join on the group.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import threading
from dataclasses import dataclass
from functools import reduce

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyiceberg import types as it
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from lakerules.spark import jvm as J
from lakerules.errors import NotSupported

ZKEY = "__lakerules_zkey"
_GROUP, _FILE, _OFFSET, _ZBOUNDS = "__lakerules_group", "__lakerules_file", "__lakerules_offset", "__lakerules_zbounds"
_TREE, _PART = "__lakerules_tree", "__lakerules_part"
CURVES = ("zorder", "hilbert")
SAMPLE_ROWS_PER_RANGE = 100  # Spark's spark.sql.execution.rangeExchange.sampleSizePerPartition
MAX_SAMPLE_ROWS = 1_000_000  # per group, as Spark's RangePartitioner caps its sample
MAX_TOTAL_SAMPLE_ROWS = 2_000_000  # all groups together: what the driver takes
NOISE_BITS = 8
BOUND_PREFIX = 64  # string and binary boundaries keep this many characters / bytes
SEED = 20240501  # fixed: the same data clusters the same way every time
MAX_RANGES = 1 << 20


@dataclass(frozen=True)
class Group:
    """Rows clustered together into ``num_files`` files (one partition's files to rewrite)."""

    rows: DataFrame  # the table's columns
    num_rows: int  # an estimate, for the sample's size
    num_files: int
    # rows of several partitions: each partition's rows in one of the num_files tasks (by this
    # hash of its partition values), one file sorted by the curve, instead of the k-d files
    partition_hash: Column | None = None


def cluster(spark, catalog: str, groups: list[Group], columns: list[tuple[tuple[str, ...], it.IcebergType]],
            num_ranges: int, add_noise: bool, curve: str = "zorder") -> DataFrame:
    """The rows of all groups, each group repartitioned into its files (one Spark partition each),
    with the curve's key (``zorder`` or ``hilbert``) as a last column ``ZKEY`` to sort each file
    by. The files are the leaves of a k-d tree over the columns' range ids (``layout``)."""
    fn = f"{J.quote(catalog)}.system"
    bits, ranges = ranges_and_bits(num_ranges, len(columns), add_noise)
    keys = [_orderable(path, t) for path, t in columns]
    names = groups[0].rows.columns
    shift = NOISE_BITS if add_noise else 0

    # 1. and 2. the sample, to the driver; each group's column boundaries, then file boundaries
    sample = _sample(groups, keys, ranges)
    gids = sample.column(0).to_numpy()
    plan_rows, offset = [], 0
    for gid, g in enumerate(groups):
        rows = sample.filter(gids == gid)
        columns = [(rows.column(j + 1), t) for j, (_, t) in enumerate(keys)]
        bounds = [boundaries(column, ranges, t) for column, t in columns]
        tree = layout(g.num_files, len(keys))
        cuts = kd_cuts(sample_kd_keys(columns, bounds, shift, SEED + gid), tree)
        plan_rows.append((gid, offset, *bounds, cuts, flatten(tree)))
        offset += g.num_files
    plan = J.local_frame(spark, plan_rows, _plan_schema([t for _, t in keys]))

    # 3. and 4. the rows: curve key, then file, then the shuffle that gives each file its own task
    data = reduce(DataFrame.unionByName,
                  [g.rows.select("*", F.lit(gid).alias(_GROUP),
                                 (F.pmod(g.partition_hash, F.lit(g.num_files)) if g.partition_hash is not None
                                  else F.lit(None).cast("int")).alias(_PART))
                   for gid, g in enumerate(groups)])
    data = data.join(F.broadcast(plan), _GROUP)
    bounds = [F.col(f"__b{j}") for j in range(len(keys))]
    values = [k for k, _ in keys]
    zkey = _zkey(fn, values, bounds, bits, ranges, add_noise, SEED + len(groups), curve)
    kd_keys = _kd_keys(fn, values, bounds, shift, SEED + len(groups) + 1)
    cell = F.call_function(f"{fn}.kd_cell", kd_keys, F.col(_TREE), F.col(_ZBOUNDS))
    data = data.select(*[J.column(n) for n in names], zkey.alias(ZKEY),
                       (F.col(_OFFSET) + F.coalesce(F.col(_PART), cell)).alias(_FILE))
    return data.repartitionById(offset, F.col(_FILE)).drop(_FILE)


def ranges_and_bits(num_ranges: int, num_columns: int, add_noise: bool) -> tuple[int, int]:
    """(bits a range id takes, ranges a column gets). Ids run from 0 (NULL) to the number of
    ranges, so a column takes bit_length(num_ranges) bits; the z-value must fit a BIGINT above the
    noise byte, so with many columns each gets fewer bits (and ranges).

    >>> ranges_and_bits(1000, 2, True)
    (10, 1000)
    >>> ranges_and_bits(1000, 8, True)
    (6, 63)
    """
    room = 63 - (NOISE_BITS if add_noise else 0)
    if num_columns > room:
        raise NotSupported(f"lakerules: cannot z-order by {num_columns} columns; at most {room}")
    bits = min(num_ranges.bit_length(), room // num_columns)
    return bits, min(num_ranges, (1 << bits) - 1)


# ---- the sample, on the driver -------------------------------------------------------------------


def _sample(groups: list[Group], keys, ranges: int):
    """The sampled rows, (group, orderable values...), as an Arrow table: one Spark job."""
    targets = [min(SAMPLE_ROWS_PER_RANGE * ranges, MAX_SAMPLE_ROWS, max(g.num_rows, 1)) for g in groups]
    scale = min(1.0, MAX_TOTAL_SAMPLE_ROWS / sum(targets))
    parts = []
    for gid, (g, target) in enumerate(zip(groups, targets)):
        rows = g.rows.select(F.lit(gid).alias(_GROUP), *[k.alias(f"__k{j}") for j, (k, _) in enumerate(keys)])
        fraction = target * scale / max(g.num_rows, 1)
        parts.append(rows if fraction >= 1.0 else rows.sample(fraction=fraction, seed=SEED + gid))
    return reduce(DataFrame.unionByName, parts).toArrow()


def boundaries(column: pa.ChunkedArray, count: int, t) -> list:
    """count - 1 range boundaries evenly spaced over a column's sorted non-NULL values (fewer
    when it has fewer values, or repeats), in the order range_id compares them in the JVM:
    Double.compare puts NaN above everything (and -0.0 never occurs: the orderable value adds
    0.0); strings compare by UTF-8 bytes, which is Python's code point order; binaries as
    unsigned bytes. String and binary boundaries are cut to BOUND_PREFIX, which keeps them sorted.

    >>> boundaries(pa.chunked_array([list(range(100))]), 4, LongType())
    [25, 50, 75]
    >>> boundaries(pa.chunked_array([[1.0, 1.0, float("nan"), None, 2.0]]), 4, DoubleType())
    [1.0, 2.0, nan]
    """
    present = pc.drop_null(column)
    n = len(present)
    m = min(count, n)
    if m <= 1:
        return []
    positions = [i * n // m for i in range(1, m)]
    if isinstance(t, (LongType, DoubleType)):
        picked = np.sort(present.to_numpy())[positions].tolist()  # numpy sorts NaN last
    else:
        # Arrow sorts strings and binaries by their bytes: UTF-8 order is code point order
        ordered = pc.take(present, pc.sort_indices(present))
        picked = [v[:BOUND_PREFIX] for v in pc.take(ordered, pa.array(positions)).to_pylist()]
    out = []
    for v in picked:
        if not out or not (v == out[-1] or (v != v and out[-1] != out[-1])):  # NaN repeats too
            out.append(v)
    return out


def range_ids(column: pa.ChunkedArray, bounds: list, t) -> np.ndarray:
    """As the JVM's range_id, for a column: 1 + the number of bounds below each value; 0 for NULL."""
    nulls = column.is_null().to_numpy(zero_copy_only=False)
    if isinstance(t, (LongType, DoubleType)):
        dtype = np.int64 if isinstance(t, LongType) else np.float64
        values = pc.fill_null(column, 0).to_numpy().astype(dtype)
        ids = np.searchsorted(np.array(bounds, dtype=dtype), values, side="left") + 1  # NaN last, as sorted
    else:
        ids = np.array([bisect.bisect_left(bounds, v) + 1 if v is not None else 0 for v in column.to_pylist()],
                       dtype=np.int64)
    ids[nulls] = 0
    return ids


def interleave_bits(bits: int, ids: list[np.ndarray]) -> np.ndarray:
    """As the JVM's interleave_bits: bit i of each id in turn, from the most significant.

    >>> interleave_bits(2, [np.array([1]), np.array([2])]).tolist()
    [6]
    """
    z = np.zeros(len(ids[0]) if ids else 0, dtype=np.int64)
    for i in range(bits - 1, -1, -1):
        for v in ids:
            z = (z << 1) | ((v >> i) & 1)
    return z


def sample_kd_keys(columns, bounds: list[list], shift: int, seed: int) -> np.ndarray:
    """The k-d keys of sampled rows (rows x columns), as _kd_keys computes them on the table's rows:
    each column's range id, with the noise byte below it."""
    ids = [range_ids(column, b, t) for (column, t), b in zip(columns, bounds)]
    keys = np.stack(ids, axis=1).astype(np.int64) << shift if ids else np.zeros((0, 0), dtype=np.int64)
    if shift:
        keys |= np.random.default_rng(seed).integers(0, 1 << shift, (len(keys), 1), dtype=np.int64)
    return keys


def hilbert_index(bits: int, ids: list[np.ndarray]) -> np.ndarray:
    """As the JVM's hilbert_index: Skilling's transpose of the coordinates, interleaved.

    >>> [hilbert_index(1, [np.array([x]), np.array([y])]).item() for x, y in [(0, 0), (0, 1), (1, 1), (1, 0)]]
    [0, 1, 2, 3]
    >>> sorted(hilbert_index(2, [np.array([x]), np.array([y])]).item() for x in range(4) for y in range(4))
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    """
    x = [np.asarray(v, dtype=np.int64).copy() for v in ids]
    n = len(x)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    q = 1 << (bits - 1)
    while q > 1:
        p = q - 1
        for i in range(n):
            on = (x[i] & q) != 0
            t = (x[0] ^ x[i]) & p
            x0 = np.where(on, x[0] ^ p, x[0] ^ t)  # invert where set, else exchange low bits
            if i:
                x[i] = np.where(on, x[i], x[i] ^ t)
            x[0] = x0
        q >>= 1
    for i in range(1, n):
        x[i] = x[i] ^ x[i - 1]
    t = np.zeros_like(x[0])
    q = 1 << (bits - 1)
    while q > 1:
        t = np.where((x[n - 1] & q) != 0, t ^ (q - 1), t)
        q >>= 1
    x = [v ^ t for v in x]
    return interleave_bits(bits, x)


# ---- the files: a k-d tree of cuts, close to the ideal share for any file count ------------------
#
# With n files and k columns, a value of one column can at best be confined to about n^(-1/k) of
# the files (each column cut into n^(1/k) ranges). Cutting the z-curve into n pieces does that
# only when n is a power of 2^k; otherwise one column gets twice the ranges of another. Instead
# the files are the leaves of a binary k-d tree: each node cuts its rows in two along one column,
# in proportion to the files on each side, so every file holds about the same rows; the shape of
# the tree (which column each node cuts, how many files each side gets) depends only on n and k
# and is chosen to minimize the largest share (``layout``). For n a power of 2^k it is the grid
# the z-curve gives; for 8 files and 2 columns it is, e.g., two slices of 3 files and one of 2.
# Rows inside a file are still sorted by the curve (z-order or Hilbert).

DP_MAX_FILES = 64  # more files, or columns: slabs of slabs (within 6% of the ideal for 2 columns, 16% for 3)
DP_MAX_COLUMNS = 3


@dataclass(frozen=True)
class Node:
    """A cut: rows whose key on ``dim`` is at most the cut go to ``left`` (``files`` of the node's
    files go there, the rest to ``right``); a child None is a leaf (one file)."""

    dim: int
    files: int
    left: "Node | None"
    right: "Node | None"


def _weights(k: int) -> np.ndarray:
    ratios = (1.0, 1.15, 1.3, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0) if k <= 2 else (1.0, 1.3, 1.75, 2.5, 4.0)
    return np.array(sorted({tuple(sorted((1.0, *c), reverse=True)) for c in itertools.product(ratios, repeat=k - 1)}))


_FRONTS: dict[int, list] = {}  # k -> the fronts computed so far, m = 0 .. len - 1
_FRONTS_LOCK = threading.Lock()


def _fronts(n: int, k: int) -> list:
    """For m = 1 .. n files, a few trees that are best for some balance between the columns:
    (H, back references), H[t] sorted descending: H[t][j] is the sum over the leaves of their
    extent in dimension j relative to the whole (so H[j] / m is the share of files a point on
    dimension j meets). A tree is H-invariant under scaling a dimension, so a subtree's H does
    not depend on the region it covers, and a split of m files into m1 + m2 along dimension j
    gives H_j = (m1 H1_j + m2 H2_j) / m and H_i = H1_i + H2_i for the others: dynamic
    programming over m, any permutation of the children's dimensions."""
    with _FRONTS_LOCK:
        return _extend_fronts(n, k)


def _extend_fronts(n: int, k: int) -> list:
    weights = _weights(k)
    perms = np.array(list(itertools.permutations(range(k))))
    fronts = _FRONTS.setdefault(k, [None, (np.ones((1, k)), [None])])
    for m in range(len(fronts), n + 1):
        blocks, vectors = [], []
        for m1 in sorted({m // 2, round(m / 3), round(m / 4), 1, 2, 3} & set(range(1, m // 2 + 1))):
            m2 = m - m1
            g1 = fronts[m1][0][:, perms].reshape(-1, k)  # row f * len(perms) + p: tree f, dims permuted by p
            g2 = fronts[m2][0][:, perms].reshape(-1, k)
            v = g1[:, None, :] + g2[None, :, :]
            v[:, :, 0] = (m1 * g1[:, None, 0] + m2 * g2[None, :, 0]) / m  # the split is along dimension 0
            vectors.append(v.reshape(-1, k))
            blocks.append((m1, len(g1), len(g2)))
        v = np.concatenate(vectors)
        ordered = -np.sort(-v, axis=1)
        score = (ordered[None, :, :] / weights[:, None, :]).max(axis=2) + 1e-9 * ordered.sum(axis=1)[None, :]
        kept_h, kept_refs = [], []
        for i in sorted(set(np.argmin(score, axis=1).tolist())):
            off = i
            for m1, n1, n2 in blocks:
                if off < n1 * n2:
                    break
                off -= n1 * n2
            i1, i2 = divmod(off, n2)
            order = tuple(int(d) for d in np.argsort(-v[i], kind="stable"))
            kept_h.append(v[i][list(order)])
            kept_refs.append((m1, i1 // len(perms), tuple(int(d) for d in perms[i1 % len(perms)]),
                              i2 // len(perms), tuple(int(d) for d in perms[i2 % len(perms)]), order))
        fronts.append((np.array(kept_h), kept_refs))
    return fronts


def _tree(fronts, m: int, t: int, to_dim) -> Node | None:
    """Tree t of m files, its dimension d (in its own frame) relabelled to_dim(d)."""
    if m == 1:
        return None
    m1, t1, p, t2, q, order = fronts[m][1][t]
    # frame of the candidate: dimension i holds child 1's p[i], child 2's q[i]; canonical i = order[i]
    here = lambda f: to_dim(order.index(f))  # noqa: E731 - candidate frame -> caller's dimension
    return Node(here(0), m1, _tree(fronts, m1, t1, lambda d: here(p.index(d))),
                _tree(fronts, m - m1, t2, lambda d: here(q.index(d))))


@functools.lru_cache(maxsize=None)
def _slabs(m: int, d: int) -> tuple[tuple[float, ...], Node | None]:
    """Many files: slabs of the first of d dimensions, as even as can be, each laid out in the
    others the same way: (H as in _fronts, the tree over dimensions 0 .. d - 1, the first
    dimension being 0). The number of slabs near m^(1/d) that gives the smallest largest share."""
    if m == 1 or d == 1:
        return (1.0, *([float(m)] * (d - 1))) if d > 1 or m == 1 else (1.0,), _chain(0, [1] * m, [None] * m)
    best = None
    root = m ** (1 / d)
    for s in sorted({max(1, int(root)), int(root) + 1, max(1, round(root)), int(root) + 2} & set(range(1, m + 1))):
        sizes = [m // s + (1 if i < m % s else 0) for i in range(s)]
        subs = [_slabs(q, d - 1) for q in sizes]
        h = (sum(q * q for q in sizes) / m, *[sum(sub[0][i] for sub in subs) for i in range(d - 1)])
        if best is None or (max(h), sum(h)) < (max(best[0]), sum(best[0])):
            best = (h, _chain(0, sizes, [_shift(sub[1]) for sub in subs]))
    return best


def _shift(node: Node | None) -> Node | None:
    return None if node is None else Node(node.dim + 1, node.files, _shift(node.left), _shift(node.right))


def _chain(dim: int, sizes: list[int], subtrees: list) -> Node | None:
    """Slabs along dim of these file counts, each with its subtree, as a balanced tree of cuts."""
    if len(sizes) == 1:
        return subtrees[0]
    h = len(sizes) // 2
    return Node(dim, sum(sizes[:h]), _chain(dim, sizes[:h], subtrees[:h]), _chain(dim, sizes[h:], subtrees[h:]))


@functools.lru_cache(maxsize=256)
def layout(n: int, k: int) -> Node | None:
    """The k-d tree of n files over k columns: the first columns get the most cuts.

    >>> [round(s, 3) for s in shares(layout(8, 2), 2)]  # ideal 8^(-1/2) = 0.354
    [0.344, 0.375]
    >>> [round(s, 3) for s in shares(layout(16, 2), 2)]  # the 4 x 4 grid
    [0.25, 0.25]
    >>> [round(s, 3) for s in shares(layout(12, 3), 3)]  # ideal 12^(-1/3) = 0.437; 2 x 2 x 3 gives 0.5
    [0.444, 0.458, 0.458]
    >>> all(max(shares(layout(n, k), k)) <= 1.2 * n ** (-1 / k) for k in (2, 3) for n in range(4, 33))
    True
    """
    if n <= 1 or k < 1:
        return None
    if n > DP_MAX_FILES or k > DP_MAX_COLUMNS:
        return _slabs(n, k)[1]
    fronts = _fronts(n, k)
    best = int(np.argmin(fronts[n][0][:, 0] + 1e-9 * fronts[n][0].sum(axis=1)))
    return _tree(fronts, n, best, lambda d: k - 1 - d)  # canonical dimension 0 has the fewest cuts: the last column


def shares(tree: Node | None, k: int) -> list[float]:
    """The share of files a uniform point on each dimension meets, for uniform rows (cuts in
    proportion to the files): the mean over files of their relative extent in that dimension."""
    total = [0.0] * k
    n = 0

    def walk(node, m, extents):
        nonlocal n
        if node is None:
            n += 1
            for d in range(k):
                total[d] += extents[d]
            return
        left = tuple(e * node.files / m if d == node.dim else e for d, e in enumerate(extents))
        right = tuple(e * (m - node.files) / m if d == node.dim else e for d, e in enumerate(extents))
        walk(node.left, node.files, left)
        walk(node.right, m - node.files, right)

    walk(tree, count(tree), (1.0,) * k)
    return [t / n for t in total]


def count(node: Node | None) -> int:
    """The files (leaves) of a tree."""
    return 1 if node is None else count(node.left) + count(node.right)


def flatten(tree: Node | None) -> list[int]:
    """The tree as kd_cell reads it: [dim, left, right] a node in preorder, node 0 the root, a
    leaf -(file + 1) with files numbered left to right.

    >>> flatten(Node(0, 1, None, Node(1, 1, None, None)))
    [0, -1, 1, 1, -2, -3]
    """
    out: list[int] = []
    leaves = 0

    def visit(node: Node) -> int:
        nonlocal leaves
        here = len(out) // 3
        out.extend((node.dim, 0, 0))
        for slot, child in ((1, node.left), (2, node.right)):
            if child is None:
                leaves += 1
                out[3 * here + slot] = -leaves
            else:
                out[3 * here + slot] = visit(child)
        return here

    if tree is not None:
        visit(tree)
    return out


def kd_cuts(keys: np.ndarray, tree: Node | None) -> list[int]:
    """One cut a node (preorder, as flatten) from sampled keys (rows x dimensions): each node's
    rows split at the quantile of its files on the left.

    >>> kd_cuts(np.array([[i, 9 - i] for i in range(10)]), Node(0, 1, None, Node(1, 1, None, None)))
    [2, 3]
    """
    cuts: list[int] = []

    def visit(node: Node | None, rows: np.ndarray, m: int):
        if node is None:
            return
        column = np.sort(keys[rows, node.dim])
        at = int(round(len(column) * node.files / m))
        cut = int(column[at - 1]) if at >= 1 else (int(column[0]) - 1 if len(column) else 0)
        cuts.append(cut)
        left = rows[keys[rows, node.dim] <= cut]
        right = rows[keys[rows, node.dim] > cut]
        visit(node.left, left, node.files)
        visit(node.right, right, m - node.files)

    visit(tree, np.arange(len(keys)), count(tree))
    return cuts


def kd_cells(keys: np.ndarray, flat: list[int], cuts: list[int]) -> np.ndarray:
    """As the JVM's kd_cell, for rows of keys: each row's leaf."""
    out = np.zeros(len(keys), dtype=np.int64)
    if not flat:
        return out
    for r, row in enumerate(keys):
        node = 0
        while True:
            dim, left, right = flat[3 * node: 3 * node + 3]
            child = left if row[dim] <= cuts[node] else right
            if child < 0:
                out[r] = -child - 1
                break
            node = child
    return out


def _plan_schema(types) -> StructType:
    return StructType(
        [StructField(_GROUP, IntegerType(), False), StructField(_OFFSET, IntegerType(), False)]
        + [StructField(f"__b{j}", ArrayType(t, False), False) for j, t in enumerate(types)]
        + [StructField(_ZBOUNDS, ArrayType(LongType(), False), False),
           StructField(_TREE, ArrayType(IntegerType(), False), False)]
    )


# ---- the rows, in the JVM ------------------------------------------------------------------------


def _kd_keys(fn: str, values: list[Column], bounds: list[Column], shift: int, seed: int) -> Column:
    """ARRAY<BIGINT> of the values' range ids (NULL: 0), each with the same random byte below it."""
    ids = [F.coalesce(F.call_function(f"{fn}.range_id", v, b), F.lit(0)).cast("bigint") for v, b in zip(values, bounds)]
    if not shift:
        return F.array(*ids)
    noise = F.floor(F.rand(seed) * (1 << shift)).cast("bigint")
    return F.transform(F.array(*ids), lambda i: F.shiftleft(i, shift) + noise)


def _zkey(fn: str, values: list[Column], bounds: list[Column], bits: int, ranges: int, add_noise: bool,
          seed: int, curve: str = "zorder") -> Column:
    """interleave_bits of the values' range ids (NULL: 0), with a random byte below it. The ids
    0 .. ranges are spread evenly over the 2^bits codes first, so that each bit halves a column's
    rows: with 1000 ranges in 10 bits the top bit would otherwise split them at 512 of 1001."""
    ids = [F.coalesce(F.call_function(f"{fn}.range_id", v, b), F.lit(0)) for v, b in zip(values, bounds)]
    # exact in doubles: ranges <= MAX_RANGES, so id * 2^bits < 2^42
    ids = [F.floor(i.cast("double") * (1 << bits) / (ranges + 1)).cast("int") for i in ids]
    z = F.call_function(f"{fn}.{'interleave_bits' if curve == 'zorder' else 'hilbert_index'}", F.lit(bits), F.array(*ids))
    if add_noise:
        z = F.shiftleft(z, NOISE_BITS) + F.floor(F.rand(seed) * (1 << NOISE_BITS)).cast("bigint")
    return z


def _orderable(path: tuple[str, ...], t: it.IcebergType) -> tuple[Column, object]:
    """A column (by its path of names) as a value range_id compares, and its Spark type; the
    order is the column's own (decimals become doubles: nearby values may share a range)."""
    col = J.column(*path)
    match t:
        case it.BooleanType() | it.IntegerType() | it.LongType():
            return col.cast("bigint"), LongType()
        case it.DateType():
            return F.unix_date(col).cast("bigint"), LongType()
        case it.TimestamptzType():
            return F.unix_micros(col), LongType()
        case it.TimestampType():
            epoch = F.lit("1970-01-01 00:00:00").cast("timestamp_ntz")
            return F.timestamp_diff("MICROSECOND", epoch, col), LongType()
        case it.FloatType() | it.DoubleType() | it.DecimalType():
            return col.cast("double") + F.lit(0.0), DoubleType()  # + 0.0 turns -0.0 into 0.0
        case it.StringType():
            return col, StringType()
        case it.BinaryType() | it.FixedType() | it.UUIDType():
            return col.cast("binary"), BinaryType()
    raise NotSupported(f"lakerules: cannot z-order by column {'.'.join(path)} of type {t}")

