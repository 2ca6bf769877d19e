"""Manifests merged in the driver's JVM, without a Python object per entry.

lakerules.write.manifest_merge decides which manifests a commit merges; merging one bin means
reading every entry of its manifests and writing them again (as EXISTING, or as this commit's
added and deleted entries). Through pyiceberg's Avro reader and writer that is a Python object
per entry, read and written: seconds for a table of 100,000 files, at every commit that merges.
Here the shim's ``ManifestMerge`` does it in the JVM: each entry's Avro record is carried over
with its data file as written, only its status, snapshot id and sequence numbers set, into a new
manifest with the Avro schema and header metadata pyiceberg's writer would give it (from that
writer, lakerules.iceberg.pyiceberg_edge.manifest_header), the same entries pyiceberg's path
writes. The JVM hands back the manifest-list entry's counts and, per partition field, the
distinct values written, whose summaries pyiceberg's own PartitionFieldStats compute.

Used for format-version 2 tables whose statement runs with a session whose JVM has the shim,
for the Avro codecs Avro's Java library writes; otherwise (format versions 1 and 3, no session)
the Python path writes the manifest, as before.
"""

from __future__ import annotations

import json
import uuid
from decimal import Decimal

from pyiceberg.avro.codecs import CODEC_MAPPING_ICEBERG_TO_AVRO
from pyiceberg.manifest import UNASSIGNED_SEQ, ManifestContent, ManifestFile, PartitionFieldStats
from pyiceberg.table import TableProperties
from pyiceberg.types import (
    BinaryType, BooleanType, DecimalType, DoubleType, FixedType, FloatType, StringType, UUIDType,
)
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

from lakerules.iceberg import pyiceberg_edge as edge
from lakerules.scan import manifest_columns
from lakerules.spark import current, jvm as J, manifest_io

CODECS = ("null", "deflate", "snappy", "zstandard", "bzip2", "xz")
BULK_FORMAT_VERSION = 2


def session_for(producer):
    """The session whose JVM merges for ``producer``'s commit, or None (the Python path)."""
    if producer.metadata.format_version != BULK_FORMAT_VERSION:
        return None
    spark = current.session()
    if spark is None:
        return None
    try:
        return spark if J.shim_loaded(spark) else None
    except Exception:  # noqa: BLE001 - a session without a live JVM: the Python path
        return None


def merged(spark, producer, writer, content: ManifestContent, spec_id: int, manifests: list) -> list[ManifestFile]:
    """One manifest with the entries of ``manifests`` written by the JVM through ``writer``'s
    header and output file (a new manifest of ``producer``), as lakerules.write.manifest_merge's
    Python path writes them; [] when no entry is left."""
    schema, meta, output = edge.manifest_header(writer)
    codec = meta.pop("avro.codec", TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT)
    codec = CODEC_MAPPING_ICEBERG_TO_AVRO.get(codec, codec)
    if codec not in CODECS:
        raise ValueError(f"lakerules: no JVM writer for the Avro codec {codec!r}")
    avro_schema = json.dumps(AvroSchemaConversion().iceberg_to_avro(schema, schema_name="manifest_entry"))
    inputs = [(m.manifest_path, m.sequence_number, m.added_snapshot_id) for m in manifests]
    out = json.loads(manifest_io.merge_manifests(spark, inputs, output.location, avro_schema, meta, codec, producer.snapshot_id))
    if out["entries"] == 0:
        return []
    spec = producer.spec(spec_id)
    partition_type = spec.partition_type(producer.metadata.schema())
    summaries = []
    for field, values in zip(partition_type.fields, out["partitions"]):
        stats = PartitionFieldStats(field.field_type)
        convert = _value(field.field_type)
        for v in values:
            stats.update(convert(v))
        summaries.append(stats.to_summary())
    added, existing, deleted = out["files"]
    added_rows, existing_rows, deleted_rows = out["rows"]
    written = ManifestFile.from_args(
        manifest_path=output.location,
        manifest_length=out["length"],
        partition_spec_id=spec.spec_id,
        content=content,
        sequence_number=UNASSIGNED_SEQ,
        min_sequence_number=out["min_sequence"] if out["min_sequence"] is not None else UNASSIGNED_SEQ,
        added_snapshot_id=producer.snapshot_id,
        added_files_count=added,
        existing_files_count=existing,
        deleted_files_count=deleted,
        added_rows_count=added_rows,
        existing_rows_count=existing_rows,
        deleted_rows_count=deleted_rows,
        partitions=summaries,
        key_metadata=None,
    )
    manifest_columns.carry(written, manifests, producer.snapshot_id)  # the next planning need not read it
    return [written]


def _value(iceberg_type):
    """How a distinct partition value the JVM wrote as JSON becomes the value pyiceberg's
    manifest reader gives (and its writer's PartitionFieldStats compare)."""

    def raw(v):
        if isinstance(v, dict):
            return bytes.fromhex(v["hex"]) if "hex" in v else float(v["float"])
        return v

    if isinstance(iceberg_type, (FloatType, DoubleType)):
        return lambda v: None if v is None else float(raw(v))
    if isinstance(iceberg_type, DecimalType):
        scale = iceberg_type.scale
        return lambda v: None if v is None else Decimal(int.from_bytes(raw(v), "big", signed=True)).scaleb(-scale)
    if isinstance(iceberg_type, UUIDType):
        return lambda v: None if v is None else uuid.UUID(bytes=raw(v))
    if isinstance(iceberg_type, (FixedType, BinaryType)):
        return lambda v: None if v is None else raw(v)
    if isinstance(iceberg_type, (BooleanType, StringType)):
        return raw
    return raw  # int, long, date, time, timestamps: the number itself
