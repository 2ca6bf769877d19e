"""Partition transforms: the values lakerules computes in the JVM are bit-exact with the Iceberg spec.

The oracle is pyiceberg's transforms (``transform.transform(source_type)(value)``) applied to
each value in Iceberg's internal representation (days for dates, microseconds for timestamps,
Decimal with the column's scale, str, bytes). Checked three ways:

1. the shim's SQL functions ``lake.system.bucket`` / ``lake.system.truncate`` over a few hundred
   edge and seeded random values of each type (all in one Spark query), plus the spec's published
   hash vectors;
2. the exact expressions the writer uses (``partitioning.partition_columns``) and the decoding of
   their directory text (``partitioning.decode_path``), for every transform and source type;
3. end to end: tables partitioned by each transform, written with lakerules SQL, every data
   file's ``partition`` (as pyiceberg reads it from the manifests) compared with the transform
   of every row in that file, and the rows read back the same by lakerules, pyiceberg, DuckDB.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg import types as it
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.utils.decimal import decimal_to_unscaled, unscaled_to_decimal

from lakerules.iceberg import partitioning

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
# Spark's (and Iceberg's usual) range of dates and timestamps: 0001-01-01 .. 9999-12-31.
DAY_MIN, DAY_MAX = -719162, 2932896
MICROS_MIN, MICROS_MAX = DAY_MIN * 86_400_000_000, (DAY_MAX + 1) * 86_400_000_000 - 1
EPOCH = dt.datetime(1970, 1, 1)

BUCKETS = [1, 2, 3, 7, 16, 100, 1024, 65_537, INT_MAX]  # INT_MAX: the hash's low 31 bits
WIDTHS = [1, 2, 3, 4, 10, 100, 1000, 65_536, 2**30 + 1, INT_MAX]
STRING_WIDTHS = [1, 2, 3, 5, 16]

N = 200  # random values per type
rnd = random.Random(20240601)


# ---- value generators (Iceberg's internal representation) -------------------------------


def micros(text: str) -> int:
    """Microseconds since the epoch of a naive ISO timestamp (read as UTC)."""
    return (dt.datetime.fromisoformat(text) - EPOCH) // dt.timedelta(microseconds=1)


def days(text: str) -> int:
    return (dt.date.fromisoformat(text) - EPOCH.date()).days


def ints(lo: int, hi: int, edges: list[int]) -> list[int]:
    near = [v for e in (0, lo, hi) for v in range(e - 3, e + 4) if lo <= v <= hi]
    return edges + near + [rnd.randint(lo, hi) for _ in range(N)] + [rnd.randint(-1000, 1000) for _ in range(N // 4)]


def strings() -> list[str]:
    pools = [(0x20, 0x7E), (0xA0, 0x17F), (0x370, 0x3FF), (0x3040, 0x30FF), (0x4E00, 0x9FFF),
             (0xAC00, 0xD7A3), (0x1F300, 0x1FAFF), (0x10000, 0x1034F), (0xE000, 0xF8FF), (0x0, 0x1F)]
    fixed = ["", "a", "ab", "abc", "abcd", "abcde", "iceberg", "ü", "über", "日本", "日本語テキスト", "😀",
             "😀😃😄", "a😀b", "é́", "\x00", "\x00\x00", "Ω≈ç√∫", "\U0010FFFF", "ß" * 17, "x" * 100]
    out = list(fixed)
    for _ in range(N):
        n = rnd.choice([0, 1, 2, 3, 4, 5, 6, 8, 15, 16, 17, 40])
        out.append("".join(chr(rnd.randint(*rnd.choice(pools))) for _ in range(n)))
    return out


def binaries() -> list[bytes]:
    fixed = [b"", b"\x00", b"\x00\x01\x02\x03", b"\xff", b"\xff" * 4, b"\x80\x00\x00\x00\x01", bytes(range(256))]
    return fixed + [bytes(rnd.getrandbits(8) for _ in range(rnd.choice([0, 1, 2, 3, 4, 5, 7, 8, 9, 33]))) for _ in range(N)]


def decimals(precision: int, scale: int) -> list[Decimal]:
    top = 10**precision - 1
    unscaled = [0, 1, -1, 1420, -1420, 9, -9, 10, -10, 11, -11, 127, 128, -128, -129, 255, 256, 32767, 32768,
                -32768, -32769, 2**31, -(2**31) - 1, top, -top, top - 5, -top + 5]
    unscaled += [rnd.randint(-top, top) for _ in range(N)]
    unscaled += [rnd.randint(-(10 ** rnd.randint(1, precision)), 10 ** rnd.randint(1, precision)) for _ in range(N)]
    unscaled = [u for u in unscaled if -top <= u <= top]
    return [unscaled_to_decimal(u, scale) for u in unscaled]


TS_EDGES = [
    "1970-01-01 00:00:00", "1969-12-31 23:59:59.999999", "1970-01-01 00:00:00.000001",
    "1969-12-31 23:00:00", "1969-12-31 22:59:59.999999", "1969-12-31 00:00:00", "1969-12-30 23:59:59.999999",
    "1969-12-01 00:00:00", "1969-11-30 23:59:59.999999", "1969-01-01 00:00:00", "1968-12-31 23:59:59.999999",
    "1968-02-29 23:59:59.999999", "1900-01-01 00:00:00", "1899-12-31 23:59:59.999999", "1582-10-04 12:00:00",
    "1582-10-15 00:00:00", "1000-06-15 01:02:03.000004", "0001-01-01 00:00:00", "2000-02-29 12:00:00",
    "2017-11-16 22:31:08", "2017-11-16 22:31:08.000001", "2024-03-10 02:30:00", "2038-01-19 03:14:08",
    "9999-12-31 23:59:59.999999",
]


def timestamps() -> list[int]:
    out = [micros(t) for t in TS_EDGES]
    out += [rnd.randint(MICROS_MIN, MICROS_MAX) for _ in range(N)]
    out += [rnd.randint(-3 * 86_400_000_000, 3 * 86_400_000_000) for _ in range(N // 2)]  # around the epoch
    out += [rnd.randint(-2000, 2000) * 3_600_000_000 + rnd.choice([0, -1, 1]) for _ in range(N // 2)]  # hour edges
    return [v for v in out if MICROS_MIN <= v <= MICROS_MAX]


def dates() -> list[int]:
    edges = [days(d) for d in ("1970-01-01", "1969-12-31", "1969-12-01", "1969-11-30", "1969-01-01", "1968-12-31",
                               "1968-02-29", "1900-03-01", "1582-10-15", "1582-10-04", "0001-01-01", "2017-11-16",
                               "2000-02-29", "9999-12-31")]
    return [v for v in ints(DAY_MIN, DAY_MAX, edges) if DAY_MIN <= v <= DAY_MAX]


# How each type's values travel into Spark exactly: an Arrow column of a raw type, and the SQL
# making the typed value from it ({r}), so that no value passes through Python's conversions.
RAW = {
    "int": (pa.int32(), "{r}", lambda v: v),
    "bigint": (pa.int64(), "{r}", lambda v: v),
    "string": (pa.string(), "CAST(unhex({r}) AS STRING)", lambda v: v.encode("utf-8").hex()),
    "binary": (pa.string(), "unhex({r})", lambda v: v.hex()),
    "date": (pa.int32(), "date_from_unix_date({r})", lambda v: v),
    "timestamp": (pa.int64(), "timestamp_micros({r})", lambda v: v),
    "timestamp_ntz": (pa.int64(), "timestampadd(MICROSECOND, {r}, TIMESTAMP_NTZ'1970-01-01 00:00:00')", lambda v: v),
}
ICEBERG = {
    "int": it.IntegerType(), "bigint": it.LongType(), "string": it.StringType(), "binary": it.BinaryType(),
    "date": it.DateType(), "timestamp": it.TimestamptzType(), "timestamp_ntz": it.TimestampType(),
}


def raw_of(spark_type: str):
    if spark_type.startswith("decimal"):
        return pa.string(), f"CAST({{r}} AS {spark_type})", lambda v: format(v, "f")
    return RAW[spark_type]


def iceberg_type(spark_type: str):
    if spark_type.startswith("decimal"):
        p, s = spark_type[len("decimal("):-1].split(",")
        return it.DecimalType(int(p), int(s))
    return ICEBERG[spark_type]


def typed_frame(spark, columns: dict[str, tuple[str, list]]):
    """A DataFrame of a row number i and, for each name: (spark type, values), a column of that
    type holding the values from row 0 on (NULL after its last). Built from Arrow, in the JVM."""
    n = max(len(values) for _, values in columns.values())
    arrays, exprs = [pa.array(range(n), pa.int32())], ["i"]
    for k, (name, (spark_type, values)) in enumerate(columns.items()):
        arrow_type, to_typed, encode = raw_of(spark_type)
        raws = [None if v is None else encode(v) for v in values] + [None] * (n - len(values))
        arrays.append(pa.array(raws, arrow_type))
        exprs.append(f"{to_typed.format(r=f'r{k}')} AS `{name}`")
    table = pa.Table.from_arrays(arrays, names=["i"] + [f"r{k}" for k in range(len(columns))])
    return spark.createDataFrame(table).selectExpr(*exprs)


def collect_by_row(df, n: int) -> list:
    rows = sorted(df.collect(), key=lambda r: r[0])
    assert [r[0] for r in rows] == list(range(len(rows)))
    return [tuple(r[1:]) for r in rows[:n]]


def decimal_text(expr: str) -> str:
    """A decimal from collect() need not keep its scale (1E-10 may come back as 1.00E-10): read
    decimals as Spark's exact text instead."""
    return f"CAST({expr} AS STRING)"


def exact(v):
    """A value in a form where equal means bit-exact (a Decimal keeps its scale; bytearray is bytes)."""
    if isinstance(v, Decimal):
        return ("decimal", decimal_to_unscaled(v), v.as_tuple().exponent)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return (v - EPOCH) // dt.timedelta(microseconds=1)
    if isinstance(v, dt.date):
        return (v - EPOCH.date()).days
    return v


def assert_all_equal(label: str, values: list, got: list, want: list) -> None:
    bad = [(v, g, w) for v, g, w in zip(values, got, want) if exact(g) != exact(w)]
    assert not bad, f"{label}: {len(bad)} of {len(values)} differ, e.g. (value, lakerules, pyiceberg): {bad[:5]}"


VALUES = {
    "int": lambda: ints(INT_MIN, INT_MAX, [34, 1, -1, INT_MIN, INT_MAX]),
    "bigint": lambda: ints(LONG_MIN, LONG_MAX, [34, 1, -1, 2**31, -(2**31) - 1, 2**32, LONG_MIN, LONG_MAX]),
    "string": strings,
    "binary": binaries,
    "decimal(9,2)": lambda: decimals(9, 2),
    "decimal(38,10)": lambda: decimals(38, 10),
    "decimal(18,0)": lambda: decimals(18, 0),
    "decimal(4,4)": lambda: decimals(4, 4),
    "date": dates,
    "timestamp": timestamps,
    "timestamp_ntz": timestamps,
}
TRUNCATABLE = ["int", "bigint", "string", "binary", "decimal(9,2)", "decimal(38,10)", "decimal(18,0)", "decimal(4,4)"]


@pytest.fixture(scope="module")
def samples() -> dict[str, list]:
    """The values of each type (edges and seeded random values), the same whichever tests run."""
    rnd.seed(20240601)
    return {t: make() for t, make in VALUES.items()}


def representable(source, v) -> bool:
    """Whether a truncation result fits the source type, which Iceberg's truncate keeps. It does
    not for values within a width of the type's minimum: ints and longs below the minimum
    (lakerules, like Iceberg's Java library, wraps them around in two's complement), decimals
    with more digits than the precision (no Iceberg writer can store those: the write fails)."""
    if v is None:
        return True
    if isinstance(source, it.IntegerType):
        return INT_MIN <= v <= INT_MAX
    if isinstance(source, it.LongType):
        return LONG_MIN <= v <= LONG_MAX
    if isinstance(source, it.DecimalType):
        return len(v.as_tuple().digits) <= source.precision
    return True


def truncatable(spark_type: str, values: list, transforms) -> list:
    """The values whose truncations (by each transform) the type holds."""
    source = iceberg_type(spark_type)
    return [v for v in values if all(representable(source, tr.transform(source)(v)) for tr in transforms)]


def widths_of(spark_type: str) -> list[int]:
    if spark_type in ("string", "binary"):
        return STRING_WIDTHS
    if spark_type.startswith("decimal"):  # wider than the type: every negative value overflows
        return [w for w in WIDTHS if w < 10 ** iceberg_type(spark_type).precision]
    return WIDTHS


@pytest.fixture(scope="module")
def function_results(spark, samples):
    """One Spark query: lake.system.bucket(N, x) for every N and type, lake.system.truncate(W, x)
    for every W and truncatable type, and each value read back. Returns, per (kind, type, N or W),
    (values, results)."""
    columns, exprs, keys = {}, [], []
    for k, (t, values) in enumerate(samples.items()):
        decimal = t.startswith("decimal")
        columns[f"b{k}"] = (t, values)
        sanity = f"CAST(b{k} AS STRING)" if decimal or t.startswith("timestamp") else f"b{k}"
        exprs.append(sanity)
        keys.append(("value", t, None, values))
        for n in BUCKETS:
            exprs.append(f"lake.system.bucket({n}, b{k})")
            keys.append(("bucket", t, n, values))
        if t in TRUNCATABLE:
            kept = truncatable(t, values, [TruncateTransform(w) for w in widths_of(t)])
            columns[f"t{k}"] = (t, kept)
            for w in widths_of(t):
                e = f"lake.system.truncate({w}, t{k})"
                exprs.append(decimal_text(e) if decimal else e)
                keys.append(("truncate", t, w, kept))
    rows = collect_by_row(typed_frame(spark, columns).selectExpr("i", *exprs), max(len(v) for v in samples.values()))
    out = {}
    for j, (kind, t, param, values) in enumerate(keys):
        got = [r[j] for r in rows[: len(values)]]
        if kind == "value" and t.startswith("timestamp"):
            got = [micros(g) for g in got]  # pyspark cannot collect 0001-01-01 as a datetime: text
        elif t.startswith("decimal") and kind != "bucket":
            got = [None if g is None else Decimal(g) for g in got]
        out[(kind, t, param)] = (values, got)
    return out


# ---- 1. bucket ------------------------------------------------------------------------------

SPEC_VECTORS = [  # The Iceberg spec, Appendix B: 32-bit hash requirements.
    (it.IntegerType(), 34, "int", "34", 2017239379),
    (it.LongType(), 34, "bigint", "34L", 2017239379),
    (it.DecimalType(9, 2), Decimal("14.20"), "decimal(9,2)", "CAST(14.20 AS DECIMAL(9,2))", -500754589),
    (it.DateType(), days("2017-11-16"), "date", "DATE'2017-11-16'", -653330422),
    (it.TimestampType(), micros("2017-11-16 22:31:08"), "timestamp_ntz", "TIMESTAMP_NTZ'2017-11-16 22:31:08'", -2047944441),
    (it.TimestamptzType(), micros("2017-11-16 22:31:08"), "timestamp", "TIMESTAMP'2017-11-16 14:31:08-08:00'", -2047944441),
    (it.TimestampType(), micros("2017-11-16 22:31:08.000001"), "timestamp_ntz", "TIMESTAMP_NTZ'2017-11-16 22:31:08.000001'", -1207196810),
    (it.StringType(), "iceberg", "string", "'iceberg'", 1210000089),
    (it.BinaryType(), b"\x00\x01\x02\x03", "binary", "X'00010203'", -188683207),
    (it.FixedType(4), b"\x00\x01\x02\x03", "binary", "X'00010203'", -188683207),
]


@pytest.mark.parametrize("source, value, _t, _sql, expected", SPEC_VECTORS, ids=[str(v[0]) for v in SPEC_VECTORS])
def test_spec_hash_vectors_in_pyiceberg(source, value, _t, _sql, expected):
    """The oracle itself reproduces the spec's hashes."""
    assert BucketTransform(16).transform(source, bucket=False)(value) == expected
    assert BucketTransform(16).transform(source)(value) == (expected & INT_MAX) % 16


def test_spec_hash_vectors_in_lakerules(spark):
    """The spec's values, as SQL literals of each type, bucketed by the shim: N = 2^31-1 shows the
    low 31 bits of the hash, and the bucket for small N matches the spec's formula. Also: bucket[16]
    of 34 is 3 for int and long alike; TINYINT / SMALLINT bucket as the int they widen to; NULL
    buckets to NULL for every type."""
    exprs = [f"lake.system.bucket({n}, {sql})" for _, _, _, sql, _ in SPEC_VECTORS for n in (INT_MAX, 16, 7)]
    want = [((h & INT_MAX) % n) for *_, h in SPEC_VECTORS for n in (INT_MAX, 16, 7)]
    exprs += ["lake.system.bucket(16, 34)", "lake.system.bucket(16, 34L)"]
    want += [3, 3]
    b = BucketTransform(1000).transform(it.IntegerType())(-7)
    exprs += [f"lake.system.bucket(1000, CAST(-7 AS {t}))" for t in ("TINYINT", "SMALLINT", "INT")]
    want += [b, b, b]
    nulls = ["INT", "BIGINT", "STRING", "BINARY", "DECIMAL(9,2)", "DECIMAL(38,10)", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ"]
    exprs += [f"lake.system.bucket(16, CAST(NULL AS {t}))" for t in nulls]
    want += [None] * len(nulls)
    assert list(spark.sql("SELECT " + ", ".join(exprs)).collect()[0]) == want


@pytest.mark.parametrize("spark_type", list(VALUES))
def test_bucket_matches_pyiceberg(function_results, spark_type):
    values, seen = function_results[("value", spark_type, None)]
    assert_all_equal(f"{spark_type} values", values, seen, values)  # they reached Spark unchanged
    source = iceberg_type(spark_type)
    for n in BUCKETS:
        values, got = function_results[("bucket", spark_type, n)]
        want = [BucketTransform(n).transform(source)(v) for v in values]
        assert_all_equal(f"bucket[{n}]({spark_type})", values, got, want)


# ---- 2. truncate ----------------------------------------------------------------------------


@pytest.mark.parametrize("spark_type", TRUNCATABLE)
def test_truncate_matches_pyiceberg(function_results, samples, spark_type):
    source = iceberg_type(spark_type)
    for w in widths_of(spark_type):
        values, got = function_results[("truncate", spark_type, w)]
        assert len(values) > len(samples[spark_type]) * 3 // 4
        want = [TruncateTransform(w).transform(source)(v) for v in values]
        assert_all_equal(f"truncate[{w}]({spark_type})", values, got, want)


def test_truncate_examples_from_the_spec(spark):
    row = spark.sql("""SELECT lake.system.truncate(10, 1), lake.system.truncate(10, -1), lake.system.truncate(10, 1L),
                              lake.system.truncate(10, -1L), lake.system.truncate(50, CAST(10.65 AS DECIMAL(9,2))),
                              lake.system.truncate(3, 'iceberg'), lake.system.truncate(2, '日本語'),
                              lake.system.truncate(1, '😀x'), lake.system.truncate(3, X'0001020304'),
                              lake.system.truncate(10, CAST(-0.05 AS DECIMAL(9,2))), lake.system.truncate(3, ''),
                              lake.system.truncate(2147483647, 34), lake.system.truncate(1073741825, 1073741826),
                              lake.system.truncate(3, CAST(NULL AS STRING)), lake.system.truncate(3, CAST(NULL AS BINARY)),
                              lake.system.truncate(3, CAST(NULL AS DECIMAL(9,2))), lake.system.truncate(3, CAST(NULL AS INT))
                       """).collect()[0]
    assert tuple(row) == (0, -10, 0, -10, Decimal("10.50"), "ice", "日本", "😀", bytearray(b"\x00\x01\x02"),
                          Decimal("-0.10"), "", 0, 1073741825, None, None, None, None)


# ---- 2b. the writer's partition expressions, for every transform -----------------------------

TIME_TYPES = ["timestamp", "timestamp_ntz", "date"]
EXPR_CASES = (
    [("identity", IdentityTransform(), t) for t in
     ["int", "bigint", "string", "binary", "decimal(9,2)", "decimal(38,10)", "decimal(4,4)", "date", "timestamp", "timestamp_ntz"]]
    + [(f"bucket[{n}]", BucketTransform(n), t) for n in (16, INT_MAX) for t in
       ["int", "bigint", "string", "binary", "decimal(9,2)", "decimal(38,10)", "date", "timestamp", "timestamp_ntz"]]
    + [(f"truncate[{w}]", TruncateTransform(w), t) for w, t in
       [(10, "int"), (7, "bigint"), (3, "string"), (2, "binary"), (100, "decimal(9,2)"), (3, "decimal(38,10)"),
        (1000, "decimal(4,4)"), (2**30 + 1, "int"), (INT_MAX, "bigint")]]
    + [(name, cls(), t) for name, cls in [("year", YearTransform), ("month", MonthTransform), ("day", DayTransform)]
       for t in TIME_TYPES]
    + [("hour", HourTransform(), t) for t in ["timestamp", "timestamp_ntz"]]
)


def test_partition_expressions_and_directory_decoding(spark, samples):
    """One query evaluates every transform's writer expression (what partitioning.partition_columns
    gives lakerules.write.files) over every source type; each text, decoded as that module decodes a written
    file's directory, must equal pyiceberg's transform of the value."""
    types = sorted({t for *_, t in EXPR_CASES})
    columns, fields, cases = {}, [], []
    for k, t in enumerate(types):
        mine = [(name, tr) for name, tr, tt in EXPR_CASES if tt == t]
        values = truncatable(t, samples[t], [tr for _, tr in mine if isinstance(tr, TruncateTransform)]) + [None]
        assert len(values) > N
        columns[f"x{k}"] = (t, values)
        fields.append(it.NestedField(k + 1, f"x{k}", iceberg_type(t), required=False))
        cases += [(name, tr, t, k + 1, values) for name, tr in mine]
    schema = Schema(*fields)
    spec = PartitionSpec(*[PartitionField(source_id=sid, field_id=1000 + j, transform=tr, name=f"p{j}")
                           for j, (_, tr, _, sid, _) in enumerate(cases)])
    cols = partitioning.partition_columns(spec, schema, "lake", {"i", *columns})
    rows = collect_by_row(typed_frame(spark, columns).select("i", *[c.expr for c in cols]),
                          max(len(v) for _, v in columns.values()))
    for j, ((name, transform, t, sid, values), col) in enumerate(zip(cases, cols)):
        # Spark writes a NULL or empty partition value as the Hive default partition.
        texts = [partitioning.HIVE_NULL if r[j] is None or r[j] == "" else str(r[j]) for r in rows[: len(values)]]
        others = [f"{c.dir_name}={partitioning.HIVE_NULL}" for c in cols]
        got = [partitioning.decode_path(cols, "/".join(others[:j] + [f"{col.dir_name}={txt}"] + others[j + 1:]))[j]
               for txt in texts]
        want = [transform.transform(iceberg_type(t))(v) for v in values]
        assert_all_equal(f"{name}({t}) writer expression", values, got, want)


def test_time_transforms_do_not_depend_on_the_session_time_zone(spark, samples):
    """Iceberg's time transforms of timestamptz are in UTC, whatever the session's zone."""
    values = samples["timestamp"]
    cases = [("year", YearTransform()), ("month", MonthTransform()), ("day", DayTransform()), ("hour", HourTransform())]
    source = it.TimestamptzType()
    fields = [PartitionField(source_id=1, field_id=1000 + k, transform=tr, name=f"p{k}") for k, (_, tr) in enumerate(cases)]
    cols = partitioning.partition_columns(PartitionSpec(*fields), Schema(it.NestedField(1, "x", source)), "lake", {"x"})
    previous = spark.conf.get("spark.sql.session.timeZone")
    try:
        for zone in ("America/Los_Angeles", "Asia/Kolkata", "Pacific/Kiritimati"):
            spark.conf.set("spark.sql.session.timeZone", zone)
            rows = collect_by_row(typed_frame(spark, {"x": ("timestamp", values)}).select("i", *[c.expr for c in cols]), len(values))
            for k, ((name, tr), col) in enumerate(zip(cases, cols)):
                got = [col.decode(r[k]) for r in rows]
                assert_all_equal(f"{name}(timestamptz) in {zone}", values, got, [tr.transform(source)(v) for v in values])
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


# ---- 3. end to end: written files' partitions ------------------------------------------------


def to_internal(column: pa.ChunkedArray) -> list:
    """A Parquet column's values in Iceberg's internal representation."""
    t = column.type
    if pa.types.is_date32(t):
        return column.cast(pa.int32()).to_pylist()
    if pa.types.is_timestamp(t):
        assert t.unit == "us", t
        return column.cast(pa.int64()).to_pylist()
    return [bytes(v) if isinstance(v, (bytes, bytearray)) else v for v in column.to_pylist()]


def assert_file_partitions(catalog, table: str) -> dict:
    """Every data file's partition tuple equals each transform of each of its rows' source values.
    Returns {partition tuple (exact form): row count}."""
    t = catalog.load_table(table.split(".", 1)[1])
    schema, spec = t.schema(), t.spec()
    assert spec.fields, "the table is not partitioned"
    seen: dict = {}
    total = 0
    for task in t.scan().plan_files():
        f = task.file
        assert f.spec_id == spec.spec_id
        with t.io.new_input(f.file_path).open() as stream:
            data = pq.read_table(stream)
        assert data.num_rows == f.record_count
        total += data.num_rows
        partition = tuple(exact(f.partition[k]) for k in range(len(spec.fields)))
        for k, pf in enumerate(spec.fields):
            source = schema.find_field(pf.source_id)
            values = to_internal(data.column(source.name))
            transformed = {exact(pf.transform.transform(source.field_type)(v)) for v in values}
            assert transformed == {partition[k]}, (
                f"{table}: file {f.file_path} has partition {pf.name}={f.partition[k]!r} but its rows' "
                f"{pf.transform}({source.name}) are {sorted(transformed, key=repr)}"
            )
        seen[partition] = seen.get(partition, 0) + data.num_rows
    assert total == t.scan().to_arrow().num_rows
    return seen


def write_and_check(spark, iceberg_catalog, engines, table: str, ddl: str, rows_sql: str, n_rows: int,
                    min_partitions: int) -> dict:
    spark.sql(f"CREATE TABLE {table} {ddl}")
    spark.sql(f"INSERT INTO {table} VALUES {rows_sql}")
    partitions = assert_file_partitions(iceberg_catalog, table)
    assert sum(partitions.values()) == n_rows
    assert len(partitions) >= min_partitions
    assert len(engines.assert_same(table)) == n_rows
    return partitions


def test_identity_partitions_end_to_end(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.ident"
    rows = [
        ("'a'", 1, 10, "DATE'2024-01-01'", "true", "1.50", "TIMESTAMP'2026-05-06 07:08:09.123456'",
         "TIMESTAMP_NTZ'2026-05-06 07:08:09.123456'", "X'2F3D25'", "CAST(1E-7 AS DECIMAL(38,10))"),
        ("''", 0, 0, "DATE'1970-01-01'", "false", "0.00", "TIMESTAMP'1970-01-01 00:00:00'",
         "TIMESTAMP_NTZ'1970-01-01 00:00:00'", "X''", "CAST(0 AS DECIMAL(38,10))"),
        ("NULL",) * 10,
        ("'ü'", -1, -10000000000, "DATE'1969-12-31'", "true", "-1.50", "TIMESTAMP'1969-12-31 23:59:59.999999'",
         "TIMESTAMP_NTZ'1969-12-31 23:59:59.999999'", "X'00'", "CAST(-0.0000000001 AS DECIMAL(38,10))"),
        ("'日本'", INT_MIN, LONG_MIN, "DATE'0001-01-01'", "false", "-9999999.99", "TIMESTAMP'0001-01-02 00:00:00'",
         "TIMESTAMP_NTZ'0001-01-01 00:00:00'", "X'FF00'", "CAST('-1234567890123456789012345678.0123456789' AS DECIMAL(38,10))"),
        ("'😀 x/y=z%20'", INT_MAX, LONG_MAX, "DATE'9999-12-31'", "NULL", "9999999.99", "TIMESTAMP'9999-12-31 23:59:59.999999'",
         "TIMESTAMP_NTZ'9999-12-31 23:59:59.999999'", "X'FFFFFFFF'", "CAST('9999999999999999999999999999.9999999999' AS DECIMAL(38,10))"),
        ("'__HIVE_DEFAULT_PARTITION__'", 7, 7, "DATE'1582-10-04'", "true", "0.01", "TIMESTAMP'1582-10-04 12:00:00'",
         "TIMESTAMP_NTZ'1582-10-04 12:00:00'", "X'5F5F'", "CAST(1 AS DECIMAL(38,10))"),
        ("' '", 8, 8, "DATE'1900-02-28'", "false", "-0.01", "TIMESTAMP'1900-02-28 23:00:00'",
         "TIMESTAMP_NTZ'1900-02-28 23:00:00'", "X'20'", "CAST(-1 AS DECIMAL(38,10))"),
    ]
    parts = write_and_check(
        spark, iceberg_catalog, engines, table,
        "(s STRING, i INT, l BIGINT, d DATE, b BOOLEAN, dec DECIMAL(9,2), ts TIMESTAMP, ntz TIMESTAMP_NTZ, "
        "bin BINARY, dec38 DECIMAL(38,10), v STRING) PARTITIONED BY (s, i, l, d, b, dec, ts, ntz, bin, dec38)",
        ", ".join(f"({', '.join(map(str, r))}, 'v{k}')" for k, r in enumerate(rows)), len(rows), len(rows),
    )
    # '' and NULL are distinct partitions, as are 'x' and '__HIVE_DEFAULT_PARTITION__'.
    assert ("", 0, 0, 0, False, ("decimal", 0, -2), 0, 0, b"", ("decimal", 0, -10)) in parts
    assert (None,) * 10 in parts


def test_bucket_partitions_end_to_end(spark, ns, iceberg_catalog, engines):
    """bucket(N) of every source type, and bucket(2^31-1), which stores (almost) the whole hash:
    the spec's vectors show in the files' partitions."""
    table = f"lake.{ns}.bucketed"
    strs = ["''", "'iceberg'", "'ü'", "'日本'", "'😀'", "NULL", "'abc'", "'x'"]
    big = ["34, 'iceberg', 14.20, X'00010203'", "35, 'Iceberg', -14.20, X'000102'", "NULL, NULL, NULL, NULL"]
    rows = []
    for k in range(16):
        i = [34, -1, 0, INT_MIN, INT_MAX, 123456, -98765][k % 7]
        l = [34, -1, LONG_MIN, LONG_MAX, 10**12][k % 5]
        rows.append(
            f"({i if k != 5 else 'NULL'}, {l}, {strs[k % len(strs)]}, CAST({[14.20, -14.20, 0, 0.01, -9999999.99][k % 5]} AS DECIMAL(9,2)), "
            f"date_from_unix_date({[17486, -1, 0, -719162, 2932896, 1234][k % 6]}), "
            f"timestamp_micros({[1510871468000000, -1, 0, 1510871468000001, -62135510400000000][k % 5]}), "
            f"CAST(timestamp_micros({[1510871468000000, -1, 3599999999, -3600000000][k % 4]}) AS TIMESTAMP_NTZ), "
            f"unhex('{['', '00010203', 'FF', '00'][k % 4]}'), {big[k % 3]}, {k})"
        )
    write_and_check(
        spark, iceberg_catalog, engines, table,
        "(i INT, l BIGINT, s STRING, dec DECIMAL(9,2), d DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, bin BINARY, "
        "bi INT, bs STRING, bdec DECIMAL(9,2), bbin BINARY, k INT) "
        "PARTITIONED BY (bucket(8, i), bucket(16, l), bucket(5, s), bucket(7, dec), bucket(3, d), bucket(4, ts), "
        f"bucket(6, ntz), bucket(2, bin), bucket({INT_MAX}, bi), bucket({INT_MAX}, bs), bucket({INT_MAX}, bdec), "
        f"bucket({INT_MAX}, bbin))",
        ", ".join(rows), len(rows), 10,
    )
    t = iceberg_catalog.load_table(f"{ns}.bucketed")
    spec_hashes = (2017239379, 1210000089, -500754589 & INT_MAX, -188683207 & INT_MAX)
    assert spec_hashes in {tuple(task.file.partition)[8:] for task in t.scan().plan_files()}


def test_truncate_partitions_end_to_end(spark, ns, iceberg_catalog, engines):
    table = f"lake.{ns}.truncated"
    rows = [
        "(1, 1L, 'iceberg', X'0001020304', 10.65, 0)",
        "(-1, -1L, '日本語テキスト', X'FF', -0.01, 1)",
        "(-10, -10L, '😀😃😄😁', X'', -10.00, 2)",
        "(-11, -11L, 'ü', X'00', -10.01, 3)",
        "(9, 9L, '', X'0001', 0.00, 4)",
        "(NULL, NULL, NULL, NULL, NULL, 5)",
        f"({INT_MAX}, {LONG_MAX}L, 'ab', X'0102', 9999999.99, 6)",
        f"({INT_MIN + 8}, {LONG_MIN + 8}L, 'abcdef', X'FFFFFF', -9999999.90, 7)",  # the lowest truncations the types hold
        "(-2147483639, -9223372036854775799L, 'a😀', X'0A0B0C', -9999999.81, 8)",
    ]
    write_and_check(
        spark, iceberg_catalog, engines, table,
        "(i INT, l BIGINT, s STRING, b BINARY, dec DECIMAL(9,2), k INT) "
        "PARTITIONED BY (truncate(i, 10), truncate(l, 10), truncate(s, 3), truncate(b, 2), truncate(dec, 10))",
        ", ".join(rows), len(rows), len(rows),
    )


TIME_ROWS = [
    "1969-12-31 23:59:59.999999", "1970-01-01 00:00:00", "1969-12-31 23:00:00", "1969-12-31 22:59:59.999999",
    "1969-12-31 00:00:00", "1969-12-01 00:00:00", "1969-11-30 23:59:59.999999", "1969-01-01 00:00:00",
    "1968-12-31 23:59:59.999999", "1900-02-28 12:00:00", "0001-01-02 00:00:00", "1582-10-04 23:59:59",
    "1582-10-15 00:00:00", "2000-02-29 00:59:59.999999", "2024-03-10 02:30:00", "9999-12-31 23:59:59.999999",
]


def test_time_partitions_end_to_end(spark, ns, iceberg_catalog, engines):
    """years/months/days/hours of TIMESTAMP and TIMESTAMP_NTZ, years/months/days of DATE, at the
    boundaries around the epoch and far from it."""
    table = f"lake.{ns}.by_time"
    columns = [("ts", "TIMESTAMP", ["years", "months", "days", "hours"]),
               ("ntz", "TIMESTAMP_NTZ", ["years", "months", "days", "hours"]),
               ("d", "DATE", ["years", "months", "days"])]
    names = [(f"{c}_{t}", sql_type, t) for c, sql_type, transforms in columns for t in transforms]

    def literal(sql_type, v):
        return f"DATE'{v[:10]}'" if sql_type == "DATE" else f"{sql_type}'{v}'"

    rows = [f"({', '.join(literal(sql_type, v) for _, sql_type, _ in names)}, {k})" for k, v in enumerate(TIME_ROWS)]
    rows.append(f"({', '.join(['NULL'] * len(names))}, {len(TIME_ROWS)})")
    write_and_check(
        spark, iceberg_catalog, engines, table,
        f"({', '.join(f'{name} {sql_type}' for name, sql_type, _ in names)}, k INT) "
        f"PARTITIONED BY ({', '.join(f'{t}({name})' for name, _, t in names)})",
        ", ".join(rows), len(rows), 12,
    )


def test_time_partitions_end_to_end_in_another_session_zone(spark, ns, iceberg_catalog, engines):
    """Days and hours of a TIMESTAMP are UTC's even when the session's zone is not UTC."""
    table = f"lake.{ns}.by_time_zoned"
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        spark.sql(f"CREATE TABLE {table} (a TIMESTAMP, b TIMESTAMP, c TIMESTAMP, d TIMESTAMP) "
                  "PARTITIONED BY (years(a), months(b), days(c), hours(d))")
        values = ["1969-12-31 23:59:59.999999+00:00", "1970-01-01 00:00:00+00:00", "1969-12-31 16:30:00-08:00",
                  "2017-11-16 14:31:08-08:00", "2016-12-31 23:00:00-08:00"]
        rows = [f"(TIMESTAMP'{v}', TIMESTAMP'{v}', TIMESTAMP'{v}', TIMESTAMP'{v}')" for v in values]
        spark.sql(f"INSERT INTO {table} VALUES {', '.join(rows)}")
        parts = assert_file_partitions(iceberg_catalog, table)
        assert sum(parts.values()) == len(values)
        # 2016-12-31 23:00 in Los Angeles is 2017-01-01 07:00 UTC: year 47 (2017), not 46.
        assert (47, 564, days("2017-01-01"), (days("2017-01-01")) * 24 + 7) in parts
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    assert len(engines.assert_same(table)) == len(values)


def test_truncating_below_a_decimal_types_minimum_fails_cleanly(spark, ns, iceberg_catalog):
    """truncate(10) of decimal(9,2) -9999999.99 is -10000000.00 by the spec, one digit more than
    the type holds; no Iceberg writer can store that partition value (Iceberg's Java writers and
    pyiceberg's both check the precision), so the INSERT fails, before anything is committed."""
    table = f"lake.{ns}.trunc_min"
    spark.sql(f"CREATE TABLE {table} (dec DECIMAL(9,2)) PARTITIONED BY (truncate(dec, 10))")
    spark.sql(f"INSERT INTO {table} VALUES (1.00)")
    assert TruncateTransform(10).transform(it.DecimalType(9, 2))(Decimal("-9999999.99")) == Decimal("-10000000.00")
    with pytest.raises(Exception, match="Decimal\\(9, 2\\)|decimal\\(9, ?2\\)"):
        spark.sql(f"INSERT INTO {table} VALUES (-9999999.99), (2.00)")
    assert [tuple(r) for r in spark.sql(f"SELECT * FROM {table}").collect()] == [(Decimal("1.00"),)]
    assert len(iceberg_catalog.load_table(f"{ns}.trunc_min").history()) == 1


@pytest.mark.xfail(strict=True, reason="truncate(10) of INT_MIN is -2147483650 by the spec, which an int partition "
                   "value cannot hold: lakerules (like Iceberg's Java library) stores it wrapped around as "
                   "2147483646, and pruning then skips the file")
def test_truncating_below_an_int_minimum_keeps_rows_findable(spark, ns):
    table = f"lake.{ns}.trunc_int_min"
    spark.sql(f"CREATE TABLE {table} (i INT) PARTITIONED BY (truncate(i, 10))")
    spark.sql(f"INSERT INTO {table} VALUES ({INT_MIN}), (-5), (5)")
    assert sorted(r[0] for r in spark.sql(f"SELECT i FROM {table} WHERE i < 0").collect()) == [INT_MIN, -5]
