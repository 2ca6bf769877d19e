"""No user value or name reaches Spark as SQL text: what a statement does must not depend on the
parser's settings (issue 16, item 3). Each test runs under spark.sql.parser.escapedStringLiterals
true and false, and with spark.sql.ansi.enabled false; values with quotes, backslashes, newlines
and unicode, a table named it's and a column named a`b."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.typedef import Record

from deletes_util import commit_deletes, equality_delete_file
from settings_util import settings

SETTINGS = [
    {"spark.sql.parser.escapedStringLiterals": "true"},
    {"spark.sql.parser.escapedStringLiterals": "false"},
    {"spark.sql.parser.escapedStringLiterals": "true", "spark.sql.ansi.enabled": "false"},
]
IDS = ["escaped", "unescaped", "escaped-no-ansi"]

# keys an equality delete removes, and look-alikes it must keep
DELETED = ["'", "\\", "\\\\'", "\\'", "''", "a\nb", "end\\", "x'y", "naïve ☃ 日本 \u2028", "tab\there"]
KEPT = ["plain", "a\\nb", "\\\\", "x''y", "naive", "tab\\there", "", "'\\'"]


def _append(catalog, identifier, columns: dict[str, pa.Array]):
    t = catalog.load_table(identifier)
    t.append(pa.table(columns, schema=t.schema().as_arrow()))


def _pyiceberg_rows(catalog, identifier) -> list[tuple]:
    arrow = catalog.load_table(identifier).scan().to_arrow()
    return sorted((tuple(r.values()) for r in arrow.to_pylist()), key=repr)


def _rows(spark, table) -> list[tuple]:
    return sorted((tuple(r) for r in spark.table(table).collect()), key=repr)


@pytest.mark.parametrize("conf", SETTINGS, ids=IDS)
def test_equality_deleted_keys_stay_deleted(spark, ns, iceberg_catalog, conf):
    table = f"lake.{ns}.keys"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, s STRING)")
    values = DELETED + KEPT + [None]
    _append(iceberg_catalog, (ns, "keys"), {"id": pa.array(range(len(values)), pa.int64()), "s": pa.array(values)})
    before = _pyiceberg_rows(iceberg_catalog, (ns, "keys"))
    t = iceberg_catalog.load_table((ns, "keys"))
    commit_deletes(iceberg_catalog, (ns, "keys"), [equality_delete_file(t, {"s": DELETED}, Record())])
    expected = [r for r in before if r[1] not in DELETED]
    assert [r[1] for r in expected] != [r[1] for r in before]
    with settings(spark, conf):
        assert _rows(spark, table) == expected
        assert spark.table(table).where("id >= 0").count() == len(KEPT) + 1


@pytest.mark.parametrize("conf", SETTINGS, ids=IDS)
def test_many_equality_deleted_keys(spark, ns, iceberg_catalog, conf):
    """Over 10,000 keys (below the anti-join threshold): one NOT IN set, built in bulk."""
    table = f"lake.{ns}.many"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, s STRING)")
    n = 10_000
    strings = [f"k'{i}\\" for i in range(n)]
    _append(iceberg_catalog, (ns, "many"), {"id": pa.array(range(n), pa.int64()), "s": pa.array(strings)})
    t = iceberg_catalog.load_table((ns, "many"))
    commit_deletes(iceberg_catalog, (ns, "many"), [
        equality_delete_file(t, {"s": strings[: n - 3]}, Record()),
        equality_delete_file(t, {"id": list(range(1, n - 3))}, Record()),
    ])
    with settings(spark, conf):
        assert _rows(spark, table) == [(n - 3, strings[n - 3]), (n - 2, strings[n - 2]), (n - 1, strings[n - 1])]


def _check(spark, iceberg_catalog, table, identifier, expected):
    ours = _rows(spark, table)
    assert ours == _pyiceberg_rows(iceberg_catalog, identifier)
    assert ours == sorted(expected, key=repr)


@pytest.mark.parametrize("conf", SETTINGS, ids=IDS)
def test_row_level_commands_on_a_table_named_with_a_quote(spark, ns, iceberg_catalog, conf):
    table, identifier = f"lake.{ns}.`it's`", (ns, "it's")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING)")
    spark.sql(f"INSERT INTO {table} SELECT id, concat('v', CAST(id AS STRING)) FROM range(10)")
    rows = {i: (i, f"v{i}") for i in range(10)}
    with settings(spark, conf):
        assert spark.sql(f"DELETE FROM {table} WHERE id < 3").collect()[0].num_affected_rows == 3
        for i in range(3):
            del rows[i]
        _check(spark, iceberg_catalog, table, identifier, rows.values())
        assert spark.sql(f"UPDATE {table} SET v = \"it's\" WHERE id >= 8").collect()[0].num_affected_rows == 2
        rows[8], rows[9] = (8, "it's"), (9, "it's")
        _check(spark, iceberg_catalog, table, identifier, rows.values())
        r = spark.sql(f"""MERGE INTO {table} t USING (SELECT id, 'm' AS v FROM range(5, 12)) s ON t.id = s.id
                          WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *""").collect()[0]
        assert r.num_affected_rows == 7
        rows.update({i: (i, "m") for i in range(5, 12)})
        _check(spark, iceberg_catalog, table, identifier, rows.values())


@pytest.mark.parametrize("conf", SETTINGS, ids=IDS)
@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_row_level_commands_on_a_column_with_a_backtick(spark, ns, iceberg_catalog, conf, mode):
    table, identifier = f"lake.{ns}.cols", (ns, "cols")
    modes = ", ".join(f"'write.{op}.mode' = '{mode}'" for op in ("delete", "update", "merge"))
    spark.sql(f"CREATE TABLE {table} (id BIGINT, `a``b` STRING) TBLPROPERTIES ({modes})")
    spark.sql(f"INSERT INTO {table} SELECT id, concat('v', CAST(id AS STRING)) FROM range(10)")
    rows = {i: (i, f"v{i}") for i in range(10)}
    with settings(spark, conf):
        assert spark.sql(f"DELETE FROM {table} WHERE `a``b` IN ('v1', 'v2')").collect()[0].num_affected_rows == 2
        del rows[1], rows[2]
        _check(spark, iceberg_catalog, table, identifier, rows.values())
        r = spark.sql(f"UPDATE {table} SET `a``b` = concat(`a``b`, \"'\") WHERE id >= 8").collect()[0]
        assert r.num_affected_rows == 2
        rows[8], rows[9] = (8, "v8'"), (9, "v9'")
        _check(spark, iceberg_catalog, table, identifier, rows.values())
        r = spark.sql(f"""MERGE INTO {table} t USING (SELECT id, 'm' AS `x``y` FROM range(5, 12)) s ON t.id = s.id
                          WHEN MATCHED THEN UPDATE SET `a``b` = s.`x``y`
                          WHEN NOT MATCHED THEN INSERT (id, `a``b`) VALUES (s.id, s.`x``y`)""").collect()[0]
        assert r.num_affected_rows == 7
        rows.update({i: (i, "m") for i in range(5, 12)})
        _check(spark, iceberg_catalog, table, identifier, rows.values())


@pytest.mark.parametrize("conf", SETTINGS, ids=IDS)
def test_partition_field_on_a_table_named_with_a_quote(spark, ns, iceberg_catalog, conf):
    table, identifier = f"lake.{ns}.`it's`", (ns, "it's")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, `a``b` STRING)")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'x')")
    with settings(spark, conf):
        spark.sql(f"ALTER TABLE {table} ADD PARTITION FIELD bucket(4, id)")
        spark.sql(f"ALTER TABLE {table} ADD PARTITION FIELD truncate(2, `a``b`) AS `t'r`")
        spark.sql(f"INSERT INTO {table} VALUES (2, 'yz!'), (3, NULL)")
    spec = iceberg_catalog.load_table(identifier).spec()
    assert [(f.name, str(f.transform)) for f in spec.fields] == [("id_bucket_4", "bucket[4]"), ("t'r", "truncate[2]")]
    _check(spark, iceberg_catalog, table, identifier, [(1, "x"), (2, "yz!"), (3, None)])
    t = iceberg_catalog.load_table(identifier)
    written = {tuple(task.file.partition) for task in t.scan().plan_files() if task.file.spec_id == t.spec().spec_id}
    assert {p[1] for p in written} == {"yz", None}


def test_many_multi_column_equality_deleted_keys(spark, ns, iceberg_catalog):
    """4,000 keys of four columns (below the anti-join threshold): one key set whose rows reach the
    JVM in bulk (PlanBuilders.inRows), compared null-safely per column. One OR per key nested 4,000 deep
    overflowed the JVM's stack."""
    import datetime
    import math

    table = f"lake.{ns}.multi"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, s STRING, b BINARY, ts TIMESTAMP, d DOUBLE)")
    n = 4_400
    epoch = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)

    def row(i):
        return (i, None if i % 7 == 0 else f"k'{i % 50}\\\n",
                None if i % 11 == 0 else bytes([i % 256, 0, 39]),
                None if i % 13 == 0 else epoch + datetime.timedelta(microseconds=i * 1_000_001),
                None if i % 17 == 0 else (math.nan if i % 5 == 0 else i / 4))

    rows = [row(i) for i in range(n)]
    _append(iceberg_catalog, (ns, "multi"), {
        "id": pa.array([r[0] for r in rows], pa.int64()), "s": pa.array([r[1] for r in rows]),
        "b": pa.array([r[2] for r in rows], pa.binary()),
        "ts": pa.array([r[3] for r in rows], pa.timestamp("us", "UTC")), "d": pa.array([r[4] for r in rows])})
    deleted = [r for r in rows if r[0] % 10 != 3]  # 3,960 keys, NULLs and NaN in them
    deleted += [(None, "absent", b"x", epoch, 1.0)]  # matches nothing
    t = iceberg_catalog.load_table((ns, "multi"))
    commit_deletes(iceberg_catalog, (ns, "multi"), [equality_delete_file(t, {
        "s": [r[1] for r in deleted], "b": [r[2] for r in deleted], "ts": [r[3] for r in deleted],
        "d": [r[4] for r in deleted]}, Record())])
    # a data row matches when all four values are equal (NULL to NULL, NaN to NaN); ids 3, 13, ...
    # share no key with a deleted row (their i % 50, i % 256 and times are their own only when
    # no deleted row has all four equal)
    def key(r):
        return tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in r[1:])

    gone = {key(r) for r in deleted}
    expected = sorted(r[0] for r in rows if key(r) not in gone)
    assert 0 < len(expected) < n
    with settings(spark, {"spark.sql.parser.escapedStringLiterals": "true"}):
        assert sorted(r.id for r in spark.table(table).select("id").collect()) == expected
        assert spark.table(table).where("d > 100").count() == sum(
            1 for r in rows if key(r) not in gone and r[4] is not None and not math.isnan(r[4]) and r[4] > 100)
