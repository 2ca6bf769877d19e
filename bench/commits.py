"""Commit cost against table size: N single-row appends through lakerules.write.commit.append.

    PYTHONPATH=python .venv/bin/python bench/commits.py [--commits 1000] [--property k=v ...]

No Spark: each commit appends one tiny Parquet file (one row, written by pyarrow with Iceberg
field ids) to a table on the embedded SQLite catalog under bench/out/commits/, as an INSERT of
one row would after Spark wrote its file. Prints the time of each commit around the 10th and the
last, and the table's manifest count, with and without manifest merging.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

OUT = Path(__file__).resolve().parent / "out" / "commits"


def tiny_file(table, i: int):
    """One row (id=i, p=i % 4) in its own Parquet file, as a DataFile of the table's spec."""
    from pyiceberg.io.pyarrow import compute_statistics_plan, data_file_statistics_from_parquet_metadata, \
        parquet_path_to_id_mapping
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    schema = table.schema()
    arrow = pa.table({"id": pa.array([i], pa.int64()), "p": pa.array([i % 4], pa.int32())},
                     schema=schema.as_arrow())
    path = f"{table.location().rstrip('/')}/data/p={i % 4}/{uuid.uuid4().hex}.parquet"
    with table.io.new_output(path).create() as out:
        pq.write_table(arrow, out)
    with table.io.new_input(path).open() as f:
        meta = pq.read_metadata(f)
    stats = data_file_statistics_from_parquet_metadata(
        meta, compute_statistics_plan(schema, table.metadata.properties), parquet_path_to_id_mapping(schema))
    f = DataFile.from_args(content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET,
                           partition=Record(i % 4), file_size_in_bytes=len(table.io.new_input(path)),
                           **stats.to_serialized_dict())
    f.spec_id = table.metadata.default_spec_id
    return f


def run(commits: int, properties: dict[str, str], label: str, keep: int | None = None) -> dict:
    from pyiceberg.catalog import load_catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import IntegerType, LongType, NestedField

    import lakerules
    from lakerules.write import commit

    warehouse = OUT / label
    shutil.rmtree(warehouse, ignore_errors=True)
    catalog = load_catalog("bench", **lakerules.embedded_catalog(warehouse))
    catalog.create_namespace("db")
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "p", IntegerType(), required=False))
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "p"))
    table = catalog.create_table("db.t", schema, partition_spec=spec,
                                 properties={"format-version": "2", **properties})
    # the catalog's part of each commit: it reads, copies and writes the whole metadata JSON
    in_catalog = []
    real = catalog.commit_table

    def timed_commit(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            in_catalog.append(time.perf_counter() - start)

    catalog.commit_table = timed_commit
    times, counts, catalog_times = [], [], []
    for i in range(commits):
        f = tiny_file(table, i)  # the statement's own work: not timed
        in_catalog.clear()
        start = time.perf_counter()
        commit.append(table, [f])
        times.append(time.perf_counter() - start)
        catalog_times.append(sum(in_catalog))
        counts.append(len(table.current_snapshot().manifests(table.io)))
        if keep and len(table.metadata.snapshots) >= 2 * keep:  # untimed: the history trimmed
            old = [s.snapshot_id for s in table.metadata.snapshots[:-keep]]
            table.maintenance.expire_snapshots().by_ids(old).commit()
    rows = table.scan().to_arrow().num_rows
    return {"times": times, "counts": counts, "rows": rows, "catalog": catalog_times,
            "snapshots": len(table.metadata.snapshots)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--commits", type=int, default=1000)
    p.add_argument("--property", action="append", default=[], help="table property k=v (repeatable)")
    p.add_argument("--label", default="default")
    p.add_argument("--keep", type=int, default=None,
                   help="expire snapshots (untimed) to keep between KEEP and 2*KEEP in the history")
    args = p.parse_args(argv)
    props = dict(kv.split("=", 1) for kv in args.property)
    load = os.getloadavg()[0]
    r = run(args.commits, props, args.label, args.keep)
    t, c, n, cat = r["times"], r["counts"], args.commits, r["catalog"]
    ms = [round(x * 1000, 1) for x in t]
    print(f"{args.label} {props or '(defaults)'}: {n} commits, {r['rows']} rows read back, "
          f"load {load:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"  commit 10: {ms[9]} ms; commit {n}: {ms[-1]} ms; ratio {t[-1] / t[9]:.2f}; snapshots at the end: "
          f"{r['snapshots']}")
    own = [a - b for a, b in zip(t, cat)]
    print(f"  outside the catalog's commit_table: commit 10 {own[9] * 1000:.1f} ms, commit {n} {own[-1] * 1000:.1f} ms; "
          f"median of 10-19 {statistics.median(own[9:19]) * 1000:.1f} ms, of the last 10 "
          f"{statistics.median(own[-10:]) * 1000:.1f} ms")
    print(f"  in the catalog's commit_table: median of 10-19 {statistics.median(cat[9:19]) * 1000:.1f} ms, "
          f"of the last 10 {statistics.median(cat[-10:]) * 1000:.1f} ms")
    print(f"  median of commits 10-19: {statistics.median(ms[9:19])} ms; of the last 10: {statistics.median(ms[-10:])} ms; "
          f"ratio {statistics.median(t[-10:]) / statistics.median(t[9:19]):.2f}")
    print(f"  mean of commits 1-100: {statistics.mean(ms[:100]):.1f} ms; of the last 100: {statistics.mean(ms[-100:]):.1f} ms")
    print(f"  slowest commit: {max(ms)} ms (commit {ms.index(max(ms)) + 1})")
    # a merge commit lists fewer manifests than the commit before it did
    merge = [i for i in range(1, n) if c[i] < c[i - 1]]
    plain = [i for i in range(n) if i not in set(merge)]
    early, late = [i for i in plain if 9 <= i < 30], plain[-100:]
    if early and late:
        print(f"  commits that merged nothing: median of commits 10-30 {statistics.median(ms[i] for i in early)} ms, "
              f"of the last 100 {statistics.median(ms[i] for i in late)} ms")
    if len(merge) >= 6:
        print(f"  merging commits ({len(merge)}): commits {[i + 1 for i in merge[:3]]} took "
              f"{[ms[i] for i in merge[:3]]} ms, commits {[i + 1 for i in merge[-3:]]} {[ms[i] for i in merge[-3:]]} ms")
    print(f"  manifests after the last commit: {c[-1]}; most at any point: {max(c)}")
    print(f"  last 12 commit times (ms): {ms[-12:]}; manifests: {c[-12:]}")


if __name__ == "__main__":
    main()
