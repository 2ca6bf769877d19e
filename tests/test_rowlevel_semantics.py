"""Row-level statements keep Spark's own DML semantics on lake tables (issue 17): assignments
resolved under the store-assignment policy, NOT NULL, nested fields, MERGE's cardinality rule,
cache refresh after writes; and what Iceberg's readers must see after deletes."""

from __future__ import annotations

import pytest

from test_delete import orphans, snapshot_id


@pytest.fixture
def policy(spark):
    """Set spark.sql.storeAssignmentPolicy for one test; ANSI (Spark's default) again after."""
    def set_(value: str):
        spark.sql(f"SET spark.sql.storeAssignmentPolicy={value}")
    yield set_
    set_("ANSI")


def fails_unchanged(spark, catalog, table: str, sql: str, message: str):
    """sql fails with message, commits nothing and leaves no file behind."""
    name = table.split(".", 1)[1]
    before = snapshot_id(catalog, name)
    with pytest.raises(Exception, match=message):
        spark.sql(sql).collect()
    assert snapshot_id(catalog, name) == before
    assert orphans(catalog, name) == set()


# ---- item 1: NOT NULL columns in MERGE's INSERT -------------------------------------------------


def test_merge_insert_leaving_a_not_null_column_without_a_value_is_refused(spark, ns, iceberg_catalog, engines):
    t = f"lake.{ns}.nn"
    spark.sql(f"CREATE TABLE {t} (id INT, c STRUCT<n1: INT> NOT NULL)")
    spark.sql(f"INSERT INTO {t} VALUES (0, named_struct('n1', 0))")
    source = "(SELECT 1 AS c1) s ON t.id = s.c1"
    fails_unchanged(spark, iceberg_catalog, t, f"MERGE INTO {t} t USING {source} WHEN NOT MATCHED THEN INSERT (id) VALUES (s.c1)",
            "No assignment for 'c'")
    fails_unchanged(spark, iceberg_catalog, t,
            f"MERGE INTO {t} t USING {source} WHEN NOT MATCHED THEN INSERT (id, id) VALUES (s.c1, NULL)",
            "Multiple assignments for 'id'")
    # a plain INSERT of the same is refused by Spark too
    with pytest.raises(Exception):
        spark.sql(f"INSERT INTO {t} (id) VALUES (1)").collect()
    spark.sql(f"MERGE INTO {t} t USING {source} WHEN NOT MATCHED THEN INSERT (c, id) VALUES (named_struct('n1', 5), s.c1)")
    engines.assert_same(t, expected=[(0, {"n1": 0}), (1, {"n1": 5})])


def test_null_into_a_not_null_column_fails_and_changes_nothing(spark, ns, iceberg_catalog, policy):
    t = f"lake.{ns}.nn2"
    spark.sql(f"CREATE TABLE {t} (id INT NOT NULL, z INT)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1)")
    fails_unchanged(spark, iceberg_catalog, t, f"UPDATE {t} SET id = CAST(NULL AS INT) WHERE z = 1", "NOT_NULL")
    fails_unchanged(spark, iceberg_catalog, t,
            f"MERGE INTO {t} t USING (SELECT 1 AS k) s ON t.id = s.k WHEN MATCHED THEN UPDATE SET id = CAST(NULL AS INT)",
            "NOT_NULL")
    policy("STRICT")  # a NULL literal (VOID) is no INT under STRICT: refused while planning
    fails_unchanged(spark, iceberg_catalog, t, f"UPDATE {t} SET id = NULL WHERE z = 1", "CANNOT_SAFELY_CAST")
    assert sorted(tuple(r) for r in spark.table(t).collect()) == [(1, 1)]


# ---- item 3: store-assignment policy --------------------------------------------------------------


def test_update_and_merge_follow_the_store_assignment_policy(spark, ns, iceberg_catalog, policy, engines):
    t = f"lake.{ns}.sa"
    spark.sql(f"CREATE TABLE {t} (id INT, z INT)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1), (2, 2)")
    merge = f"MERGE INTO {t} t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET z = {{}}"
    # ANSI (the default): a string is no INT, as INSERT says
    with pytest.raises(Exception, match="CANNOT_SAFELY_CAST"):
        spark.sql(f"INSERT INTO {t} VALUES (3, '30')").collect()
    fails_unchanged(spark, iceberg_catalog, t, f"UPDATE {t} SET z = '30' WHERE id = 1", "CANNOT_SAFELY_CAST")
    fails_unchanged(spark, iceberg_catalog, t, merge.format("'50'"), "CANNOT_SAFELY_CAST")
    fails_unchanged(spark, iceberg_catalog, t,
            f"MERGE INTO {t} t USING (SELECT 9 AS id) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, z) VALUES (s.id, 'x')",
            "CANNOT_SAFELY_CAST")
    # ANSI: BIGINT -> INT is a store-assignment cast (checked at run time)
    spark.sql(f"UPDATE {t} SET z = CAST(7 AS BIGINT) WHERE id = 1").collect()
    spark.sql(merge.format("CAST(8 AS BIGINT)")).collect()
    engines.assert_same(t, expected=[(1, 8), (2, 2)])
    with pytest.raises(Exception, match="CAST_OVERFLOW"):
        spark.sql(f"UPDATE {t} SET z = 3000000000L WHERE id = 2").collect()
    # STRICT: no narrowing at all
    policy("STRICT")
    fails_unchanged(spark, iceberg_catalog, t, f"UPDATE {t} SET z = CAST(7 AS BIGINT) WHERE id = 1", "CANNOT_SAFELY_CAST")
    fails_unchanged(spark, iceberg_catalog, t, merge.format("CAST(9 AS BIGINT)"), "CANNOT_SAFELY_CAST")
    spark.sql(f"UPDATE {t} SET z = CAST(6 AS SMALLINT) WHERE id = 2").collect()  # widening is fine
    # LEGACY is refused for data source v2 tables, as Spark refuses it
    policy("LEGACY")
    fails_unchanged(spark, iceberg_catalog, t, f"UPDATE {t} SET z = 1", "LEGACY")
    policy("ANSI")
    engines.assert_same(t, expected=[(1, 8), (2, 6)])


def test_strings_into_int_fields_of_structs_are_refused_while_planning(spark, ns, iceberg_catalog, policy):
    """Issue 30: a string for an INT field of a struct (NOT NULL there) was cast per row and failed
    with CAST_INVALID_INPUT; Spark and Iceberg refuse it before running, naming the table."""
    t = f"lake.{ns}.sa_nested"
    spark.sql(f"CREATE TABLE {t} (id INT NOT NULL, s STRUCT<n1: INT NOT NULL, n2: STRUCT<dn1: INT, dn2: INT>> NOT NULL)")
    spark.sql(f"INSERT INTO {t} VALUES (1, named_struct('n1', 1, 'n2', named_struct('dn1', 1, 'dn2', 2)))")
    merge = f"MERGE INTO {t} t USING (SELECT 1 AS c1, 'x' AS c2) src ON t.id = src.c1 WHEN MATCHED THEN UPDATE SET {{}}"
    for value in ("ANSI", "STRICT"):
        policy(value)
        for sql in (f"UPDATE {t} t SET t.s.n1 = 'str'", merge.format("t.s.n1 = src.c2"),
                    f"UPDATE {t} SET id = 'x'", merge.format("t.s.n2.dn2 = src.c2")):
            fails_unchanged(spark, iceberg_catalog, t, sql,
                            rf"CANNOT_SAFELY_CAST\] .* table `lake`\.`{ns}`\.`sa_nested`: Cannot safely cast .*\"STRING\" to \"INT\"")
    assert sorted(tuple(r) for r in spark.table(t).collect())[0][0] == 1


def test_struct_values_are_matched_by_field_name_at_every_level(spark, ns, iceberg_catalog, engines):
    """Issue 30: a struct value whose fields (or those of a struct inside it) come in another
    order failed with DATATYPE_MISMATCH; Spark resolves struct assignments by name."""
    t = f"lake.{ns}.byname"
    spark.sql(f"CREATE TABLE {t} (id INT, s STRUCT<c: STRUCT<d: STRING, e: STRING>, g: INT>)")
    spark.sql(f"INSERT INTO {t} VALUES (1, named_struct('c', named_struct('d', 'a', 'e', 'b'), 'g', 1))")
    spark.sql(f"UPDATE {t} SET s = named_struct('g', 20, 'c', named_struct('e', 'x', 'd', 'y'))").collect()
    spark.sql(f"UPDATE {t} SET s.c = named_struct('e', 'x2', 'd', 'y2') WHERE s.g = 20").collect()
    source = "(SELECT * FROM VALUES (1, 30), (2, 40) AS src(id, g)) src ON t.id = src.id"
    spark.sql(f"""MERGE INTO {t} t USING {source}
                  WHEN MATCHED THEN UPDATE SET s = named_struct('g', src.g, 'c', named_struct('e', 'm', 'd', 'n'))
                  WHEN NOT MATCHED THEN INSERT (s, id) VALUES (named_struct('c', named_struct('e', 'i', 'd', 'j'), 'g', src.g), src.id)
                  """).collect()
    engines.assert_same(t, expected=[(1, {"c": {"d": "n", "e": "m"}, "g": 30}),
                                     (2, {"c": {"d": "j", "e": "i"}, "g": 40})])
    # a field missing or one too many: Spark's errors, nothing changed
    fails_unchanged(spark, iceberg_catalog, t, f"UPDATE {t} SET s = named_struct('g', 1, 'c', named_struct('e', 'x'))",
                    "CANNOT_FIND_DATA.*`s`.`c`.`d`")
    fails_unchanged(spark, iceberg_catalog, t,
                    f"UPDATE {t} SET s = named_struct('g', 1, 'c', named_struct('e', 'x', 'd', 'y', 'f', 'z'))",
                    "EXTRA_STRUCT_FIELDS.*`f`")
    fails_unchanged(spark, iceberg_catalog, t,
                    f"MERGE INTO {t} t USING {source} WHEN NOT MATCHED THEN INSERT (id, s) "
                    "VALUES (src.id, named_struct('g', 1, 'h', 2, 'c', named_struct('e', 'x', 'd', 'y')))",
                    "EXTRA_STRUCT_FIELDS.*`h`")


# ---- item 9: nested fields ------------------------------------------------------------------------


def test_nested_field_assignments(spark, ns, iceberg_catalog, engines):
    t = f"lake.{ns}.nest"
    spark.sql(f"CREATE TABLE {t} (id INT, s STRUCT<c1: INT, c2: STRING>, a STRUCT<c: STRUCT<d: INT, e: INT>>)")
    spark.sql(f"""INSERT INTO {t} VALUES (1, named_struct('c1', 1, 'c2', 'x'), named_struct('c', named_struct('d', 1, 'e', 1))),
                                         (2, NULL, NULL)""")
    spark.sql(f"UPDATE {t} SET s.c1 = 10, a.c.d = 20 WHERE id = 1").collect()
    # a NULL struct gets a struct with only the assigned field set, as Spark's alignment does
    spark.sql(f"UPDATE {t} SET s.c2 = 'y' WHERE id = 2").collect()
    spark.sql(f"""MERGE INTO {t} t USING (SELECT 1 AS id) src ON t.id = src.id
                  WHEN MATCHED THEN UPDATE SET s.c2 = 'm', a.c.e = 30""").collect()
    engines.assert_same(t, expected=[
        (1, {"c1": 10, "c2": "m"}, {"c": {"d": 20, "e": 30}}),
        (2, {"c1": None, "c2": "y"}, None),
    ])
    # a struct value whose fields are in another order is resolved by name
    spark.sql(f"UPDATE {t} SET s = named_struct('c2', 'z', 'c1', 7) WHERE id = 2").collect()
    assert engines.assert_same(t, "id, s")[1] == (2, {"c1": 7, "c2": "z"})
    fails_unchanged(spark, iceberg_catalog, t, f"UPDATE {t} SET id = 2, id = 3", "Multiple assignments for 'id'")
    fails_unchanged(spark, iceberg_catalog, t, f"UPDATE {t} SET s = named_struct('c1', 1, 'c2', 'a'), s.c1 = 2",
            "Conflicting assignments for 's'")
    fails_unchanged(spark, iceberg_catalog, t,
            f"MERGE INTO {t} t USING (SELECT 1 AS id) src ON t.id = src.id WHEN MATCHED THEN UPDATE SET s.c1 = 1, s.c1 = 2",
            "Multiple assignments for 's.c1'")


# ---- item 4: MERGE's cardinality rule ---------------------------------------------------------


def test_merge_cardinality_is_checked_only_where_it_matters(spark, ns, iceberg_catalog, engines):
    t = f"lake.{ns}.card"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1), (2, 2), (3, 3)")
    twice = "(SELECT * FROM VALUES ({0}, 5), ({0}, 6) AS s(id, v)) s ON t.id = s.id"
    # an unconditional DELETE: the row goes once, whichever source row matched
    (r,) = spark.sql(f"MERGE INTO {t} t USING {twice.format(1)} WHEN MATCHED THEN DELETE").collect()
    assert (r.num_deleted_rows, r.num_affected_rows) == (1, 1)
    # insert-only: matched rows are left alone
    (r,) = spark.sql(f"MERGE INTO {t} t USING {twice.format(2)} WHEN NOT MATCHED THEN INSERT *").collect()
    assert r.num_affected_rows == 0
    # DELETE + INSERT
    (r,) = spark.sql(f"""MERGE INTO {t} t USING (SELECT * FROM VALUES (2, 5), (2, 6), (9, 9) AS s(id, v)) s ON t.id = s.id
                         WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *""").collect()
    assert (r.num_deleted_rows, r.num_inserted_rows) == (1, 1)
    engines.assert_same(t, expected=[(3, 3), (9, 9)])
    # an UPDATE, or a conditional DELETE, must know which source row: an error
    for clause in ("WHEN MATCHED THEN UPDATE SET v = s.v", "WHEN MATCHED AND s.v > 0 THEN DELETE",
                   "WHEN MATCHED AND s.v < 0 THEN UPDATE SET v = 0 WHEN MATCHED THEN DELETE"):
        fails_unchanged(spark, iceberg_catalog, t, f"MERGE INTO {t} t USING {twice.format(3)} {clause}", "CARDINALITY")


# ---- item 2: caches --------------------------------------------------------------------------------


def test_cached_tables_see_every_write(spark, ns):
    t = f"lake.{ns}.cached"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"CACHE TABLE {t}")
    try:
        def read():
            df = spark.table(t)
            assert "InMemoryRelation" in df._jdf.queryExecution().withCachedData().toString()
            return sorted(tuple(r) for r in df.collect())

        assert read() == [(1, "a"), (2, "b")]
        spark.sql(f"DELETE FROM {t} WHERE id = 1")
        assert read() == [(2, "b")]
        spark.sql(f"INSERT INTO {t} VALUES (3, 'c')")
        assert read() == [(2, "b"), (3, "c")]
        spark.sql(f"UPDATE {t} SET v = 'z' WHERE id = 2")
        assert read() == [(2, "z"), (3, "c")]
        spark.sql(f"MERGE INTO {t} t USING {t} s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = concat(s.v, '!')")
        assert read() == [(2, "z!"), (3, "c!")]
        spark.sql(f"OPTIMIZE {t}")
        assert read() == [(2, "z!"), (3, "c!")]
    finally:
        spark.sql(f"UNCACHE TABLE IF EXISTS {t}")


def test_dataframe_cache_over_a_filter_sees_writes(spark, ns):
    t = f"lake.{ns}.dfcache"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
    spark.table(t).where("id >= 2").cache().count()
    try:
        spark.sql(f"UPDATE {t} SET v = 'z' WHERE id = 2")
        spark.sql(f"INSERT INTO {t} VALUES (3, 'c')")
        df = spark.table(t).where("id >= 2")
        assert "InMemoryRelation" in df._jdf.queryExecution().withCachedData().toString()
        assert sorted(tuple(r) for r in df.collect()) == [(2, "z"), (3, "c")]
    finally:
        spark.catalog.clearCache()


# ---- item 6: decimal constants in conditions ----------------------------------------------------


def test_decimal_constants_in_conditions(spark, ns, engines):
    t = f"lake.{ns}.dec"
    spark.sql(f"CREATE TABLE {t} (key STRING, value INT, d DECIMAL(10, 2))")
    spark.sql(f"INSERT INTO {t} VALUES ('200', 1, 1.50), ('5', 2, 2.50), ('300', 3, 3.50)")
    (r,) = spark.sql(f"UPDATE {t} SET value = -3 WHERE cast(key AS BIGINT) * cast('1.0' AS DECIMAL(38,18)) > 100").collect()
    assert r[0] == 2
    (r,) = spark.sql(f"DELETE FROM {t} WHERE d > 3.25").collect()  # pruned by the decimal bound
    assert r[0] == 1
    engines.assert_same(t, expected=[("200", -3, __import__("decimal").Decimal("1.50")),
                                     ("5", 2, __import__("decimal").Decimal("2.50"))])


# ---- item 7: no dangling deletes ----------------------------------------------------------------


def test_deleting_a_whole_partition_drops_its_delete_files(spark, ns, iceberg_catalog, engines):
    t = f"lake.{ns}.dangling"
    spark.sql(f"CREATE TABLE {t} (id INT, p INT) PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} SELECT /*+ REPARTITION(1) */ * FROM VALUES (1, 1), (2, 1), (3, 2)")
    spark.sql(f"DELETE FROM {t} WHERE id = 1")
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    assert [r["position_delete_file_count"] for r in table.inspect.partitions().to_pylist() if r["partition"]["p"] == 1] == [1]
    spark.sql(f"DELETE FROM {t} WHERE p = 1")
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    assert table.inspect.delete_files().num_rows == 0
    assert [r["partition"]["p"] for r in table.inspect.partitions().to_pylist()] == [2]
    engines.assert_same(t, expected=[(3, 2)])


# ---- item 11: subqueries in MERGE conditions -------------------------------------------------------


def test_subqueries_in_merge_conditions_are_refused(spark, ns, iceberg_catalog, engines):
    """As Spark 4's own MERGE (and Iceberg's) refuses them (issue 30: lakerules ran them): a
    subquery, an aggregate or a non-deterministic expression in the ON or a WHEN condition is
    Spark's UNSUPPORTED_MERGE_CONDITION error, and nothing changes."""
    t, allow = f"lake.{ns}.subq", f"lake.{ns}.allow"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1), (2, 2), (3, 3)")
    spark.sql(f"CREATE TABLE {allow} (id INT)")
    spark.sql(f"INSERT INTO {allow} VALUES (2), (4)")
    merge = f"MERGE INTO {t} t USING (SELECT * FROM VALUES (1, 10), (2, 20), (4, 40) AS s(id, v)) s ON {{}}"
    for sql, kind, cond in [
        (merge.format(f"t.id = s.id AND t.id IN (SELECT id FROM {allow}) WHEN MATCHED THEN DELETE"),
         "SUBQUERY", "SEARCH"),
        (merge.format(f"t.id = s.id WHEN MATCHED AND t.id IN (SELECT id FROM {allow}) THEN UPDATE SET v = s.v"),
         "SUBQUERY", "UPDATE"),
        (merge.format(f"t.id = s.id WHEN MATCHED AND EXISTS (SELECT 1 FROM {allow} a WHERE a.id - 1 = t.id) THEN DELETE"),
         "SUBQUERY", "DELETE"),
        (merge.format(f"t.id = s.id WHEN NOT MATCHED AND s.id IN (SELECT id FROM {allow}) THEN INSERT *"),
         "SUBQUERY", "INSERT"),
        (merge.format(f"t.id = s.id WHEN NOT MATCHED BY SOURCE AND t.v < (SELECT max(id) FROM {allow}) THEN DELETE"),
         "SUBQUERY", "DELETE"),
        (merge.format("t.id = s.id AND rand() < 2 WHEN MATCHED THEN DELETE"), "NON_DETERMINISTIC", "SEARCH"),
    ]:
        fails_unchanged(spark, iceberg_catalog, t, sql, rf"UNSUPPORTED_MERGE_CONDITION\.{kind}\] MERGE operation contains "
                                                        rf"unsupported {cond} condition")
    # the same through a join in the source
    spark.sql(f"""MERGE INTO {t} t USING (SELECT s.*, a.id IS NOT NULL AS allowed
                                          FROM VALUES (1, 10), (2, 20), (4, 40) AS s(id, v) LEFT JOIN {allow} a USING (id)) s
                  ON t.id = s.id
                  WHEN MATCHED AND s.allowed THEN UPDATE SET v = s.v
                  WHEN NOT MATCHED AND s.allowed THEN INSERT (id, v) VALUES (s.id, s.v)""").collect()
    engines.assert_same(t, expected=[(1, 1), (2, 20), (3, 3), (4, 40)])


# ---- item 8: delete files keep whole file_path bounds --------------------------------------------


def test_position_delete_files_keep_whole_file_path_bounds(spark, ns, iceberg_catalog):
    """As Iceberg's writers do (metrics mode full for file_path): truncated to 16 bytes, a delete
    file would look like it applies to every data file of its partition."""
    t = f"lake.{ns}.bounds"
    spark.sql(f"CREATE TABLE {t} (id INT, p INT) PARTITIONED BY (p)")
    for i in range(3):
        spark.sql(f"INSERT INTO {t} SELECT /*+ REPARTITION(1) */ * FROM VALUES ({i}, 1), ({i + 10}, 1)")
    spark.sql(f"DELETE FROM {t} WHERE id IN (0, 11)")
    table = iceberg_catalog.load_table(t.split(".", 1)[1])
    data_paths = {f.file.file_path for f in table.scan().plan_files()}
    deletes = [d for f in table.scan().plan_files() for d in f.delete_files]
    assert deletes
    for d in deletes:
        lower, upper = d.lower_bounds[2147483546].decode(), d.upper_bounds[2147483546].decode()
        assert lower in data_paths and upper in data_paths, (lower, upper)
        assert len(lower) > 16
    # each data file has exactly the deletes that name it
    assert sorted(len(f.delete_files) for f in table.scan().plan_files()) == [0, 1, 1]
