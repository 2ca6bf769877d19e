"""lakerules.inspect and `python -m lakerules inspect`: a table's layout from its metadata,
checked against what was written and against pyiceberg's own metadata tables."""

from __future__ import annotations

import pytest

import lakerules
from lakerules.__main__ import main


@pytest.fixture
def table(spark, ns):
    t = f"lake.{ns}.ev"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, kind STRING, day DATE) USING iceberg PARTITIONED BY (day) "
              "TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')")
    # 2 days x 4 files each, ids contiguous per file
    spark.sql(f"INSERT INTO {t} SELECT id, IF(id % 4 = 0, 'spam', 'ok'), DATE'2026-01-01' FROM range(0, 400, 1, 4)")
    spark.sql(f"INSERT INTO {t} SELECT id, 'ok', DATE'2026-01-02' FROM range(400, 800, 1, 4)")
    spark.sql(f"DELETE FROM {t} WHERE kind = 'spam'")
    return t


def test_inspect_reports_what_was_written(table, iceberg_catalog):
    h = lakerules.inspect(table, ["id", "kind"])
    files = iceberg_catalog.load_table(table.split(".", 1)[1]).inspect.files().to_pylist()
    data = [f for f in files if f["content"] == 0]
    assert h.data_files == len(data) == 8
    assert h.rows == sum(f["record_count"] for f in data) == 800
    assert sorted(h.sizes) == sorted(f["file_size_in_bytes"] for f in data)
    # DELETE wrote one position delete file per data file of day 1 (granularity file)
    assert h.position_delete_files == 4 and h.position_deleted_rows == 100 and h.equality_delete_files == 0
    assert h.deletes_per_file == {0: 4, 1: 4}
    assert h.deleted_share == pytest.approx(100 / 800)
    assert sorted(h.partitions.values()) == [4, 4] and len(h.partitions) == 2
    ids = h.columns[0]
    assert sorted(ids.ranges) == [(i * 100, i * 100 + 99) for i in range(8)]
    assert ids.share == pytest.approx(1 / 8, abs=0.01)  # disjoint ranges: one file in 8
    assert h.columns[1].share > 0.5  # every file of day 1 holds 'ok' and 'spam'
    text = str(h)
    assert "data files: 8, rows: 800" in text and "1 delete file: 4 data files" in text and "12.5%" in text


def test_the_command_line(table, warehouse, capsys, tmp_path):
    assert main(["inspect", table, "--warehouse", str(warehouse), "--column", "id"]) == 0
    out = capsys.readouterr().out
    assert "data files: 8, rows: 800" in out and "column id: a point predicate reads 1" in out and "[700, 799]" in out


@pytest.mark.parametrize("args, message", [
    (["--column", "nope"], "the table has no column 'nope'"),
    (["--column", "id", "--plot", "x.png"], "draws two columns"),
    (["--catalog-property", "oops"], "takes K=V"),
])
def test_bad_arguments_are_refused(table, warehouse, capsys, args, message):
    extra = [] if args[0] == "--catalog-property" else ["--warehouse", str(warehouse)]
    assert main(["inspect", table, *extra, *args]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_no_table_and_no_catalog(table, warehouse, capsys, tmp_path):
    assert main(["inspect", table + "_missing", "--warehouse", str(warehouse)]) == 1
    assert "no table" in capsys.readouterr().err
    nowhere = tmp_path / "nowhere"
    assert main(["inspect", table, "--warehouse", str(nowhere)]) == 1
    assert "no embedded catalog" in capsys.readouterr().err and not nowhere.exists()
