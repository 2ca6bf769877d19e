"""Shared benchmark helpers: one session, side-by-side timing, result records."""

from __future__ import annotations

import os
import shutil
import statistics
import time
from pathlib import Path

import lakerules

OUT = Path(__file__).resolve().parent / "out"


def session(name: str, keep: tuple[str, ...] = ()):
    """A fresh SparkSession whose warehouse is bench/out/<name>/warehouse. bench/out/<name> is
    emptied first, but for the entries named in ``keep`` (a module's caches)."""
    out = OUT / name
    if out.is_dir():
        for child in out.iterdir():
            if child.name in keep:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink()
    out.mkdir(parents=True, exist_ok=True)
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


def local_path(path: str) -> str:
    """A local file's path without its file: scheme (as Iceberg's metadata names it), as pyarrow and
    the shutil functions open it."""
    return path.replace("file://", "").replace("file:", "")


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def side_by_side(runs: int, warmup: int = 1, **contenders) -> dict[str, float]:
    """Median seconds of each contender, run in turns so noise hits all alike, the order rotating
    each turn (a, b, c, then b, c, a, ...: measured on the late materialization grid, a fixed
    order gave the first contender 5-10% shorter times than the same query run later in the
    turn), after `warmup` untimed turns (the first runs in a JVM compile code and fill caches,
    which would otherwise count against whichever contender goes first)."""
    for _ in range(warmup):
        for fn in contenders.values():
            fn()
    times = {name: [] for name in contenders}
    names = list(contenders)
    for turn in range(runs):
        k = turn % len(names)
        for name in names[k:] + names[:k]:
            times[name].append(timed(contenders[name]))
    return {name: statistics.median(ts) for name, ts in times.items()}


def machine() -> str:
    """nproc, memory and CPU model of this machine."""
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = ", " + line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"nproc {nproc}, {mem:.1f} GiB RAM{model}"


def load() -> str:
    """The 1-minute load average (other work on the machine shows here)."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


class Report:
    def __init__(self, title: str):
        self.title = title
        self.rows: list[tuple[str, str, str, str]] = []
        self.notes: list[str] = []

    def add(self, what: str, measured: str, target: str = "", verdict: str = "") -> None:
        self.rows.append((what, measured, target, verdict))
        print(f"  {what}: {measured}" + (f"   (target {target}: {verdict})" if target else ""), flush=True)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| measurement | result | target | |", "|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in self.rows]
        if self.notes:
            lines += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"
