"""Writing data files: Spark executors write Parquet, the driver reads footers and commits.

1. The rows (already cast to the table's schema by Spark's analyzer) get each column's Iceberg
   field id, and one directory column per partition field, computed by JVM expressions.
2. Spark writes Parquet (TIMESTAMP_MICROS, field ids) under a fresh directory of the table's
   data folder, one directory level per partition field.
3. The driver lists what was written, reads each footer for the Iceberg column metrics, and
   recovers each file's partition from its directory.
4. One commit. If anything fails before the commit lands, the written files are deleted and the
   table is as it was.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import data_file_statistics_from_parquet_metadata, parquet_path_to_id_mapping
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema, index_by_name
from pyiceberg.table import Table
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakerules.write import commit, metrics, parquet_props, order as write_order, row_delta
from lakerules.spark import jvm as J, local_files, progress, shared
from lakerules.iceberg import format_version, names, options, partitioning, paths, schema as schemas
from lakerules.errors import LakeError, NotSupported
from lakerules.iceberg import replace
from lakerules.plan.expressions import to_iceberg
from lakerules.scan.row_files import every_row_matches, has_negation
from lakerules.iceberg.paths import hidden

FOOTER_THREADS = 8
log = logging.getLogger("lakerules")


# ---- statements ---------------------------------------------------------------------------


def run_write(ctx, node, query_plan):
    """INSERT INTO / INSERT OVERWRITE / df.writeTo(...) on a lake table."""
    t = node.table
    table = ctx.catalogs.load_for_write(t, ctx.conf)
    removed = []
    if table.current_snapshot() is not None:
        # the commit reads the table's manifest list: one missing or damaged fails here, before
        # any file is written
        table.current_snapshot().manifests(table.io)
    if node.mode == "overwrite":
        removed = _files_to_overwrite(table, node.delete_condition)  # before writing: fail early
    summary = options.write_summary(t, dict(node.options))
    level, start = options.write_validation(t, dict(node.options))
    read = table.current_snapshot()
    if start is not None:
        _check_validate_from(t, table, start)
    written = write_data_files(ctx, t.catalog, table, J.dataframe(ctx.spark, query_plan))
    try:
        if node.mode == "append":
            commit.append(table, written, summary)
        elif node.mode == "overwrite":
            if level is not None or start is not None:
                table = _validated(ctx, t, table, read, start, level, removed, node.delete_condition, None)
            commit.overwrite(table, removed, written, summary)
        elif node.mode == "dynamic":
            replaced = _files_in_partitions(table, written)
            if level is not None or start is not None:
                keys = {(f.spec_id, tuple(f.partition)) for f in written}
                table = _validated(ctx, t, table, read, start, level, replaced, None, keys)
                replaced = _files_in_partitions(table, written) if level == "snapshot" else replaced
            commit.overwrite(table, replaced, written, summary)
        else:
            raise NotSupported(f"lakerules: write mode {node.mode} is not supported")
    except BaseException as e:
        discard(table, written, e)
        raise
    return J.empty_result(ctx.spark)


def _check_validate_from(t, table: Table, start: int) -> None:
    """validate-from-snapshot-id must name a snapshot of the history the write commits onto."""
    from pyiceberg.table.snapshots import ancestors_of

    head = table.current_snapshot()
    if head is None or start not in {s.snapshot_id for s in ancestors_of(head, table.metadata)}:
        raise LakeError(f"lakerules: writing {t}: write option {options.VALIDATE_FROM} {start} is not a snapshot "
                        "of the history this write commits onto")


def _validated(ctx, t, table: Table, read, start, level, replaced: list, condition, partitions):
    """The overwrite's conflict validation from ``start`` (default: the snapshot it read) to the
    branch head as it is now (the table loaded again, returned to commit on): a removed file gone
    or given new deletes meanwhile is a conflict at both levels; under serializable, so is data
    added where the overwrite writes (rows matching ``condition``, or files in ``partitions``)."""
    fresh = ctx.catalogs.load_for_write(t, ctx.conf)
    base = start if start is not None else (read.snapshot_id if read is not None else None)
    if start is not None:
        _check_validate_from(t, fresh, start)
    conflict_filter = None
    if level != "snapshot" and condition is not None:
        conflict_filter = to_iceberg(condition)[0]
    row_delta.validate_overwrite(fresh, base, replaced, conflict_filter, partitions if level != "snapshot" else None)
    return fresh


def run_ctas(ctx, node, query_plan):
    """CREATE TABLE ... AS SELECT / [CREATE OR] REPLACE TABLE ... AS SELECT on a lake catalog.
    A replace of an existing table is one commit on it (lakerules.iceberg.replace): the new rows are
    written as the replacement's files first, and if anything fails before the commit the table
    is as it was."""
    t = node.table
    paths.check_identifier(t.namespace, t.name)
    summary = options.write_summary(t, dict(node.options), ctas=True)
    catalog = ctx.catalogs.get(t.catalog)
    exists = catalog.table_exists(t.identifier)
    if exists and node.if_not_exists:
        return J.empty_result(ctx.spark)
    if exists and not node.replace:
        raise LakeError(f"lakerules: table {t} already exists")
    if not exists and node.replace and not node.or_create:
        raise LakeError(f"lakerules: table {t} does not exist; use CREATE OR REPLACE TABLE")
    df = J.dataframe(ctx.spark, query_plan)
    args = {
        "namespace": list(t.namespace),
        "name": t.name,
        "schema": df.schema.json(),
        "partitioning": list(node.partitioning),
        "properties": dict(node.properties),
    }
    # DataFrameWriter.saveAsTable without format() names the session's default source
    default_provider = ctx.spark.conf.get("spark.sql.sources.default", "parquet")
    if exists:
        replacement = replace.plan_replace(t.catalog, catalog, args, default_provider)
        table = replacement.staged
        written = write_data_files(ctx, t.catalog, table, df)
        try:
            commit.replace_table(replacement, written, summary)
        except BaseException as e:
            discard(table, written, e)
            raise
        return J.empty_result(ctx.spark)
    if args["properties"].get("provider") == default_provider:
        args["properties"].pop("provider")
    table = replace.create_table(t.catalog, catalog, args, format_version.default_for_new_tables(
        ctx.spark.conf.get(format_version.DEFAULT_SETTING, None)))
    written: list[DataFile] = []
    try:
        written = write_data_files(ctx, t.catalog, table, df)
        commit.append(table, written, summary)
    except BaseException as e:
        # CTAS is atomic for the user: no table is left behind when its rows could not be written
        # (unless the commit may have landed: then the table may hold them, and stays)
        if not commit.commit_may_have_landed(e):
            delete_files(table, written)
            _purge_quietly(catalog, t.identifier)
        raise
    return J.empty_result(ctx.spark)


# ---- data files ---------------------------------------------------------------------------


def write_data_files(ctx, catalog_name: str, table: Table, df: DataFrame, fields=None) -> list[DataFile]:
    """Write df (columns in table order, or those of ``fields``) as data files of the table's current spec."""
    progress.step(ctx.spark, "write data files")
    return write_files(ctx.spark, catalog_name, table, df, fields=fields)


def write_files(spark, catalog_name: str, table: Table, df: DataFrame, *, fields=None,
                content: DataFileContent = DataFileContent.DATA, equality_ids=None,
                cluster: bool = False, order_by: tuple[str, ...] = (), distribute: bool = True,
                sort: tuple | None = None, sort_order_id: int | None = None) -> list[DataFile]:
    """Write df as files of the table's current spec: its columns are ``fields`` (default: all the
    table's columns), in order; ``content`` and ``equality_ids`` say what kind of file it is.
    ``cluster`` shuffles rows by partition first, so each partition is one task's one file (for
    delete files: few and small). ``order_by`` names columns of df after those, which order the
    rows within each written file and are not written. Without ``order_by``, data files follow the
    table's write order (lakerules.write.order): distributed by its ``write.distribution-mode``
    (unless ``cluster``, or not ``distribute``: the caller chose the tasks) and sorted within
    each file by its sort order. ``sort`` (Spark sort columns over the table's names) replaces the
    table's sort order within each file, recorded as ``sort_order_id`` (rewrite_data_files' sort)."""
    schema, spec = table.schema(), table.spec()
    fields = fields if fields is not None else schema.as_struct().fields
    if len(df.columns) != len(fields) + len(order_by):
        raise LakeError(f"lakerules: writing {len(df.columns)} columns into {names.table_name(table)}, which has {len(fields)}")
    # df's columns by position as the table's (types, names, field ids), order_by's after them; built
    # in the JVM, so that an error in the query's own expressions points at the query, not here
    out = J.cast_columns(spark, df.select(*[df[J.quote(n)] for n in df.columns[:len(fields)]],
                                          *[df[J.quote(c)] for c in order_by]),
                         [(f.name, schemas.iceberg_type_to_spark(f.field_type, with_ids=True), {schemas.FIELD_ID: f.field_id})
                          for f in fields])
    part_cols = partitioning.partition_columns(spec, schema, catalog_name, {f.name for f in fields} | set(order_by))
    # The partition columns read the source columns by their table names, so select those first.
    if part_cols:
        out = out.select("*", *[p.expr for p in part_cols])
    order = write_order.layout(table, catalog_name) if content == DataFileContent.DATA and not order_by else None
    if sort is not None:
        order = write_order.Layout("none", tuple(sort), sort_order_id)
    dirs = [J.column(p.dir_name) for p in part_cols]
    if cluster:
        out = out.repartition(*dirs) if part_cols else out.coalesce(1)
    elif order is not None and distribute:
        if order.mode == "hash" and part_cols:
            out = out.repartition(*dirs)
        elif order.mode == "range" and (part_cols or order.sort):
            out = out.repartitionByRange(*dirs, *order.sort)
    if order_by:
        # Sorted by the partition columns first, as Spark's writer needs: it then adds no sort of its own.
        out = out.sortWithinPartitions(*dirs, *order_by).drop(*order_by)
    elif order is not None and order.sort:
        out = out.sortWithinPartitions(*dirs, *order.sort)

    target = _new_target(table)
    writer = (
        out.write.mode("errorifexists")
        .options(**_parquet_options(table, content), **local_files.local_write_options(spark, target))
        .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
    )
    if part_cols:
        writer = writer.partitionBy(*[p.dir_name for p in part_cols])
    try:
        _save_parquet(writer, target, fields)
        listed = _list_files(spark, target)
        written = _data_files(table, Schema(*fields), spec, part_cols, target, listed, content, equality_ids,
                              sort_order_id=order.sort_order_id if order is not None else None)
        if not written:  # no row: the folder holds at most an empty file, which nothing will name
            _delete_dir(spark, table, target)
        return written
    except BaseException:
        _delete_dir(spark, table, target)
        raise


def _save_parquet(writer, target: str, fields) -> None:
    """Spark's Parquet writer; for columns holding lists or maps, the shim's variant of it, which
    also gives their elements, keys and values their Iceberg field ids (Spark's writes ids of
    struct fields only, and readers that resolve by id, such as DuckDB, then miss those values)."""
    ids = schemas.nested_ids(fields)
    if ids is None:
        writer.parquet(target)
    else:
        writer.format(shared.NESTED_IDS_FORMAT_CLASS).option(shared.NESTED_IDS_OPTION, ids).save(target)


POSITION_DELETE_FIELDS = (
    NestedField(2147483546, "file_path", StringType(), required=True),
    NestedField(2147483545, "pos", LongType(), required=True),
)
PART_COL = "__lakerules_part"


def _parquet_options(table: Table, content: DataFileContent) -> dict[str, str]:
    """Spark Parquet writer options from the table's write.parquet.* properties (lakerules.write.parquet_props):
    data files may name bloom filter columns; delete files read write.delete.parquet.* first."""
    if content == DataFileContent.DATA:
        return parquet_props.writer_options(table.properties, set(index_by_name(table.schema())))
    return parquet_props.delete_writer_options(table.properties)


def _new_target(table: Table) -> str:
    """A fresh folder for a statement's files, in the table's data folder (write.data.path, else
    <location>/data)."""
    if str(table.properties.get("write.object-storage.enabled", "false")).strip().lower() == "true":
        raise NotSupported(f"lakerules: writing {'.'.join(table.name())}: write.object-storage.enabled is not "
                           "supported (lakerules writes every file under the table's data folder); unset it, or set "
                           "write.data.path")
    write_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:12]}"
    data = table.properties.get("write.data.path") or f"{table.location().rstrip('/')}/data"
    return f"{data.rstrip('/')}/{write_id}"


def _list_files(spark, target: str) -> list[tuple[str, int]]:
    """(path relative to target, size) of every Parquet file under target: one listing call
    through pyarrow's filesystem where it knows the scheme, else through Hadoop's. Hidden paths
    are skipped at every level, not only in the file's name: a task attempt that Spark gave up on
    (a speculative copy, a zombie after its executor was lost) may still write its files under
    _temporary/ after the job committed, and they must not be committed a second time."""
    from pyarrow import fs as pafs

    if re.match(r"^(file:|/)", target):
        # a local path as written: FileSystem.from_uri would percent-decode it ('%20' -> ' '),
        # where Spark's writer and pyiceberg take it literally
        filesystem, root = pafs.LocalFileSystem(), re.sub(r"^file:/*", "/", target)
    else:
        try:
            filesystem, root = pafs.FileSystem.from_uri(target)
        except Exception:  # noqa: BLE001 - a scheme pyarrow does not know: ask Hadoop
            return _list_files_hadoop(spark, target)
    root = root.rstrip("/")
    out = []
    for info in filesystem.get_file_info(pafs.FileSelector(root, recursive=True)):
        relative = info.path[len(root) + 1:]
        if info.type != pafs.FileType.File or not _written(relative, target):
            continue
        out.append((relative, info.size))
    return sorted(out)


def _written(relative: str, target: str) -> bool:
    """Whether a listed file is one the write committed: a Parquet file on no hidden path. One
    hidden only by a partition folder (a name with '=' that starts with '.') is an error, not a
    file to skip: skipping it would lose its rows silently (hidden staging and _temporary/ folders
    of abandoned task attempts have no '=')."""
    if not relative.endswith(".parquet"):
        return False
    if not hidden(relative):
        return True
    parts = relative.split("/")
    if parts[-1].startswith((".", "_")) or any(hidden(p) and "=" not in p for p in parts[:-1]):
        return False
    raise LakeError(f"lakerules: the write to {target} made a file on a hidden path, {relative!r}, which no "
                    "reader would list; nothing was committed")


def _list_files_hadoop(spark, target: str) -> list[tuple[str, int]]:
    root, files = J.hadoop_list(spark, target)
    root = root.rstrip("/")
    out = []
    for full, length in files:
        relative = full[len(root) + 1:]
        if not _written(relative, target):
            continue
        out.append((relative, length))
    return sorted(out)


def _data_files(table: Table, schema: Schema, spec, part_cols, target: str, listed,
                content=DataFileContent.DATA, equality_ids=None, locate=None,
                sort_order_id: int | None = None) -> list[DataFile]:
    """DataFiles for written files; metrics per the columns written (``schema``). Each file's
    spec and partition come from its directory: decoded per the spec's partition columns, or
    by ``locate(directory) -> (spec_id, values)``."""
    properties = table.properties
    if content == DataFileContent.POSITION_DELETES:
        # Full file_path bounds, as Iceberg's writers keep them: a delete file whose bounds name one
        # data file applies to that file only; truncated bounds make it apply to its whole partition.
        properties = {**properties, f"write.metadata.metrics.column.{POSITION_DELETE_FIELDS[0].name}": "full"}
    stats_plan = metrics.statistics_plan(schema, properties)
    id_mapping = parquet_path_to_id_mapping(schema)

    def one(entry):
        relative, size = entry
        path = f"{target}/{relative}"
        with table.io.new_input(path).open() as f:
            metadata = pq.read_metadata(f)
        stats = data_file_statistics_from_parquet_metadata(_RawTemporal(metadata), stats_plan, id_mapping)
        directory = relative.rsplit("/", 1)[0] if "/" in relative else ""
        if locate is not None:
            spec_id, values = locate(directory)
        else:
            spec_id, values = spec.spec_id, partitioning.decode_path(part_cols, directory) if part_cols else ()
        data_file = DataFile.from_args(
            content=content,
            file_path=path,
            file_format=FileFormat.PARQUET,
            partition=Record(*values),
            file_size_in_bytes=size,
            sort_order_id=sort_order_id,
            spec_id=spec_id,
            equality_ids=list(equality_ids) if equality_ids else None,
            key_metadata=None,
            **stats.to_serialized_dict(),
        )
        data_file.spec_id = spec_id  # from_args drops it
        return data_file

    with ThreadPoolExecutor(FOOTER_THREADS) as pool:
        return [f for f in pool.map(one, listed) if f.record_count > 0]


class _RawTemporal:
    """A Parquet footer whose DATE and TIMESTAMP (microseconds) statistics are the integers stored
    (days, microseconds since the epoch), which Iceberg's metrics are. pyarrow gives them as Python
    dates and datetimes, which end at year 9999 (an OverflowError past it), where Spark's DATE and
    TIMESTAMP values, and Iceberg's, go on to years 5881580 and 294247."""

    def __init__(self, inner, kind: str = "file"):
        self._inner, self._kind = inner, kind

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def row_group(self, i):
        return _RawTemporal(self._inner.row_group(i), "row group")

    def column(self, i):
        return _RawTemporal(self._inner.column(i), "column")

    @property
    def statistics(self):
        stats = self._inner.statistics
        return _RawTemporal(stats, "statistics") if stats is not None and _integer_time(stats) else stats

    @property
    def min(self):
        return self._inner.min_raw

    @property
    def max(self):
        return self._inner.max_raw


def _integer_time(stats) -> bool:
    logical = stats.logical_type
    if logical is None or logical.type not in ("DATE", "TIMESTAMP"):
        return False
    return logical.type == "DATE" or '"timeUnit": "microseconds"' in logical.to_json()


def delete_files(table: Table, files: list[DataFile]) -> None:
    """Delete a statement's own new files, best effort, through the table's confinement (a
    path outside the table's location, or through a link, is skipped)."""
    if not files:
        return
    try:
        confined = paths.Confinement.of(table, f"clean-up of a failed write to {names.table_name(table)}")
        confined.delete(table.io, [f.file_path for f in files], strict=False)
    except Exception:  # noqa: BLE001 - best effort; orphan removal finds what is left
        log.warning("lakerules: could not delete the files of a failed write", exc_info=True)


def _purge_quietly(catalog, identifier) -> None:
    """Drop a table this statement created, deleting its files if it may (DROP TABLE ... PURGE's
    confinement); else drop it and keep the files. The statement's own error is what is raised."""
    from lakerules.iceberg import cleanup

    try:
        cleanup.purge_table(catalog, identifier)
    except LakeError:
        catalog.drop_table(identifier)


def discard(table: Table, files: list[DataFile], error: BaseException) -> None:
    """After a statement failed with error: delete the files it wrote, unless its commit may have
    landed (the table may name them; CALL ...remove_orphan_files removes them if it does not)."""
    if not commit.commit_may_have_landed(error):
        delete_files(table, files)


def _delete_dir(spark, table: Table, target: str) -> None:
    """Remove the folder a failed write made, through the table's confinement (best effort)."""
    try:
        paths.Confinement.of(table, f"clean-up of a failed write to {names.table_name(table)}").remove_tree(spark, target)
    except Exception as e:  # noqa: BLE001 - best effort cleanup after a failed write
        log.warning("lakerules: could not remove %s after a failed write (%s: %s)", target, type(e).__name__, e)


# ---- what an overwrite removes --------------------------------------------------------------


def _current_files(table: Table) -> list[DataFile]:
    if table.current_snapshot() is None:
        return []
    return [task.file for task in table.scan().plan_files()]


def _files_to_overwrite(table: Table, condition) -> list[DataFile]:
    """Data files whose rows all match the condition; an error if a file matches only in part."""
    expr, exact = to_iceberg(condition)
    if not exact:
        raise NotSupported(
            "lakerules: INSERT OVERWRITE with this condition is not supported: it must be made of "
            "comparisons of columns with constants"
        )
    if has_negation(expr):
        raise NotSupported(
            "lakerules: INSERT OVERWRITE with a negated condition (NOT, !=, NOT IN) is not supported yet: "
            "Iceberg's negations match rows whose column is NULL where SQL's do not, so the files to "
            "replace cannot be told from the metadata; nothing was written"
        )
    if expr == AlwaysTrue():
        return _current_files(table)
    if table.current_snapshot() is None:
        return []
    candidates = [task.file for task in table.scan(row_filter=expr).plan_files()]
    matches_whole = every_row_matches(table, expr)
    removed = []
    for f in candidates:
        if matches_whole(f):
            removed.append(f)
        else:
            raise LakeError(
                f"lakerules: cannot overwrite rows matching the condition: data file {f.file_path} has rows "
                "that match and rows that do not (overwrite by partition columns of the current spec)"
            )
    return removed


def _files_in_partitions(table: Table, written: list[DataFile]) -> list[DataFile]:
    """Dynamic overwrite: existing files in the same spec and partition as any file written."""
    keys = {(f.spec_id, tuple(f.partition)) for f in written}
    return [f for f in _current_files(table) if (f.spec_id, tuple(f.partition)) in keys]
