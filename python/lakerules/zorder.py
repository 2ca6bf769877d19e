"""Z-order clustering: rows range-repartitioned by their z-value into files (seed 001).

As Delta's ``MultiDimClustering`` (ZOrderClustering), with the sampling that Delta's
``range_partition_id`` leaves to Spark's RangePartitioner done here, once, for all columns:

1. Each z-order column becomes an orderable value: BIGINT (integers, booleans, dates as days,
   timestamps as microseconds), DOUBLE (floating point, decimals), STRING or BINARY.
2. A sample of each group's rows (about 100 rows a range, as Spark's RangePartitioner samples:
   read once, neither sorted nor shuffled) comes to the driver through Arrow, which sorts it
   and picks each column's N - 1 range boundaries evenly. On the rows, ``range_id(value, boundaries)`` maps a
   value to 1 .. N and NULL to 0: Delta's ``range_partition_id(col, N)``.
3. ``interleave_bits(bits, array(range ids))`` is the z-value; the ids are first spread evenly
   over their 2^bits codes, so that each bit halves a column's rows. With noise, a random byte
   goes below the z-value (the z-key), so that many rows with one z-value (skew) can spread over
   several files.
4. The sample's own z-keys (computed on the driver exactly as the JVM computes the rows') give
   each group k - 1 boundaries for its k files, each moved, by at most ALIGN_WINDOW of a file's
   rows, to the edge of a z-curve cell: a file that ends inside a cell holds a corner of it, and
   its min/max box reaches over both cells for a few rows. Every row goes to its file with
   ``repartitionById``; the writer sorts each file by z-key.

Every per-row step on the table's rows is a Spark SQL expression or one of the shim's functions
(``range_id``, ``interleave_bits``), run in the JVM on executors; the boundaries reach the rows
through a broadcast join on the group.
"""

from __future__ import annotations

import bisect
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

from lakerules import jvm as J
from lakerules.errors import NotSupported

ZKEY = "__lakerules_zkey"
_GROUP, _FILE, _OFFSET, _ZBOUNDS = "__lakerules_group", "__lakerules_file", "__lakerules_offset", "__lakerules_zbounds"
SAMPLE_ROWS_PER_RANGE = 100  # Spark's spark.sql.execution.rangeExchange.sampleSizePerPartition
MAX_SAMPLE_ROWS = 1_000_000  # per group, as Spark's RangePartitioner caps its sample
MAX_TOTAL_SAMPLE_ROWS = 2_000_000  # all groups together: what the driver takes
NOISE_BITS = 8
BOUND_PREFIX = 64  # string and binary boundaries keep this many characters / bytes
SEED = 20240501  # fixed: the same data clusters the same way every time
MAX_RANGES = 1 << 20
ALIGN_WINDOW = 0.15  # a file boundary may move this share of a file's rows to meet a cell edge


@dataclass(frozen=True)
class Group:
    """Rows clustered together into ``num_files`` files (one partition's files to rewrite)."""

    rows: DataFrame  # the table's columns
    num_rows: int  # an estimate, for the sample's size
    num_files: int


def cluster(spark, catalog: str, groups: list[Group], columns: list[tuple[tuple[str, ...], it.IcebergType]],
            num_ranges: int, add_noise: bool) -> DataFrame:
    """The rows of all groups, each group range-repartitioned by z-value into its files (one
    Spark partition each), with the z-key as a last column ``ZKEY`` to sort each file by."""
    fn = f"{J.quote(catalog)}.system"
    bits, ranges = ranges_and_bits(num_ranges, len(columns), add_noise)
    keys = [_orderable(path, t) for path, t in columns]
    names = groups[0].rows.columns

    # 1. and 2. the sample, to the driver; each group's column boundaries, then file boundaries
    sample = _sample(groups, keys, ranges)
    gids = sample.column(0).to_numpy()
    plan_rows, offset = [], 0
    for gid, g in enumerate(groups):
        rows = sample.filter(gids == gid)
        columns = [(rows.column(j + 1), t) for j, (_, t) in enumerate(keys)]
        bounds = [boundaries(column, ranges, t) for column, t in columns]
        zkeys = sample_zkeys(columns, bounds, bits, ranges, add_noise, SEED + gid)
        plan_rows.append((gid, offset, *bounds, aligned_bounds(np.sort(zkeys).tolist(), g.num_files)))
        offset += g.num_files
    plan = J.local_frame(spark, plan_rows, _plan_schema([t for _, t in keys]))

    # 3. and 4. the rows: z-key, then file, then the shuffle that gives each file its own task
    data = reduce(DataFrame.unionByName,
                  [g.rows.select("*", F.lit(gid).alias(_GROUP)) for gid, g in enumerate(groups)])
    data = data.join(F.broadcast(plan), _GROUP)
    bounds = [F.col(f"__b{j}") for j in range(len(keys))]
    zkey = _zkey(fn, [k for k, _ in keys], bounds, bits, ranges, add_noise, SEED + len(groups))
    data = data.select(*[J.column(n) for n in names], zkey.alias(ZKEY), _OFFSET, _ZBOUNDS)
    file = F.col(_OFFSET) + F.coalesce(F.call_function(f"{fn}.range_id", F.col(ZKEY), F.col(_ZBOUNDS)), F.lit(1)) - 1
    data = data.select(*[J.column(n) for n in names], ZKEY, file.alias(_FILE))
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
        picked = [v[:BOUND_PREFIX] for v in (sorted(present.to_pylist())[i] for i in positions)]
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


def sample_zkeys(columns, bounds: list[list], bits: int, ranges: int, add_noise: bool, seed: int) -> np.ndarray:
    """The z-keys of sampled rows, computed as _zkey computes them on the table's rows."""
    ids = [range_ids(column, b, t) * (1 << bits) // (ranges + 1) for (column, t), b in zip(columns, bounds)]
    z = interleave_bits(bits, ids)
    if add_noise:
        z = (z << NOISE_BITS) | np.random.default_rng(seed).integers(0, 1 << NOISE_BITS, len(z), dtype=np.int64)
    return z


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


def aligned_bounds(zkeys: list[int], count: int) -> list[int]:
    """count - 1 file boundaries over sorted z-keys, each snapped to the edge of the largest
    z-curve cell within ALIGN_WINDOW of a file's rows around its even place: among the window's
    keys lo .. hi, the one with most zero low bits is hi with the bits below the highest bit
    where lo and hi differ cleared; the boundary is the key just below it.

    >>> aligned_bounds(list(range(64)), 4)  # the quarters of a 6-bit z-space start at 16, 32, 48
    [15, 31, 47]
    >>> aligned_bounds(list(range(60)), 4)  # even places 15, 30, 45: the half's edge is near 30
    [15, 31, 43]
    """
    n = len(zkeys)
    m = min(count, n)
    out = []
    for i in range(1, m):
        lo = zkeys[min(max(int((i - ALIGN_WINDOW) * n / m), 0), n - 1)]
        hi = zkeys[min(max(int((i + ALIGN_WINDOW) * n / m), 0), n - 1)]
        if lo == hi:
            bound = hi
        else:
            high = (lo ^ hi).bit_length() - 1
            bound = ((hi >> high) << high) - 1
        if not out or bound > out[-1]:
            out.append(bound)
    return out


def _plan_schema(types) -> StructType:
    return StructType(
        [StructField(_GROUP, IntegerType(), False), StructField(_OFFSET, IntegerType(), False)]
        + [StructField(f"__b{j}", ArrayType(t, False), False) for j, t in enumerate(types)]
        + [StructField(_ZBOUNDS, ArrayType(LongType(), False), False)]
    )


# ---- the rows, in the JVM ------------------------------------------------------------------------


def _zkey(fn: str, values: list[Column], bounds: list[Column], bits: int, ranges: int, add_noise: bool,
          seed: int) -> Column:
    """interleave_bits of the values' range ids (NULL: 0), with a random byte below it. The ids
    0 .. ranges are spread evenly over the 2^bits codes first, so that each bit halves a column's
    rows: with 1000 ranges in 10 bits the top bit would otherwise split them at 512 of 1001."""
    ids = [F.coalesce(F.call_function(f"{fn}.range_id", v, b), F.lit(0)) for v, b in zip(values, bounds)]
    # exact in doubles: ranges <= MAX_RANGES, so id * 2^bits < 2^42
    ids = [F.floor(i.cast("double") * (1 << bits) / (ranges + 1)).cast("int") for i in ids]
    z = F.call_function(f"{fn}.interleave_bits", F.lit(bits), F.array(*ids))
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

