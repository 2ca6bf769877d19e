"""Tables whose paths need URL escaping (a space, '%', '#', a quote in the location or the table's
name) read right after every row-level write: files reach Spark as paths, never as URIs or globs
(issue #16 item 2)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("folder", ["sp ace", "per%20cent", "br[a]ck{e}t*", "it's"])
def test_row_level_writes_then_reads_in_a_location_that_needs_escaping(spark, ns, warehouse, engines, folder):
    table = f"lake.{ns}.esc"
    location = warehouse / f"{ns}-{folder}" / "t"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING) PARTITIONED BY (kind) "
              f"LOCATION '{str(location).replace(chr(39), chr(92) + chr(39))}'")
    spark.sql(f"INSERT INTO {table} SELECT id, CAST(id % 2 AS STRING) FROM range(20)")
    (r,) = spark.sql(f"DELETE FROM {table} WHERE id IN (3, 4)").collect()
    assert r.num_affected_rows == 2
    rows = engines.assert_same(table)
    assert len(rows) == 18
    (r,) = spark.sql(f"UPDATE {table} SET id = id + 100 WHERE id = 5").collect()
    assert r.num_affected_rows == 1
    spark.sql(f"""MERGE INTO {table} t USING (SELECT 6L AS id) s ON t.id = s.id
                  WHEN MATCHED THEN DELETE""").collect()
    spark.sql(f"OPTIMIZE {table}").collect()
    rows = engines.assert_same(table)
    assert sorted(r[0] for r in rows) == sorted([i for i in range(20) if i not in (3, 4, 5, 6)] + [105])


def test_a_table_name_that_needs_escaping(spark, ns, engines):
    table = f"lake.{ns}.`x y%20z`"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    spark.sql(f"INSERT INTO {table} SELECT id FROM range(10)")
    spark.sql(f"DELETE FROM {table} WHERE id = 3").collect()
    spark.sql(f"UPDATE {table} SET id = 30 WHERE id = 4").collect()
    ours = sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect())
    assert ours == [0, 1, 2, 5, 6, 7, 8, 9, 30]
    assert sorted(r[0] for r in engines.pyiceberg(f"lake.{ns}.x y%20z")) == ours


@pytest.mark.parametrize("name", ["a#b", "a?b"])
def test_names_and_locations_pyiceberg_would_misread_are_refused(spark, ns, warehouse, iceberg_catalog, name):
    with pytest.raises(Exception, match="URL fragment or query") as e:
        spark.sql(f"CREATE TABLE lake.{ns}.`{name}` (id BIGINT)")
    assert "Traceback" not in str(e.value)
    with pytest.raises(Exception, match="URL fragment or query"):
        spark.sql(f"CREATE TABLE lake.{ns}.t (id BIGINT) LOCATION '{warehouse}/{ns}-{name}/t'")
    assert iceberg_catalog.list_tables(ns) == []
