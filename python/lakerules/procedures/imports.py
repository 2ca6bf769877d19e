"""Iceberg's procedures that bring files or tables from elsewhere into a lake catalog.

    CALL lake.system.add_files(table => 'db.t', source_table => '`parquet`.`/path/to/files`'
                               [, partition_filter => map('k', 'v')] [, check_duplicate_files => true]
                               [, parallelism => N])
    CALL lake.system.register_table(table => 'db.t', metadata_file => '/path/v3.metadata.json')

add_files registers existing Parquet files (a file, or every Parquet file below a folder, hidden
files and folders, ``_*`` and ``.*``, skipped) as data files of the table in one append snapshot,
with the column metrics read from each file's footer (as the table's metrics settings ask).
lakerules reads columns by Iceberg field id, so a file whose columns carry no field ids is refused
(Iceberg's add_files matches such files by name; lakerules' reader does not, yet). Each file's partition is read from its own values (a partition source column must be in
the file, one partition per file); ``partition_filter`` keeps the files below folders named
``k=v`` for each of its entries. Only ``parquet``.``<path>`` sources are supported: importing a
Spark or Hive catalog table (``source_table => 'db.src'``) is refused. With
``check_duplicate_files`` (default true) a file the table already references is an error; every
file is checked before anything is committed. The files stay where they are: VACUUM,
expire_snapshots and remove_orphan_files never delete files outside the table's location.

register_table adds a table to the catalog from an existing metadata file (pyiceberg's
``register_table``); the name must not be taken.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from lakerules.iceberg.paths import hidden
from lakerules.spark import jvm as J
from lakerules.iceberg import names
from lakerules.errors import LakeError, NotSupported

ADD_FILES_RESULT = "added_files_count long, changed_partition_count long"
REGISTER_RESULT = "current_snapshot_id long, total_records_count long, total_data_files_count long"


def source_path(spark, text: str) -> str:
    """The path of ``source_table`` ('`parquet`.`/path`'); other sources are refused."""
    try:
        parts = J.name_parts(spark, text)
    except Exception:  # noqa: BLE001 - Spark's parser: not a name at all
        parts = []
    if len(parts) == 2 and parts[0].lower() == "parquet":
        return parts[1]
    if len(parts) == 2 and parts[0].lower() in ("orc", "avro", "csv", "json", "text"):
        raise NotSupported(f"lakerules: add_files: source format {parts[0]!r} is not supported; only "
                           "`parquet`.`<path>` sources can be added")
    raise NotSupported(f"lakerules: add_files: source_table {text!r} is not supported; lakerules adds Parquet files "
                       "named as '`parquet`.`<path to a file or folder>`' (importing a catalog table is not supported)")


def _listing(path: str) -> list[tuple[str, str]]:
    """(full path, path relative to ``path``) of the Parquet files at or below ``path``."""
    import pyarrow.fs as pafs

    try:
        fs, root = pafs.FileSystem.from_uri(path if "://" in path or path.startswith("file:") else f"file://{path}")
    except Exception as e:  # noqa: BLE001
        raise LakeError(f"lakerules: add_files: cannot read the source path {path!r}: {e}") from None
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise LakeError(f"lakerules: add_files: the source path {path!r} does not exist")
    scheme = path.split("://", 1)[0] + "://" if "://" in path else "file://"
    if info.type == pafs.FileType.File:
        return [(scheme + root if scheme != "file://" else "file://" + root, info.base_name)]
    out = []
    for f in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        if f.type != pafs.FileType.File:
            continue
        relative = f.path[len(root):].lstrip("/")
        if hidden(relative):
            continue
        out.append(((scheme + f.path) if scheme != "file://" else "file://" + f.path, relative))
    return sorted(out)


def _matches(relative: str, partition_filter: dict | None) -> bool:
    if not partition_filter:
        return True
    folders = dict(p.split("=", 1) for p in relative.split("/")[:-1] if "=" in p)
    return all(folders.get(k) == str(v) for k, v in partition_filter.items())


def _check_field_ids(table, path: str) -> None:
    """lakerules reads columns by Iceberg field id (Spark's Parquet field-id matching): a file
    whose columns carry none could be read by pyiceberg and DuckDB (by name) but not by lakerules,
    so it is refused."""
    import pyarrow.parquet as pq

    try:
        with table.io.new_input(path).open() as f:
            schema = pq.read_schema(f)
    except Exception as e:  # noqa: BLE001
        raise LakeError(f"lakerules: add_files: cannot read {path} as Parquet: {type(e).__name__}: {e}. "
                        "Nothing was added") from None
    missing = [x.name for x in schema if not (x.metadata or {}).get(b"PARQUET:field_id")]
    if missing:
        raise NotSupported(
            f"lakerules: add_files: {path} has columns without Iceberg field ids ({', '.join(missing[:5])}); lakerules "
            "reads Parquet columns by field id, so it adds only files written with the table's field ids (by Spark "
            "through lakerules, by another Iceberg writer of the same schema, or by pyarrow with PARQUET:field_id "
            "metadata). Nothing was added")
    known = {f.field_id for f in table.schema().fields}
    extra = [f"{x.name} (field id {int(x.metadata[b'PARQUET:field_id'])})" for x in schema
             if int(x.metadata[b"PARQUET:field_id"]) not in known]
    if extra:
        raise LakeError(f"lakerules: add_files: {path} has columns table {names.table_name(table)} does not have: "
                        f"{', '.join(extra[:5])}; add them to the table first (ALTER TABLE ... ADD COLUMN), or add "
                        "files without them. Nothing was added")


def add_files(ctx, table, args: dict):
    from pyiceberg.io.pyarrow import parquet_file_to_data_file

    from lakerules.write import commit

    if args.get("parallelism") is not None and args["parallelism"] < 1:
        raise LakeError(f"lakerules: add_files: parallelism must be at least 1, not {args['parallelism']}")
    path = source_path(ctx.spark, args["source_table"])
    files = [(p, rel) for p, rel in _listing(path) if _matches(rel, args.get("partition_filter"))]
    if not files:
        raise LakeError(f"lakerules: add_files: no Parquet file at {path!r}"
                        + (f" in partitions {args['partition_filter']}" if args.get("partition_filter") else ""))

    def one(item):
        p, _ = item
        _check_field_ids(table, p)
        try:
            data_file = parquet_file_to_data_file(table.io, table.metadata, p)
            data_file.spec_id = table.metadata.default_spec_id  # from_args drops it
        except Exception as e:  # noqa: BLE001 - pyiceberg's reason, named
            raise LakeError(f"lakerules: add_files: cannot add {p}: {type(e).__name__}: "
                            f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}. Nothing was added") from None
        return data_file

    with ThreadPoolExecutor(args.get("parallelism") or 8) as pool:
        data_files = list(pool.map(one, files))
    check = args.get("check_duplicate_files")
    if check is None or check:
        current = table.current_snapshot()
        known = set()
        if current is not None:
            for m in current.manifests(table.io):
                known.update(e.data_file.file_path for e in m.fetch_manifest_entry(table.io))
        from lakerules.iceberg.paths import key

        known_keys = {key(p) for p in known}
        dup = sorted(d.file_path for d in data_files if key(d.file_path) in known_keys)
        if dup:
            raise LakeError(f"lakerules: add_files: {len(dup)} file(s) are already in table {names.table_name(table)}, "
                            f"e.g. {dup[0]}; set check_duplicate_files => false to add them again. Nothing was added")
    borrows = _borrowed_folders(table, [d.file_path for d in data_files], bool(args.get("shared")))
    if "schema.name-mapping.default" not in table.properties:  # readers match the files' columns by name
        with table.transaction() as tx:
            tx.set_properties({"schema.name-mapping.default": table.schema().name_mapping.model_dump_json()})
        table = table.refresh()
    commit.append(table, data_files, {"lakerules.operation": "add_files"}, borrows)
    partitions = {(d.spec_id, tuple(d.partition)) for d in data_files}
    return J.result_rows(ctx.spark, [(len(data_files), len(partitions))], ADD_FILES_RESULT)


def _borrowed_folders(table, file_paths: list[str], shared: bool) -> dict | None:
    """The files' folder is recorded in this table's lakerules.borrows (lakerules.iceberg.bookkeeping)
    when they lie outside the table's own folders: no table may then be created or moved onto it,
    and no cleanup deletes a file this table references there (lakerules.iceberg.owners). Files below
    another table's folders are that table's, whose cleanup would delete them once it no longer
    needs them: refused, unless ``shared`` (that table's folder is recorded too). Returns the
    property to set in the append's commit, if it changes."""
    from lakerules.iceberg import owners, paths

    name = ".".join(table.name())
    taken = owners.owners_of(table.catalog, file_paths, table.name())
    if taken and not shared:
        owner, folder = taken[0]
        more = f" (and {len(taken) - 1} more tables' folders)" if len(taken) > 1 else ""
        raise LakeError(f"lakerules: add_files: the files are in the folder of table {owner} ({folder}){more}; that "
                        f"table's cleanup (remove_orphan_files, expire_snapshots, VACUUM, DROP TABLE ... PURGE) would "
                        f"delete them under {name}. Copy them into {name}'s folder, or add them with shared => true: "
                        f"{owner}'s cleanup then keeps every file {name} references. Nothing was added")
    own = paths.Confinement.of(table, f"add_files on {name}")
    outside = [p for p in file_paths if own.inside(p) is None]
    return owners.borrowing(table, [folder for _, folder in taken] + ([owners.common_folder(outside)] if outside else []))


def register_table(ctx, catalog: str, identifier: tuple, args: dict):
    """Register ``identifier`` in ``catalog`` from ``args['metadata_file']``."""
    from pyiceberg import exceptions as ie

    from lakerules.iceberg import paths

    metadata_file = args["metadata_file"]
    if metadata_file is None:
        raise LakeError("lakerules: CALL register_table: argument 'metadata_file' is NULL")
    if not metadata_file.endswith(".metadata.json"):
        raise LakeError(f"lakerules: CALL register_table: {metadata_file!r} is not a table metadata file "
                        "(<location>/metadata/<version>.metadata.json)")
    paths.check_identifier(identifier[:-1], identifier[-1])
    cat = ctx.catalogs.get(catalog)
    from lakerules.iceberg import owners

    location, properties = owners.read_metadata(cat, metadata_file)
    if location is not None and not cat.table_exists(identifier):  # a taken name is pyiceberg's error below  # a folder belongs to one table (a missing file is pyiceberg's error below)
        owners.check_folders(cat, f"CALL register_table {catalog}.{'.'.join(identifier)}", location, properties)
    try:
        table = cat.register_table(identifier, metadata_file)
    except ie.TableAlreadyExistsError:
        raise LakeError(f"lakerules: CALL register_table: table {catalog}.{'.'.join(identifier)} already exists") from None
    except ie.NoSuchNamespaceError:
        raise LakeError(f"lakerules: CALL register_table: namespace {catalog}.{'.'.join(identifier[:-1])} does not "
                        "exist") from None
    except FileNotFoundError:
        raise LakeError(f"lakerules: CALL register_table: metadata file {metadata_file!r} does not exist") from None
    table = _record_foreign_files(cat, table, f"{catalog}.{'.'.join(identifier)}")
    s = table.current_snapshot()
    summary = s.summary.additional_properties if s is not None and s.summary is not None else {}
    row = (s.snapshot_id if s is not None else None, int(summary.get("total-records", 0) or 0),
           int(summary.get("total-data-files", 0) or 0))
    return J.result_rows(ctx.spark, [row], REGISTER_RESULT)


def _record_foreign_files(cat, table, shown: str):
    """A registered table may name files outside its own folders (its metadata file, files another
    engine added from elsewhere): their folders go into its lakerules.borrows, in a commit right
    after the registration, which is undone (the table dropped from the catalog, no file deleted)
    if that commit fails."""
    from lakerules.iceberg import cleanup, owners, paths

    own = paths.Confinement.of(table, f"CALL register_table {shown}")
    try:
        files = cleanup.reachable(table.metadata, table.metadata_location, table.io)
        outside = [p for p in files if own.inside(p) is None]
        borrows = owners.borrowing(table, [p.rstrip("/").rsplit("/", 1)[0] for p in outside]) if outside else None
        if borrows:
            with table.transaction() as tx:
                tx.set_properties(borrows)
            table = table.refresh()
    except Exception as e:  # noqa: BLE001 - unrecorded, the table's files would be unprotected
        cat.drop_table(table.name())
        problem = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise LakeError(f"lakerules: CALL register_table {shown}: the files its metadata names could not be "
                        f"recorded ({problem.removeprefix('lakerules: ')}); the table was not registered") from None
    return table
