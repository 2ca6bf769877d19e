"""Which Iceberg format versions lakerules creates and upgrades tables to: the one place that says
so (CREATE TABLE ... TBLPROPERTIES ('format-version'=...) and ALTER TABLE ... SET TBLPROPERTIES).

Iceberg's rules: a table's format version only goes up (a downgrade is refused); setting the
version a table has changes nothing. lakerules reads and writes versions 1 and 2; version 3
(deletion vectors, row lineage, new types) is not supported yet: raise ``SUPPORTED`` here when it is.
"""

from __future__ import annotations

from lakerules.errors import LakeError, NotSupported

PROPERTY = "format-version"
SUPPORTED = (1, 2)
DEFAULT = 2
_ICEBERG = (1, 2, 3)  # the versions Iceberg's spec defines


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
    return version
