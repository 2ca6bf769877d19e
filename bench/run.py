"""Runs the benchmarks and records what they print in bench/RESULTS.md.

    .venv/bin/python bench/run.py [--rows 10000000] [--runs 3] [--only foundation,scan]
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import foundation  # noqa: E402
import scan  # noqa: E402
from common import Report, machine, session  # noqa: E402

MODULES = {"foundation": ("Foundation", foundation), "scan": ("Scan planning", scan)}
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--statements", type=int, default=2000)
    p.add_argument("--only", default=",".join(MODULES))
    args = p.parse_args()
    command = "bench/run.py " + " ".join(sys.argv[1:])
    for name in args.only.split(","):
        title, module = MODULES[name]
        print(f"== {title} ==", flush=True)
        spark = session(name)
        report = Report(f"{title} ({args.rows:,} rows, {args.runs} runs side by side)")
        try:
            module.run(spark, args, report)
        finally:
            spark.stop()
            from pyspark.sql import SparkSession

            SparkSession._instantiatedSession = None
            SparkSession._activeSession = None
        record(name, report, command)


def record(name: str, report: Report, command: str) -> None:
    """Replace this module's section of RESULTS.md."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\nRatios are measured side by side in one run; absolute times are this machine's.\n"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = f"<!-- {name} -->\n`{command}` on {machine()}, {stamp}\n\n{report.markdown()}<!-- /{name} -->\n"
    pattern = re.compile(rf"<!-- {name} -->.*?<!-- /{name} -->\n", re.DOTALL)
    text = pattern.sub(lambda _: body, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + body
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
