"""Shared benchmark helpers: one session, side-by-side timing, result records."""

from __future__ import annotations

import os
import shutil
import statistics
import time
from pathlib import Path

import lakerules

OUT = Path(__file__).resolve().parent / "out"


def session(name: str):
    shutil.rmtree(OUT / name, ignore_errors=True)
    (OUT / name).mkdir(parents=True, exist_ok=True)
    spark = lakerules.session(
        warehouse=OUT / name / "warehouse",
        master="local[2]",
        app_name=f"lakerules-bench-{name}",
        conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.memory": "8g",
            "spark.sql.shuffle.partitions": "8",
            "spark.sql.session.timeZone": "UTC",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def side_by_side(runs: int, **contenders) -> dict[str, float]:
    """Median seconds of each contender, run in turns (a, b, a, b, ...) so noise hits all alike."""
    times = {name: [] for name in contenders}
    for _ in range(runs):
        for name, fn in contenders.items():
            times[name].append(timed(fn))
    return {name: statistics.median(ts) for name, ts in times.items()}


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores, {mem:.0f} GiB"


class Report:
    def __init__(self, title: str):
        self.title = title
        self.rows: list[tuple[str, str, str, str]] = []

    def add(self, what: str, measured: str, target: str = "", verdict: str = "") -> None:
        self.rows.append((what, measured, target, verdict))
        print(f"  {what}: {measured}" + (f"   (target {target}: {verdict})" if target else ""), flush=True)

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| measurement | result | target | |", "|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in self.rows]
        return "\n".join(lines) + "\n"


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"
