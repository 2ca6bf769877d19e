"""lakerules: row-level operations and layout optimization for Iceberg tables, from Spark SQL.

    import lakerules
    spark = lakerules.session(warehouse="./warehouse")   # local session, embedded SQLite catalog
    spark.sql("CREATE TABLE lake.db.t (id BIGINT, ts TIMESTAMP) PARTITIONED BY (days(ts))")

or, for a session built elsewhere with the shim jar and extension configured,
``lakerules.attach(spark)``.
"""

from __future__ import annotations

import os
from pathlib import Path

from lakerules import jvm_archive as _archive
from lakerules.errors import CatalogError, LakeError, NotSupported
from lakerules.rules.registry import register_rule, unregister_rule
from lakerules.spark import shared

__version__ = "0.1.0"
__all__ = [
    "session", "attach", "detach", "spark_conf", "jar_path", "register_rule", "unregister_rule",
    "delete_by_key", "inspect", "LakeError", "NotSupported", "CatalogError",
]

EXTENSION = shared.EXTENSIONS_CLASS
CATALOG_CLASS = shared.CATALOG_CLASS
# Settings lakerules needs on every session it serves.
SESSION_CONF = {
    # Match Parquet columns to the requested schema by Iceberg field id (renames, drops, adds).
    "spark.sql.parquet.fieldId.read.enabled": "true",
    # Iceberg timestamps are INT64 microseconds; Spark's default (INT96) is not Iceberg's.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}

_backend = None


def delete_by_key(spark, table: str, keys, on: list[str]) -> int:
    """Delete rows by key with equality delete files (see lakerules.rowlevel.delete_by_key)."""
    from lakerules.rowlevel.delete_by_key import delete_by_key as run

    if _backend is None:
        raise LakeError("lakerules: no registry attached: call lakerules.attach(spark) first")
    return run(spark, _backend.catalogs, table, keys, on)


def inspect(table, columns=(), plot=None, catalog_properties: dict[str, str] | None = None):
    """A table's layout and health from its metadata (lakerules.metadata.health): ``table`` is a
    pyiceberg Table or a name ``catalog.namespace.table`` (through the attached session's
    catalogs, or a pyiceberg catalog of ``catalog_properties``); ``plot`` a PNG path for the
    first two ``columns``' per-file [min, max] boxes. ``print()`` the result."""
    from lakerules.metadata import health

    name = None
    if isinstance(table, str):
        name, table = table, health.load(table, catalog_properties,
                                         attached=_attached_catalog if catalog_properties is None else None)
    h = health.health(table, list(columns), name)
    if plot is not None:
        health.plot(h, plot)
    return h


def _attached_catalog(name: str):
    """The pyiceberg catalog the attached session serves as Spark catalog ``name``."""
    if _backend is None:
        raise LakeError("lakerules: no session attached in this process: give the catalog's properties "
                        "(python -m lakerules inspect --warehouse W, or catalog_properties=)")
    return _backend.catalogs.get(name)


def jar_path() -> str:
    """The shim jar packaged with this install."""
    jar = _archive.JAR
    if not jar.is_file():
        raise LakeError(f"lakerules: the shim jar is missing at {jar}; build it with `make setup` (needs a JDK: javac)")
    return str(jar)


def embedded_catalog(warehouse: str | os.PathLike) -> dict[str, str]:
    """Properties of the embedded default: a pyiceberg SQL catalog on SQLite at W/catalog.db."""
    w = Path(warehouse).expanduser().resolve()
    w.mkdir(parents=True, exist_ok=True)  # SQLite creates the file, not its folder
    return {"type": "sql", "uri": f"sqlite:///{w}/catalog.db", "warehouse": f"file://{w}"}


def spark_conf(warehouse: str | os.PathLike | None = None, catalog: str = "lake",
               catalog_properties: dict[str, str] | None = None) -> dict[str, str]:
    """Every Spark setting lakerules needs: jar, extension, catalog, session settings."""
    conf = {
        "spark.jars": jar_path(),
        "spark.sql.extensions": EXTENSION,
        f"spark.sql.catalog.{catalog}": CATALOG_CLASS,
        **SESSION_CONF,
    }
    props = dict(embedded_catalog(warehouse)) if warehouse is not None else {}
    props.update(catalog_properties or {})
    for k, v in props.items():
        conf[f"spark.sql.catalog.{catalog}.{k}"] = v
    return conf


def driver_memory(master: str, settings: dict[str, str], total_bytes: int | None = None) -> str | None:
    """The driver heap ``session()`` gives a local Spark: a quarter of the machine's memory,
    between 1 GiB (Spark's default) and 16 GiB, in whole MiB; None when the heap is set already
    (``spark.driver.memory`` in ``conf``, SPARK_DRIVER_MEMORY, or a spark-submit argument) or
    the master is not local (a cluster's driver is sized by whoever starts it).

    >>> driver_memory("local[*]", {}, 24 << 30)
    '6144m'
    >>> driver_memory("local[2]", {}, 2 << 30), driver_memory("local", {}, 256 << 30)
    ('1024m', '16384m')
    >>> driver_memory("local[*]", {"spark.driver.memory": "2g"}, 24 << 30) is None
    True
    >>> driver_memory("spark://host:7077", {}, 24 << 30) is None
    True
    """
    if not master.startswith("local") or "spark.driver.memory" in settings:
        return None
    if os.environ.get("SPARK_DRIVER_MEMORY") or "driver-memory" in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return None
    if total_bytes is None:
        try:
            total_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return None
    mib = min(max(total_bytes // 4, 1 << 30), 16 << 30) >> 20
    return f"{mib}m"


def session(warehouse: str | os.PathLike = "./warehouse", *, master: str = "local[*]", app_name: str = "lakerules",
            catalog: str = "lake", catalog_properties: dict[str, str] | None = None,
            conf: dict[str, str] | None = None, jvm_archive: bool = True):
    """A local SparkSession with the shim, the lake catalog and the rule registry attached.

    ``catalog_properties`` replace or extend the embedded default's (e.g. ``{"type": "rest",
    "uri": ...}``); ``conf`` adds any other Spark settings. A local session's driver heap is
    sized from the machine unless set (see ``driver_memory``): Spark's 1 GiB default is too small
    for reading wide tables with large row groups. The JVM this call starts maps the class-data
    archive ``make setup`` built (lakerules/jvm_archive.py: the session starts in about half the
    time) unless ``jvm_archive`` is False, the archive is missing, or the JVM's options already
    choose about class sharing.
    """
    import shutil

    from pyspark.sql import SparkSession

    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise LakeError(
            "lakerules: no Java runtime found (no java on PATH, JAVA_HOME unset); Spark needs Java 17+. "
            "Install one (`make setup` installs openjdk-17-jdk-headless) or set JAVA_HOME"
        )
    Path(warehouse).expanduser().mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {**spark_conf(warehouse, catalog, catalog_properties), **(conf or {})}
    memory = driver_memory(master, settings)
    if memory is not None:
        settings["spark.driver.memory"] = memory
    for k, v in settings.items():
        builder = builder.config(k, v)
    archive = _archive_options(settings) if jvm_archive else ""
    if not archive:
        return attach(builder.getOrCreate())
    saved = os.environ.get(_archive.SUBMIT_OPTS)
    os.environ[_archive.SUBMIT_OPTS] = f"{saved or ''} {archive}".strip()  # read by the JVM's launcher only
    try:
        spark = builder.getOrCreate()
    finally:
        if saved is None:
            os.environ.pop(_archive.SUBMIT_OPTS, None)
        else:
            os.environ[_archive.SUBMIT_OPTS] = saved
    return attach(spark)


def _archive_options(settings: dict[str, str]) -> str:
    """The class-data archive's JVM options for the JVM session() is about to start, or "" (a
    JVM runs already, the archive is not built, or the options choose about class sharing)."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None or _archive.chosen(settings.get("spark.driver.extraJavaOptions", "")):
        return ""
    return _archive.options()


def attach(spark):
    """Attach the Python rule registry to a session whose JVM has the shim and extension."""
    from pyspark.java_gateway import ensure_callback_server_started

    from lakerules.sql import statements
    from lakerules.backend.bridge import Backend
    from lakerules.spark import jvm as J

    global _backend
    if not J.shim_loaded(spark):
        raise LakeError(
            "lakerules: the shim jar is not on this Spark session's classpath; start Spark with "
            f"--jars {jar_path()} (or spark.jars), or use lakerules.session(...)"
        )
    extensions = spark.sparkContext.getConf().get("spark.sql.extensions", "") or ""
    if EXTENSION not in extensions:
        raise LakeError(
            f"lakerules: spark.sql.extensions does not include {EXTENSION}; it must be set before "
            "the session is created (spark.sql.extensions is a static setting)"
        )
    for k, v in SESSION_CONF.items():
        spark.conf.set(k, v)
    ensure_callback_server_started(spark.sparkContext._gateway)
    from lakerules.scan.explain import install_dataframe_explain

    install_dataframe_explain()
    _backend = Backend(spark)
    J.register_backend(spark, _backend, statements.ROUTES)
    return spark


def detach(spark) -> None:
    """Detach the registry: lake statements then fail with an error saying how to attach."""
    from lakerules.spark import jvm as J

    global _backend
    J.unregister_backend(spark)
    _backend = None
