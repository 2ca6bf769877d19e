"""The pyiceberg catalogs of a Spark session, by Spark catalog name.

A lake catalog NAME is configured like Iceberg's Spark catalog: every
``spark.sql.catalog.NAME.<property>`` is passed to pyiceberg's ``load_catalog(NAME, ...)``; the
catalog's faults are made clear errors (lakerules.iceberg.guarded). The operations Spark's
LakeCatalog asks for are answered in lakerules.backend.catalog_ops.
"""

from __future__ import annotations

import json
import threading

from pyiceberg import exceptions as ie
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.table import Table

from lakerules.errors import LakeError, NotSupported
from lakerules.iceberg import far_dates, metadata_cache, metadata_files, refs
from lakerules.iceberg import pyiceberg_edge as edge
from lakerules.iceberg.guarded import guarded, qualified, shown_property, sqlite_locks_wait  # noqa: F401 - qualified, shown_property for callers
from lakerules.spark import jvm as J
from lakerules.spark import shared

metadata_cache.install()
metadata_files.install()
far_dates.install()
edge.install_spec_manifest_types()


def namespace_exists(cat: Catalog, ns: tuple) -> bool:
    """Whether the catalog has the namespace (the root, ``()``, always)."""
    if not ns:
        return True  # the catalog's root, which holds namespaces (and no tables)
    if any(not part.strip() for part in ns):
        return False  # no catalog keeps such a namespace (pyiceberg refuses to look it up)
    try:
        cat.load_namespace_properties(ns)
        return True
    except ie.NoSuchNamespaceError:
        return False


def kept_as_spelled(catalog: str, cat: Catalog, namespace) -> None:
    """Refuse a namespace name a SQL catalog would not keep as written: pyiceberg's SQL catalog
    stores a namespace as its parts joined with '.', each stripped of surrounding whitespace, so
    lake.`a.b` would be the nested namespace lake.a.b and lake.` x ` would be lake.x (the same
    namespace, under another name, for every reader)."""
    from pyiceberg.catalog.sql import SqlCatalog

    if not isinstance(cat, SqlCatalog):
        return
    for part in namespace:
        if "." in part:
            problem = ("contains '.', which a SQL catalog uses to separate nested namespaces: it would be "
                       f"the same namespace as {'.'.join((catalog, *part.split('.')))}")
        elif part != part.strip():
            problem = (f"starts or ends with whitespace, which a SQL catalog strips: it would be the namespace "
                       f"{part.strip()!r}" if part.strip() else "is only whitespace, which a SQL catalog cannot store")
        else:
            continue
        raise LakeError(f"lakerules: namespace name {part!r} {problem}. Choose a name without it "
                        f"(catalog {catalog!r} is a pyiceberg SQL catalog)")


def build(name: str, props: dict) -> Catalog:
    """pyiceberg's catalog ``name`` from its properties, with lakerules' handling of its faults
    (guarded) and of SQLite's locks."""
    try:
        catalog = load_catalog(name, **props)
    except Exception as e:  # noqa: BLE001 - pyiceberg raises ValueError, ImportError, ...
        given = ", ".join(f"{k}={shown_property(k, v)}" for k, v in sorted(props.items())) or "none"
        raise LakeError(
            f"lakerules: cannot load catalog {name!r} from its spark.sql.catalog.{name}.<property> "
            f"settings ({given}): {type(e).__name__}: {e}. The embedded default needs "
            f"spark.sql.catalog.{name}.type=sql, .uri=sqlite:///<folder>/catalog.db and "
            f".warehouse=file://<folder>; `python -m lakerules conf --warehouse <folder>` prints them"
        ) from e
    return guarded(sqlite_locks_wait(catalog), name, props)


class Catalogs:
    """The pyiceberg catalogs of one JVM, by Spark catalog name, built on first use."""

    def __init__(self, spark):
        self._spark = spark
        self._catalogs: dict[str, Catalog] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Catalog:
        with self._lock:
            if name not in self._catalogs:
                raw = J.catalog_options(self._spark, name)
                props = json.loads(raw) if raw is not None else self._configured().get(name)
                if props is None:
                    raise LakeError(
                        f"lakerules: catalog {name!r} is not a lake catalog; set "
                        f"spark.sql.catalog.{name}={shared.CATALOG_CLASS} and its properties"
                    )
                catalog = build(name, props)
                catalog.lakerules_peers = self.every  # what lakerules.iceberg.owners checks folders against
                self._catalogs[name] = catalog
            return self._catalogs[name]

    def _configured(self) -> dict[str, dict]:
        """name -> properties of every lake catalog the session's settings configure
        (spark.sql.catalog.NAME=io.lakerules.LakeCatalog), Spark's catalog options or not yet."""
        prefix = "spark.sql.catalog."
        settings = J.settings_with_prefix(self._spark, prefix)
        names = [k[len(prefix):] for k, v in settings.items() if "." not in k[len(prefix):] and v == shared.CATALOG_CLASS]
        return {n: {k[len(prefix) + len(n) + 1:]: v for k, v in settings.items() if k.startswith(f"{prefix}{n}.")}
                for n in names}

    def every(self) -> list[Catalog]:
        """Every lake catalog of the session (each built on first use, in name order): a folder
        belongs to one table in all of them, and no cleanup deletes a file a table of any of them
        references (lakerules.iceberg.owners)."""
        return [self.get(name) for name in sorted({*self._configured(), *self._catalogs})]

    def setting(self, key: str) -> str | None:
        """The session's setting ``key``, None when unset."""
        return self._spark.conf.get(key, None)

    def load(self, catalog: str, namespace, name: str) -> Table:
        return self.get(catalog).load_table((*namespace, name))

    def load_for_write(self, t, conf) -> Table:
        """The table a write to ``t`` (a plan.TableRef) plans and commits with: at the head of the
        branch it writes to (its name's branch, or write-audit-publish's), that target attached
        (lakerules.iceberg.refs); a LakeError for a tag, a missing branch or contradicting settings."""
        table = self.load(t.catalog, t.namespace, t.name)
        return refs.for_write(table, refs.write_target(table, t, refs.parse_ref(t.ref), conf))

    def load_for_statement(self, t, conf, statement) -> Table:
        """The table a statement of lakerules.plan.statements runs on: OPTIMIZE (``writes_data``)
        as any write (a branch named or write-audit-publish's; staging under spark.wap.id is refused:
        a rewrite publishes no new data to audit); the others on the table itself, never named at a ref."""
        what = " ".join(statement.describe().split())[:80]
        if statement.writes_data:
            table = self.load_for_write(t, conf)
            if refs.target_of(table).branch is None:
                raise NotSupported(f"lakerules: {what}: {t} has write.wap.enabled=true and the session sets "
                                   f"spark.wap.id: a rewrite is not staged; unset spark.wap.id to rewrite main's "
                                   "files, or name a branch (<table>.branch_<name>)")
            return table
        if t.ref:
            raise LakeError(f"lakerules: {what}: {t} names a {t.ref.partition(':')[0]}; name the table itself")
        return self.load(t.catalog, t.namespace, t.name)
