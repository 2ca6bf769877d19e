"""lakerules.inspect and `python -m lakerules inspect`: a table's layout from its metadata,
checked against what was written and against pyiceberg's own metadata tables."""

from __future__ import annotations

import re

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


def _boxes(fig):
    from matplotlib.patches import Rectangle

    return [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]


def _coverage_max(fig) -> int:
    return int(fig.axes[0].images[0].get_array().max())


def test_plot_of_a_string_column_by_its_bounds(table, warehouse, capsys, tmp_path):
    from lakerules.metadata import health

    out = tmp_path / "kind_id.png"
    assert main(["inspect", table, "--warehouse", str(warehouse), "--column", "kind", "--column", "id",
                 "--plot", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "data files: 8, rows: 800" in printed and f"plot: {out}" in printed
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    fig = health.figure(lakerules.inspect(table, ["kind", "id"]))
    ax = fig.axes[0]
    # strings by their ranks among the files' bounds, the axis labelled with the values
    assert [t.get_text() for t in ax.get_xticklabels()] == ["ok", "spam"]
    boxes = _boxes(fig)
    assert len(boxes) == 8
    # each file outlined, opaque, in its own colour, not filled over the others
    assert all(b.get_edgecolor()[3] == 1.0 and b.get_facecolor()[3] == 0.0 and b.get_linewidth() > 0 for b in boxes)
    assert len({b.get_edgecolor() for b in boxes}) == 8
    # day 1's files hold ok..spam, day 2's only ok: ids disjoint, so no point is in two boxes
    widths = sorted(round(b.get_width(), 2) for b in boxes)
    assert widths == [0.9] * 4 + [1.9] * 4
    assert _coverage_max(fig) == 1 and "in 1 at most" in ax.get_title()


def test_plot_shows_where_files_overlap(spark, ns, tmp_path):
    from lakerules.metadata import health

    t = f"lake.{ns}.ov"
    spark.sql(f"CREATE TABLE {t} (a BIGINT, b DATE)")
    # 4 files, each spread over nearly all of [0, 400) and of the 400 days: an unclustered table
    spark.sql(f"INSERT INTO {t} SELECT (id * 37) % 400, date_add(DATE'2026-01-01', CAST((id * 91) % 400 AS INT)) "
              "FROM range(0, 400, 1, 4)")
    h = lakerules.inspect(t, ["a", "b"])
    assert h.data_files == 4
    fig = health.figure(h)
    assert _coverage_max(fig) == 4  # the shading counts the files holding each point
    assert "in 4 at most" in fig.axes[0].get_title()
    assert len({b.get_edgecolor() for b in _boxes(fig)}) == 4
    low, high = fig.axes[0].get_ylim()
    label = fig.axes[0].yaxis.get_major_formatter()((low + high) / 2, 0)
    assert re.fullmatch(r"2026-\d\d-\d\d", label), label  # dates labelled as dates
    out = tmp_path / "ov.png"
    health.plot(h, out)
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_a_plot_that_cannot_be_drawn_still_prints_the_layout(table, warehouse, capsys):
    assert main(["inspect", table, "--warehouse", str(warehouse), "--column", "id", "--plot", "x.png"]) == 1
    captured = capsys.readouterr()
    assert "data files: 8, rows: 800" in captured.out and "draws two columns" in captured.err
