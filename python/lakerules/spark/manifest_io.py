"""The shim's manifest calls on the driver (Py4J): manifests decoded into Arrow columns
(lakerules.scan.manifest_columns) and merged (lakerules.write.manifest_bulk) in the JVM."""

from __future__ import annotations

import os
import shutil
import tempfile

import pyarrow as pa
from pyspark.sql import SparkSession

from lakerules.spark.jclasses import jclass


def manifest_columns(spark: SparkSession, paths: list[str], partition_kinds: list[str], bounds: list[tuple[int, str]]):
    """The live entries of each manifest of ``paths`` (all of one partition spec, whose partition
    fields have ``partition_kinds``) as an Arrow table each, decoded in the driver's JVM in one call
    (the shim's io.lakerules.functions.ManifestColumns; lakerules.scan.manifest_columns says what
    they hold). They cross in a temporary file, as PySpark's own Arrow batches do: Py4J's
    transfer of a byte array costs more than decoding."""
    folder = tempfile.mkdtemp(prefix="lakerules-manifests-")
    out = os.path.join(folder, "columns.arrow")
    try:
        counts = jclass(spark, "io.lakerules.functions.ManifestColumns").read(
            spark._jsparkSession, "\0".join(paths), ",".join(partition_kinds),
            ",".join(f"{fid}:{kind}" for fid, kind in bounds), out)
        with pa.OSFile(out) as f:
            table = pa.ipc.open_stream(f).read_all()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    tables, at = [], 0
    for n in (int(c) for c in counts.split(",")):
        tables.append(table.slice(at, n))
        at += n
    return tables


def merge_manifests(spark: SparkSession, inputs: list[tuple[str, int, int]], output: str, avro_schema: str,
                    meta: dict[str, str], codec: str, snapshot_id: int) -> str:
    """Merge manifests into a new one at ``output`` in the driver's JVM (the shim's
    io.lakerules.functions.ManifestMerge; lakerules.write.manifest_bulk says what it writes).
    ``inputs``: (path, sequence number, added snapshot id) of each manifest. Returns its JSON."""
    for path, sequence, snapshot in inputs:
        if sequence is None or snapshot is None:
            raise ValueError(f"lakerules: manifest {path} has no sequence number or snapshot id to inherit")
    return jclass(spark, "io.lakerules.functions.ManifestMerge").merge(
        spark._jsparkSession, "\0".join(p for p, _, _ in inputs), ",".join(str(s) for _, s, _ in inputs),
        ",".join(str(a) for _, _, a in inputs), output, avro_schema, "\0".join(x for k, v in meta.items() for x in (k, v)),
        codec, snapshot_id)
