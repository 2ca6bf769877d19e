"""Each example in examples/ runs (small data, the shared session) and does what it says; the
rows it leaves read the same through pyiceberg and DuckDB. examples/demo.py, the whole mission
on a few million rows, is `make demo`; here it is not run (its own session, minutes)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_delete(spark, ns, engines):
    out = _example("delete").run(spark, ns, rows=2000)
    for deleted, left, table in out.values():
        assert (deleted, left) == (200, 1800)
        assert len(engines.assert_same(table, "id")) == 1800
    assert "position_delete_files=4" in _example("delete").scans(spark, f"SELECT * FROM {out['merge-on-read'][2]}")


def test_update(spark, ns, engines):
    out = _example("update").run(spark, ns, rows=2000)
    assert out["updated"] == 250 and out["counts"] == {"new": 1750, "done": 250}
    engines.assert_same(out["table"])


def test_merge(spark, ns, engines):
    out = _example("merge").run(spark, ns, rows=2000)
    assert (out["num_updated_rows"], out["num_deleted_rows"], out["num_inserted_rows"]) == (990, 10, 1000)
    assert len(engines.assert_same(out["table"], "id")) == 2990


def test_optimize_and_inspect(spark, ns, engines, tmp_path):
    pytest.importorskip("matplotlib")
    out = _example("optimize").run(spark, ns, rows=40_000, plots=str(tmp_path / "z"))
    before, after = out["before"], out["after"]
    assert before.data_files == 16 and before.columns[0].share > 0.9 and before.columns[1].share > 0.9
    assert after.columns[0].share < 0.5 and after.columns[1].share < 0.5, str(after)
    assert before.rows == after.rows == 40_000
    for png in ("z-before.png", "z-after.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(engines.assert_same(out["table"], "a, b")) == 40_000


def test_maintenance(spark, ns, engines):
    out = _example("maintenance").run(spark, ns, rows=500)
    assert out["restored"] == 500 and out["rows"] == 1000
    assert out["expired"]["deleted_manifest_lists_count"] >= 1
    engines.assert_same(out["table"])
