"""The shim's manifest calls on the driver (Py4J): manifests decoded into Arrow columns
(lakerules.scan.manifest_columns) and merged (lakerules.write.manifest_bulk) in the JVM."""

from __future__ import annotations

import os
import shutil
import struct
import tempfile

import pyarrow as pa
from pyspark.sql import SparkSession

from lakerules.spark.jclasses import jclass
from lakerules.spark.jvm import nul_joined


_MAGIC = b"LRMC\x01\x00\x00\x00"
_ENTRY_COLUMNS = (("status", pa.int32()), ("snapshot_id", pa.int64()), ("sequence_number", pa.int64()),
                  ("file_sequence_number", pa.int64()), ("content", pa.int32()), ("file_path", pa.string()),
                  ("file_format", pa.string()), ("record_count", pa.int64()), ("file_size_in_bytes", pa.int64()),
                  ("key_metadata", pa.binary()), ("sort_order_id", pa.int32()), ("split_offsets", pa.binary()),
                  ("equality_ids", pa.binary()), ("column_sizes", pa.binary()), ("value_counts", pa.binary()),
                  ("null_value_counts", pa.binary()), ("nan_value_counts", pa.binary()),
                  ("lower_bounds", pa.binary()), ("upper_bounds", pa.binary()))
_KINDS = {"int": pa.int32(), "long": pa.int64(), "float": pa.float32(), "double": pa.float64(),
          "boolean": pa.bool_(), "string": pa.string()}


def manifest_columns(spark: SparkSession, paths: list[str], partition_kinds: list[str], bounds: list[tuple[int, str]]):
    """The live entries of each manifest of ``paths`` (all of one partition spec, whose partition
    fields have ``partition_kinds``) as an Arrow table each, decoded in the driver's JVM in one call
    (the shim's io.lakerules.functions.ManifestColumns; lakerules.scan.manifest_columns says what
    they hold). They cross in a temporary file of Arrow's buffers, wrapped here without a copy:
    Py4J's transfer of a byte array costs more than decoding."""
    folder = tempfile.mkdtemp(prefix="lakerules-manifests-")
    out = os.path.join(folder, "columns.bin")
    try:
        counts = jclass(spark, "io.lakerules.functions.ManifestColumns").read(
            spark._jsparkSession, nul_joined(paths), ",".join(partition_kinds),
            ",".join(f"{fid}:{kind}" for fid, kind in bounds), out)
        with open(out, "rb") as f:
            data = pa.py_buffer(f.read())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    fields = [pa.field(name, kind) for name, kind in _ENTRY_COLUMNS]
    fields += [pa.field(f"p{k}", _KINDS.get(kind, pa.binary())) for k, kind in enumerate(partition_kinds)]
    for fid, kind in bounds:
        fields += [pa.field(f"{side}_{fid}", _KINDS.get(kind, pa.binary())) for side in ("lower", "upper")]
    schema = pa.schema(fields)
    if data.size < len(_MAGIC) or data[:len(_MAGIC)].to_pybytes() != _MAGIC:
        raise OSError("lakerules: the shim's manifest columns are not in the layout this reader knows")
    sizes = [int(c) for c in counts.split(",")]
    buffers = _Buffers(data, len(_MAGIC))
    table = pa.Table.from_arrays([buffers.array(f.type, sum(sizes)) for f in fields], schema=schema)
    tables, at = [], 0
    for n in sizes:
        tables.append(table.slice(at, n))
        at += n
    return tables


class _Buffers:
    """The buffers ColumnBuffers wrote: each its length (int64, little-endian), its bytes, zeros to
    a multiple of 8."""

    def __init__(self, data: pa.Buffer, at: int):
        self._data, self._at = data, at

    def _next(self) -> pa.Buffer | None:
        (n,) = struct.unpack_from("<q", self._data, self._at)
        start = self._at + 8
        if n < 0 or start + n > self._data.size:
            raise OSError("lakerules: the shim's manifest columns end early")
        self._at = start + n + (-n % 8)
        return self._data.slice(start, n) if n else None

    def array(self, kind: pa.DataType, n: int) -> pa.Array:
        validity = self._next()
        if pa.types.is_string(kind) or pa.types.is_binary(kind):
            offsets, values = self._next(), self._next()
            return pa.Array.from_buffers(kind, n, [validity, offsets, values or pa.py_buffer(b"")])
        return pa.Array.from_buffers(kind, n, [validity, self._next() or pa.py_buffer(b"")])


def merge_manifests(spark: SparkSession, inputs: list[tuple[str, int, int]], output: str, avro_schema: str,
                    meta: dict[str, str], codec: str, snapshot_id: int) -> str:
    """Merge manifests into a new one at ``output`` in the driver's JVM (the shim's
    io.lakerules.functions.ManifestMerge; lakerules.write.manifest_bulk says what it writes).
    ``inputs``: (path, sequence number, added snapshot id) of each manifest. Returns its JSON."""
    for path, sequence, snapshot in inputs:
        if sequence is None or snapshot is None:
            raise ValueError(f"lakerules: manifest {path} has no sequence number or snapshot id to inherit")
    return jclass(spark, "io.lakerules.functions.ManifestMerge").merge(
        spark._jsparkSession, nul_joined(p for p, _, _ in inputs), ",".join(str(s) for _, s, _ in inputs),
        ",".join(str(a) for _, _, a in inputs), output, avro_schema, "\0".join(x for k, v in meta.items() for x in (k, v)),
        codec, snapshot_id)
