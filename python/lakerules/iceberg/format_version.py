"""Which Iceberg format versions lakerules creates and upgrades tables to: the one place that says
so (CREATE TABLE ... TBLPROPERTIES ('format-version'=...), ALTER TABLE ... SET TBLPROPERTIES, and
the session's default for new tables), and what lakerules does not do on a version 3 table yet.

Iceberg's rules: a table's format version only goes up (a downgrade is refused); setting the
version a table has changes nothing. lakerules creates tables at versions 1, 2 and 3 and upgrades
1 to 2 and 2 to 3 (a version 1 table goes to 2 first). On version 3 tables (lakerules.iceberg.v3)
its writes keep row lineage and write deletion vectors; the procedures it does not write correctly
there yet are refused by :func:`refuse_on_v3`, never done the v2 way.
"""

from __future__ import annotations

from lakerules.errors import LakeError, NotSupported

PROPERTY = "format-version"
SUPPORTED = (1, 2, 3)
DEFAULT = 2
_ICEBERG = (1, 2, 3)  # the versions Iceberg's spec defines
# The format version of tables created without a format-version property (CREATE TABLE, CTAS,
# saveAsTable, writeTo().create()): 1, 2 (the default) or 3.
DEFAULT_SETTING = "spark.lakerules.default-format-version"


def checked(value, where: str, current: int | None = None) -> int:
    """The format version ``value`` (a table property's text) asks for, when lakerules can create
    the table at it (``current`` None) or move the table from ``current`` to it; else a LakeError
    (NotSupported for a version lakerules does not write yet) naming the value and the rule."""
    text = str(value).strip()
    if not text.isdigit() or int(text) not in _ICEBERG:
        raise LakeError(f"lakerules: {where}: {PROPERTY}={value!r} is not an Iceberg format version "
                        f"(the versions are {', '.join(map(str, _ICEBERG))}); nothing was changed")
    version = int(text)
    if current is not None and version < current:
        raise LakeError(f"lakerules: {where}: {PROPERTY}={version} would downgrade the table from format version "
                        f"{current}; Iceberg tables are only upgraded, never downgraded. Nothing was changed")
    if version not in SUPPORTED and version != current:
        raise NotSupported(f"lakerules: {where}: {PROPERTY} {version} is not supported yet: lakerules creates and "
                           f"upgrades tables to format versions {' and '.join(map(str, SUPPORTED))}. "
                           "Nothing was changed")
    if current is not None and current < 2 < version:
        raise NotSupported(f"lakerules: {where}: {PROPERTY} {version}: the table has format version {current}; "
                           f"upgrade it to 2 first (SET TBLPROPERTIES ('{PROPERTY}'='2')), then to {version}. "
                           "Nothing was changed")
    return version


def default_for_new_tables(value: str | None) -> int:
    """The session's spark.lakerules.default-format-version (unset: 2)."""
    if value is None or not str(value).strip():
        return DEFAULT
    text = str(value).strip()
    if not text.isdigit() or int(text) not in SUPPORTED:
        raise LakeError(f"lakerules: {DEFAULT_SETTING}={value!r} is not a format version lakerules creates tables at "
                        f"(one of {', '.join(map(str, SUPPORTED))})")
    return int(text)


def upgrade(tx, version: int) -> None:
    """Stage the upgrade of ``tx``'s table to ``version`` (checked by :func:`checked`)."""
    from lakerules.iceberg import pyiceberg_edge as edge

    if version >= 3:
        edge.upgrade_to_v3(tx)
    else:
        tx.upgrade_table_version(version)


def upgrade_update(version: int):
    """The table update that upgrades a table to ``version``."""
    from pyiceberg.table.update import UpgradeFormatVersionUpdate

    from lakerules.iceberg import pyiceberg_edge as edge

    return edge.UpgradeToV3(format_version=version) if version >= 3 else UpgradeFormatVersionUpdate(format_version=version)


def refuse_on_v3(table, verb: str) -> None:
    """A NotSupported naming the table when it is a format-version 3 table and ``verb`` is one
    lakerules does not write correctly on v3 yet (its deletion vectors, or the row ids of the rows
    it rewrites, are not written yet)."""
    if table.format_version >= 3:
        from lakerules.iceberg import names

        raise NotSupported(f"lakerules: {verb} on {names.table_name(table)}: {names.table_name(table)} is a "
                           f"format-version 3 table, and lakerules' support of v3 does not cover {verb} yet (it "
                           "writes appends, overwrites, DELETE, UPDATE, MERGE, OPTIMIZE, RESTORE and the rewrite "
                           "procedures there). Nothing was changed")
