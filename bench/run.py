"""Runs the benchmark modules, prints their results, and records them in bench/RESULTS.md.

    .venv/bin/python bench/run.py                       # every module, 10,000,000 rows
    .venv/bin/python bench/run.py --only foundation --rows 1000000 --runs 3

Every result is a ratio (or difference) of two contenders measured side by side in the same
run, in turns; absolute times are only this machine's at that moment. Each module gets its own
SparkSession (local[2], no UI, log level ERROR) with its warehouse under bench/out/<module>/,
which is deleted at the start of the module's run.
"""

from __future__ import annotations

import argparse
import datetime
import re
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import delete  # noqa: E402
import foundation  # noqa: E402
import latemat  # noqa: E402
import optimize  # noqa: E402
import scan  # noqa: E402
import update  # noqa: E402
from common import Report, load, machine, session  # noqa: E402

MODULES = {
    "foundation": ("Foundation", foundation),
    "scan": ("Scan planning", scan),
    "delete": ("DELETE FROM", delete),
    "update": ("UPDATE", update),
    "optimize": ("OPTIMIZE ZORDER BY", optimize),
    "latemat": ("Late materialization", latemat),
}
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
HEADER = "# Benchmark results\n\nRatios are measured side by side in one run; absolute times are this machine's.\n"


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=10_000_000, help="rows written / scanned (default 10,000,000)")
    p.add_argument("--runs", type=int, default=3, help="timed runs of each contender (default 3)")
    p.add_argument("--statements", type=int, default=2000, help="spark.sql() calls per overhead batch (default 2000)")
    p.add_argument("--batches", type=int, default=5, help="timed overhead batches per side (default 5)")
    p.add_argument("--only", default=",".join(MODULES), help=f"comma-separated modules (default {','.join(MODULES)})")
    p.add_argument("--no-record", action="store_true", help="print only; leave RESULTS.md alone")
    args = p.parse_args(argv)
    unknown = [m for m in args.only.split(",") if m not in MODULES]
    if unknown:
        p.error(f"unknown module(s) {unknown}; known: {list(MODULES)}")
    if args.runs < 1 or args.batches < 1 or args.rows < 1 or args.statements < 1:
        p.error("--rows, --runs, --statements and --batches must be positive")
    return args


def main(argv=None) -> None:
    args = parse(argv)
    given = sys.argv[1:] if argv is None else list(argv)
    command = " ".join([".venv/bin/python", "bench/run.py", *(shlex.quote(a) for a in given)])
    reports = []
    for name in args.only.split(","):
        title, module = MODULES[name]
        print(f"== {title} ==  ({machine()}; load average {load()})", flush=True)
        started, load_before = time.time(), load()
        spark = session(name)  # deletes bench/out/<name> first
        report = Report(f"{title} ({args.rows:,} rows, {args.runs} runs side by side)")
        try:
            module.run(spark, args, report)
        finally:
            spark.stop()
            from pyspark.sql import SparkSession

            SparkSession._instantiatedSession = None
            SparkSession._activeSession = None
        elapsed = time.time() - started
        report.note(
            f"Took {elapsed / 60:.1f} min; 1-minute load average {load_before} at the start, {load()} at the end "
            "(2 cores: anything above ~2 is other work competing). The contenders ran in turns in the same "
            "run, so such load hits both; compare the ratios, not the absolute times."
        )
        reports.append(report)
        if not args.no_record:
            record(name, report, command)
    print()
    print(table(reports))


def table(reports: list[Report]) -> str:
    """The compact summary printed at the end."""
    out = []
    for r in reports:
        out.append(r.title)
        width = max(len(w) for w, *_ in r.rows)
        for what, measured, target, verdict in r.rows:
            line = f"  {what.ljust(width)}  {measured.replace('**', '')}"
            if target:
                line += f"  [target {target}: {verdict}]"
            out.append(line)
    return "\n".join(out)


def record(name: str, report: Report, command: str) -> None:
    """Write or replace this module's section of RESULTS.md."""
    text = RESULTS.read_text() if RESULTS.exists() else HEADER
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = f"<!-- {name} -->\n`{command}` on {machine()}, {stamp}\n\n{report.markdown()}<!-- /{name} -->\n"
    pattern = re.compile(rf"<!-- {name} -->.*?<!-- /{name} -->\n", re.DOTALL)
    text = pattern.sub(lambda _: body, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + body
    RESULTS.write_text(text)
    print(f"  (recorded in {RESULTS})", flush=True)


if __name__ == "__main__":
    main()
