"""Names as lakerules shows and checks them: a table as ``catalog.namespace.table`` in every
message (pyiceberg's ``Table.name()`` is a tuple without the catalog), and the one rule branch
and tag names follow wherever a ref is created or moved by name.

Branch and tag names (Iceberg puts almost no rule on them; lakerules refuses the names that read
as something else or cannot be told apart):

- not empty, and no whitespace at either end (``'main '`` would be shown as ``main``);
- no control characters (a line break would split a message or a log line);
- at most 255 characters: a name is shown in every error and log line, and is a table name's last
  part (``lake.db.t.branch_<name>``), which catalogs and tools store as an identifier (255 is the
  usual limit for one, and for a file name);
- ``/`` separates segments, as in git's ``feature/x`` (Iceberg allows it); no segment is empty,
  ``.`` or ``..`` (``../../x``, ``a//b``, ``/a``, ``a/`` read as paths);
- ``main`` (exactly: names are case-sensitive, ``MAIN`` is another branch) is the table's main
  branch: it is never created as a tag or as a new branch, nor dropped.
"""

from __future__ import annotations

from lakerules.errors import LakeError

MAX_REF_NAME = 255
MAIN = "main"


def table_name(table) -> str:
    """A pyiceberg table's name as statements write it: ``catalog.namespace.table`` (the Spark
    catalog's name is the pyiceberg catalog's, as lakerules.iceberg.catalogs loads it); without the
    catalog when the table has none."""
    ident = tuple(table.name())
    catalog = getattr(getattr(table, "catalog", None), "name", None)
    return ".".join((catalog, *ident) if catalog else ident)


def ref_name_problem(name) -> str | None:
    """What is wrong with a branch or tag name, or None when it follows the rule."""
    if not isinstance(name, str) or name == "":
        return "it is empty"
    if name != name.strip():
        return "it starts or ends with whitespace"
    if len(name) > MAX_REF_NAME:
        return f"it is {len(name)} characters long; the limit is {MAX_REF_NAME}"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "it contains a control character"
    segments = name.split("/")
    if any(s == "" for s in segments):
        return "it has an empty segment between '/' (a '/' at either end, or '//')"
    if any(s in (".", "..") for s in segments):
        return "it has a '.' or '..' segment, which reads as a path"
    return None


def shown_ref(name) -> str:
    """A ref name as a message shows it: quoted, cut after 60 characters."""
    return repr(name if not isinstance(name, str) or len(name) <= 60 else name[:60] + "...")


def check_ref_name(name, kind: str, where: str) -> str:
    """``name`` when it may name a new branch or tag (``kind``); else a LakeError naming the rule it
    breaks and ``where`` (the statement or setting, which shows the name)."""
    problem = ref_name_problem(name)
    if problem is not None:
        raise LakeError(
            f"lakerules: {where}: the {kind} name is not allowed: {problem}. A branch or tag name is "
            f"1 to {MAX_REF_NAME} characters, with no whitespace at either end, no control characters, and "
            "no empty, '.' or '..' segment between '/'; nothing was changed")
    return name
