"""The anchor: Iceberg's own Spark runtime, run beside lakerules on the same catalog (issue #52).

`make anchor` puts it in .anchor/: a venv with the pyspark of the Spark line Iceberg's newest
runtime is built for (Iceberg 1.12.0: Spark 4.1; it has none for 4.2 or 4.3) and, fetched from
Maven Central, Iceberg's runtime jar and SQLite's JDBC driver. tests/anchor_driver.py runs there,
never with lakerules; :func:`run` hands it statements and returns what each gave.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ANCHOR = Path(os.environ.get("LAKERULES_ANCHOR", ROOT / ".anchor"))
PYTHON = ANCHOR / "venv" / "bin" / "python"
JARS = ANCHOR / "jars"
DRIVER = Path(__file__).with_name("anchor_driver.py")


def available() -> str | None:
    """Why the anchor cannot run here, or None when it can."""
    if not PYTHON.exists():
        return f"no anchor venv at {PYTHON}: run `make anchor`"
    if not list(JARS.glob("iceberg-spark-runtime-*.jar")):
        return f"no Iceberg runtime jar in {JARS}: run `make anchor`"
    return None


def require() -> None:
    """Fail (not skip) where the anchor is missing: make test installs it with `make anchor`;
    LAKERULES_ANCHOR_OPTIONAL=1 skips instead (a run by hand without it)."""
    why = available()
    if why is None:
        return
    if os.environ.get("LAKERULES_ANCHOR_OPTIONAL"):
        pytest.skip(why)
    pytest.fail(why)


def run(warehouse: Path, statements: list[str], timeout: int = 600) -> list[dict]:
    """Each statement's answer from Iceberg's runtime on the lake catalog of ``warehouse`` (the
    embedded SQLite catalog): {"rows": [[...], ...]} or {"error": "..."}, in order."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_SUBMIT"))}
    env["TZ"] = "UTC"
    proc = subprocess.run([str(PYTHON), str(DRIVER), str(JARS), str(warehouse), str(Path(warehouse) / "catalog.db")],
                          input=json.dumps(statements), capture_output=True, text=True, timeout=timeout, env=env)
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(answers) != len(statements):
        raise AssertionError(f"the anchor failed (exit {proc.returncode}, {len(answers)} of {len(statements)} "
                             f"answers):\n{proc.stderr[-4000:]}")
    return answers


def rows(answer: dict) -> list[tuple]:
    """An answer's rows, sorted, as tuples of JSON values (failing on an error)."""
    assert "error" not in answer, answer["error"]
    return sorted((tuple(r) for r in answer["rows"]), key=repr)
