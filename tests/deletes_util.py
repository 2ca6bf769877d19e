"""Delete files written as another writer would: pyarrow Parquet with Iceberg field ids."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import compute_statistics_plan, data_file_statistics_from_parquet_metadata, parquet_path_to_id_mapping
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema

from lakerules.write import row_delta


def _field(name, type_, field_id, nullable=True):
    return pa.field(name, type_, nullable=nullable, metadata={b"PARQUET:field_id": str(field_id).encode()})


def _write(table, arrow: pa.Table, name: str) -> tuple[str, int, pq.FileMetaData]:
    path = f"{table.location().rstrip('/')}/data/{name}-{uuid.uuid4().hex}.parquet"
    with table.io.new_output(path).create() as out:
        pq.write_table(arrow, out)
    with table.io.new_input(path).open() as f:
        meta = pq.read_metadata(f)
    return path, table.io.new_input(path).__len__(), meta


def position_delete_file(table, rows: list[tuple[str, int]], partition, spec_id: int = 0,
                         path_bounds: bool = False) -> DataFile:
    rows = sorted(rows)
    arrow = pa.table(
        [pa.array([r[0] for r in rows], pa.string()), pa.array([r[1] for r in rows], pa.int64())],
        schema=pa.schema([_field("file_path", pa.string(), 2147483546, False), _field("pos", pa.int64(), 2147483545, False)]),
    )
    path, size, meta = _write(table, arrow, "pos-deletes")
    bounds = {}
    if path_bounds:  # full file_path bounds, as Iceberg's Java writer records them
        bounds = {"lower_bounds": {2147483546: min(r[0] for r in rows).encode()},
                  "upper_bounds": {2147483546: max(r[0] for r in rows).encode()}}
    f = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES, file_path=path, file_format=FileFormat.PARQUET,
        partition=partition, record_count=meta.num_rows, file_size_in_bytes=size, spec_id=spec_id,
        **bounds,
    )
    f.spec_id = spec_id
    return f


def equality_delete_file(table, columns: dict[str, list], partition, spec_id: int = 0) -> DataFile:
    schema = table.schema()
    fields, arrays = [], []
    for name, values in columns.items():
        field = schema.find_field(name)
        arrow_type = schema.as_arrow().field(name).type
        fields.append(_field(name, arrow_type, field.field_id))
        arrays.append(pa.array(values, arrow_type))
    arrow = pa.table(arrays, schema=pa.schema(fields))
    path, size, meta = _write(table, arrow, "eq-deletes")
    ids = [schema.find_field(n).field_id for n in columns]
    stats = data_file_statistics_from_parquet_metadata(
        meta, compute_statistics_plan(schema, table.properties), parquet_path_to_id_mapping(schema)
    )
    f = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES, file_path=path, file_format=FileFormat.PARQUET,
        partition=partition, file_size_in_bytes=size, spec_id=spec_id, equality_ids=ids,
        **stats.to_serialized_dict(),
    )
    f.spec_id = spec_id
    return f


def commit_deletes(catalog, name: str, delete_files: list[DataFile]) -> None:
    row_delta.commit(catalog.load_table(name), [], delete_files)
