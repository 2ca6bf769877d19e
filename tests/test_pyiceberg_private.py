"""pyiceberg's private names are used in one module, lakerules.iceberg.pyiceberg_edge, whose
docstring lists each of them; pyproject.toml pins pyiceberg to one minor. This test fails, naming
the private, when pyiceberg changes one of them (it is gone, its parameters changed, or its source
did), when the edge uses a private its list lacks, or when another module of lakerules names a
pyiceberg private. After a pyiceberg upgrade, review each changed name against the edge's use of
it, then update the fingerprint here."""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import inspect
import re
from pathlib import Path

import pyiceberg
import pytest

from lakerules.iceberg import pyiceberg_edge

PINNED_MINOR = "0.12"
PACKAGE = Path(__file__).resolve().parents[1] / "python" / "lakerules"
EDGE = Path(pyiceberg_edge.__file__).resolve()

# name -> sha256 of inspect.getsource, first 16 hex digits (pyiceberg 0.12.0): every private the
# edge lists that has a source (classes, functions, methods, properties) ...
FINGERPRINTS = {
    "pyiceberg.table.update.snapshot._SnapshotProducer": "69e876855f5aaf58",
    "pyiceberg.table.update.snapshot._FastAppendFiles": "8cbd4eebb28a9176",
    "pyiceberg.table.update.snapshot._OverwriteFiles": "079b50739816c4dc",
    "pyiceberg.table.update.snapshot._SnapshotProducer._commit": "c6fc9654eaee932c",
    "pyiceberg.table.update.snapshot._SnapshotProducer._manifests": "f57f3aac3c95f9f3",
    "pyiceberg.table.update.snapshot._SnapshotProducer._process_manifests": "559dd43cacdf809a",
    "pyiceberg.table.update.snapshot._SnapshotProducer._existing_manifests": "e744b16d01982be5",
    "pyiceberg.table.update.snapshot._SnapshotProducer._deleted_entries": "209283a1fe2e1be0",
    "pyiceberg.table.update.snapshot._SnapshotProducer._summary": "2ed6b411b541a0c2",
    "pyiceberg.table.update.snapshot._SnapshotProducer._validate_concurrency": "67cd595d63cfc55e",
    "pyiceberg.table.update.snapshot._SnapshotProducer._cleanup_uncommitted": "c201b0e5b1a49086",
    "pyiceberg.table.update.snapshot._SnapshotProducer._clean_all_uncommitted": "bcb898db3199b353",
    "pyiceberg.manifest.ManifestWriterV2._meta": "9d4cb71586f9e17c",
    "pyiceberg.manifest.ManifestWriter._with_partition": "0feb42507fcf42b3",
    "pyiceberg.table.Transaction._stage": "6881b41fb183aa8d",
    "pyiceberg.table.update.validate._validate_data_files_exist": "bd7d3dda6e38d0cc",
    "pyiceberg.table.update.validate._added_data_files": "6aa101e9160f7a43",
    "pyiceberg.expressions.visitors._InclusiveMetricsEvaluator": "b72a9bc0acbbd345",
    "pyiceberg.expressions.visitors._StrictMetricsEvaluator": "d5853cf65ef45f6d",
    "pyiceberg.catalog.MetastoreCatalog._write_metadata": "2ed45bacb9a4b133",
    "pyiceberg.catalog.Catalog._load_file_io": "82be8a6cfd40f34a",
    "pyiceberg.table.update._apply_table_update": "a324bf37207eb52e",
}
# ... and the public code whose use of them the edge relies on: the transaction's retry loop calls
# the producers' hooks, CachingTransaction replaces table_metadata, and a SQL catalog's commit and
# CREATE TABLE call the catalog's own load_table and _write_metadata (lakerules.iceberg.guarded).
RELIED_ON = {
    "pyiceberg.table.Transaction.commit_transaction": "31e91e28f2729338",
    "pyiceberg.table.Transaction._rebuild_snapshot_updates": "772a9824c3918fb1",
    "pyiceberg.table.Transaction.table_metadata": "b17e042b477c6adb",
    "pyiceberg.table.update.UpdateTableMetadata.commit": "ce996207a5d2b195",
    "pyiceberg.catalog.sql.SqlCatalog.commit_table": "fb22ea690ba68b07",
    "pyiceberg.catalog.sql.SqlCatalog.create_table": "e3ccc48e6e881cbc",
    # format version 3 (lakerules.iceberg.v3): the metadata model it serializes, and the manifest
    # writing its v3 writers extend (produce_v3 stands for _SnapshotProducer._commit, above)
    "pyiceberg.table.metadata.TableMetadataV3": "728fe0c69654e703",
    "pyiceberg.manifest.ManifestWriter.new_writer": "1141e1290aec8bd3",
    "pyiceberg.manifest.ManifestWriter.to_manifest_file": "6ba4211cb6dd9dec",
    "pyiceberg.manifest.ManifestWriterV2.prepare_entry": "d55aaf3b5c1dfb1a",
    "pyiceberg.table.update.snapshot._SnapshotProducer.new_manifest_writer": "9d0c7567dedaaf5a",
}


def _entries() -> dict[str, tuple[str, ...] | None]:
    """The edge docstring's list: dotted name -> its parameters (None: an attribute)."""
    out = {}
    for m in re.finditer(r"^- ``(pyiceberg\.[\w.]+)(?:\(([^)]*)\))?``", pyiceberg_edge.__doc__, re.M):
        out[m.group(1)] = tuple(p.strip() for p in m.group(2).split(",") if p.strip()) if m.group(2) is not None else None
    return out


def _resolve(dotted: str):
    """(owner or module, object) for a dotted name; object is None when it is not found."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        owner = obj
        for name in parts[i:]:
            owner, obj = obj, inspect.getattr_static(obj, name, None)
            if obj is None:
                return owner, None
        return owner, obj
    return None, None


def _function(obj):
    if isinstance(obj, (staticmethod, classmethod)):
        return obj.__func__
    if isinstance(obj, property):
        return obj.fget
    return obj


def _fingerprint(obj) -> str:
    return hashlib.sha256(inspect.getsource(_function(obj)).encode()).hexdigest()[:16]


def _instance_attribute(cls, name: str) -> bool:
    """Whether instances of cls have attribute ``name``: declared, or assigned to self in its
    pyiceberg source (its own or a base class's)."""
    return any(name in getattr(c, "__annotations__", {}) or name in _assigned_to_self(c)
               for c in cls.__mro__ if c.__module__.startswith("pyiceberg"))


@functools.cache
def _class_nodes(module: str) -> dict[str, ast.ClassDef]:
    """The classes of a module's source, by qualified name (its source parsed once)."""
    out = {}

    def visit(node, prefix: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                out[prefix + child.name] = child
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, f"{prefix}{child.name}.<locals>.")

    path = getattr(importlib.import_module(module), "__file__", None)
    if path and path.endswith(".py"):
        visit(ast.parse(Path(path).read_text()), "")
    return out


def _class_node(cls) -> ast.ClassDef | None:
    return _class_nodes(cls.__module__).get(cls.__qualname__)


@functools.cache
def _assigned_to_self(cls) -> frozenset[str]:
    node = _class_node(cls)
    return frozenset() if node is None else frozenset(
        n.attr for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) and n.value.id == "self")


def test_the_pinned_minor():
    assert pyiceberg.__version__.startswith(PINNED_MINOR + "."), \
        f"pyiceberg {pyiceberg.__version__} is not the {PINNED_MINOR} lakerules pins (pyproject.toml)"


def test_the_edge_lists_its_privates():
    entries = _entries()
    assert len(entries) >= 30 and "pyiceberg.table.Transaction._stage" in entries, "the edge's list was not read"
    assert all(name.rsplit(".", 1)[-1].startswith("_") for name in entries), \
        [n for n in entries if not n.rsplit(".", 1)[-1].startswith("_")]


def test_each_private_the_edge_relies_on_is_there_with_its_parameters():
    problems = []
    for name, params in _entries().items():
        owner, obj = _resolve(name)
        attr = name.rsplit(".", 1)[-1]
        if params is None:  # an attribute: of the class, or of its instances
            if obj is None and not (inspect.isclass(owner) and _instance_attribute(owner, attr)):
                problems.append(f"{name} is gone")
            continue
        if obj is None:
            problems.append(f"{name} is gone")
            continue
        signature = inspect.signature(_function(obj))
        found = tuple(p for p in signature.parameters if p != "self")
        if found != params:
            problems.append(f"{name} takes ({', '.join(found)}), not ({', '.join(params)})")
    assert not problems, f"pyiceberg {pyiceberg.__version__} changed privates lakerules relies on " \
                         f"(lakerules.iceberg.pyiceberg_edge): {problems}"


def test_the_privates_and_the_code_using_them_are_unchanged():
    with_source = {n for n, p in _entries().items() if p is not None or isinstance(_resolve(n)[1], property)}
    assert set(FINGERPRINTS) == with_source, \
        f"fingerprint each private the edge lists (and only those): missing {sorted(with_source - set(FINGERPRINTS))}, " \
        f"not listed {sorted(set(FINGERPRINTS) - with_source)}"
    changed = []
    for name, expected in {**FINGERPRINTS, **RELIED_ON}.items():
        obj = _resolve(name)[1]
        if obj is None or _fingerprint(obj) != expected:
            changed.append(name)
    assert not changed, f"pyiceberg {pyiceberg.__version__} changed what lakerules.iceberg.pyiceberg_edge relies on: {changed}"


# ---- the edge is the only module that names them -------------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _modules() -> dict[str, Path]:
    """lakerules' modules but the edge (and __main__, which runs when imported), by name."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if path.resolve() != EDGE and parts[-1] != "__main__":
            out[name] = path
    return out


@functools.cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _privates_of(classes) -> set[str]:
    """The private names of pyiceberg's classes among ``classes``: methods, class attributes, and
    instance attributes (declared, or assigned to self in their source)."""
    return set().union(*(_class_privates(c) for c in classes if c.__module__.startswith("pyiceberg")))


@functools.cache
def _class_privates(cls) -> frozenset[str]:
    names = set(vars(cls)) | set(getattr(cls, "__annotations__", {})) | _assigned_to_self(cls)
    return frozenset(n for n in names if _private(n))


def _pyiceberg_imports(tree) -> list[tuple[str, str]]:
    return [(node.module, a.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyiceberg") for a in node.names]


def _touched_privates() -> set[str]:
    """The private names of every pyiceberg class lakerules imports (a table, a catalog, a
    transaction ...) and of their bases: what an attribute of a pyiceberg object may be named."""
    from pyiceberg.catalog.sql import SqlCatalog

    classes = {SqlCatalog}
    for path in _modules().values():
        for module, name in _pyiceberg_imports(_parsed(path)):
            obj = getattr(importlib.import_module(module), name, None)
            if inspect.isclass(obj):
                classes.add(obj)
    return _privates_of({c for cls in classes for c in cls.__mro__})


def _receiver_privates(tree, privates: set[str]) -> list[tuple[int, str]]:
    """Private names of pyiceberg objects read on anything but self, super() or a lakerules module."""
    own_modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lakerules"):
            own_modules |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            own_modules |= {a.asname or a.name.partition(".")[0] for a in node.names if a.name.startswith("lakerules")}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in privates:
            v = node.value
            if isinstance(v, ast.Name) and v.id in ({"self", "cls"} | own_modules):
                continue
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
                continue
            out.append((node.lineno, ast.unparse(node)))
    return out


def _subclass_privates(module: str) -> list[str]:
    """A class of ``module`` that extends a pyiceberg class (or a mixin of one) naming a private of
    the pyiceberg classes it is combined with, on self or super(): an override of a private hook,
    a read of private state, or its own state that would clobber pyiceberg's."""
    out = []
    classes = [c for c in vars(importlib.import_module(module)).values() if inspect.isclass(c) and c.__module__ == module]
    for cls in classes:
        privates = _privates_of(cls.__mro__)
        if not privates:
            continue
        for part in cls.__mro__:
            if not part.__module__.startswith("lakerules") or part.__module__ == pyiceberg_edge.__name__:
                continue
            for node in ast.walk(_class_node(part)):
                name = None
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in privates:
                    name = node.name
                elif isinstance(node, ast.Attribute) and node.attr in privates and (
                        (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")) or
                        (isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == "super")):
                    name = node.attr
                if name:
                    out.append(f"{part.__module__}.{part.__qualname__} names {name} (pyiceberg's, in {cls.__qualname__})")
    return out


def test_no_module_but_the_edge_names_a_pyiceberg_private():
    privates = _touched_privates()
    assert {"_stage", "_identifier", "_write_metadata", "_load_file_io", "_updates"} <= privates, \
        "pyiceberg's privates were not read"
    found = []
    for module, path in _modules().items():
        tree = _parsed(path)
        found += [f"{module}: imports {m}.{n}" for m, n in _pyiceberg_imports(tree) if _private(n)]
        found += [f"{module}:{line} {text}" for line, text in _receiver_privates(tree, privates)]
        found += _subclass_privates(module)
    assert not found, f"pyiceberg privates outside lakerules.iceberg.pyiceberg_edge (use or add its public names): " \
                      f"{sorted(set(found))}"


def test_the_edge_uses_no_private_it_does_not_list():
    tree = ast.parse(EDGE.read_text())
    own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    own |= {t.id for n in ast.walk(tree) if isinstance(n, ast.ClassDef) for s in n.body
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target] if isinstance(s, ast.AnnAssign) else [])
            if isinstance(t, ast.Name)}
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyiceberg"):
            used |= {a.name for a in node.names if _private(a.name)}
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            used.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            used |= {f.name for f in node.body if isinstance(f, ast.FunctionDef) and _private(f.name)}
    listed = {name.rsplit(".", 1)[-1] for name in _entries()}
    assert used - own <= listed, f"lakerules.iceberg.pyiceberg_edge uses privates its docstring does not list: " \
                                 f"{sorted(used - own - listed)}"


@pytest.mark.parametrize("attribute", ["_io", "_transaction", "_starting_snapshot_id"])
def test_the_check_for_instance_attributes_can_fail(attribute):
    from pyiceberg.table.update.snapshot import _SnapshotProducer

    assert _instance_attribute(_SnapshotProducer, attribute)
    assert not _instance_attribute(_SnapshotProducer, attribute + "_gone")


def test_manifests_declare_the_specs_equality_ids(tmp_path):
    """pyiceberg_edge.install_spec_manifest_types: a manifest pyiceberg writes says equality_ids is
    list<int>, as the spec and Iceberg's Java reader want (list<long> made Java fail on every
    manifest with an equality delete file); one written with list<long> before still reads."""
    import pyiceberg.manifest as M
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.types import IntegerType, LongType, NestedField

    import lakerules.iceberg.catalogs  # noqa: F401 - installs the patch, as every session does

    schema = Schema(NestedField(1, "id", LongType(), required=False))
    io = PyArrowFileIO()

    def write(path) -> M.ManifestFile:
        with M.write_manifest(2, UNPARTITIONED_PARTITION_SPEC, schema, io.new_output(str(path)), 1, "null") as w:
            f = M.DataFile.from_args(content=M.DataFileContent.EQUALITY_DELETES, file_path="/x/d.parquet",
                                     file_format=M.FileFormat.PARQUET, partition=M.Record(), record_count=3,
                                     file_size_in_bytes=10, equality_ids=[1])
            w.add_entry(M.ManifestEntry.from_args(status=M.ManifestEntryStatus.ADDED, snapshot_id=1, data_file=f))
        return w.to_manifest_file()

    def element(path) -> str:
        raw = path.read_bytes()
        start = raw.index(b'"equality_ids"')
        return re.search(rb'"items": "(\w+)"', raw[start:start + 300]).group(1).decode()

    for version in (2, 3):
        assert isinstance(M.DATA_FILE_TYPE[version].field(135).field_type.element_type, IntegerType)
    new = write(tmp_path / "new.avro")
    assert element(tmp_path / "new.avro") == "int"
    assert [e.data_file.equality_ids for e in new.fetch_manifest_entry(io)] == [[1]]
    # written as pyiceberg 0.12 did: list<long>, read back all the same
    patched = M.DATA_FILE_TYPE[2]
    M.DATA_FILE_TYPE[2] = M.MANIFEST_ENTRY_SCHEMAS[2].find_field(2).field_type
    try:
        old = write(tmp_path / "old.avro")
    finally:
        M.DATA_FILE_TYPE[2] = patched
    assert element(tmp_path / "old.avro") == "long"
    assert [e.data_file.equality_ids for e in old.fetch_manifest_entry(io)] == [[1]]
