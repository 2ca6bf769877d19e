"""What a row-level command will do, decided while it is planned (no Spark job, no write):
the table's write mode, and the checks on an UPDATE's assignments. The rules
(rules/rewrite_delete.py, rules/rewrite_update.py) call these; lakerules.rowlevel runs the
planned commands."""

from __future__ import annotations

from lakerules import jvm as J
from lakerules.errors import LakeError, NotSupported

MODES = ("merge-on-read", "copy-on-write")


def delete_mode(table) -> str:
    """The table's write.delete.mode (Iceberg's property); v1 tables can only copy on write."""
    mode = table.properties.get("write.delete.mode", "merge-on-read").lower()
    if mode not in MODES:
        raise LakeError(f"lakerules: table property write.delete.mode={mode!r} is not one of {list(MODES)}")
    if table.format_version < 2:
        return "copy-on-write"
    return mode


def update_mode(table) -> str:
    """The table's write.update.mode (Iceberg's property); v1 tables can only copy on write."""
    mode = table.properties.get("write.update.mode", "merge-on-read").lower()
    if mode not in MODES:
        raise LakeError(f"lakerules: table property write.update.mode={mode!r} is not one of {list(MODES)}")
    return "copy-on-write" if table.format_version < 2 else mode


def check_assignments(node) -> None:
    """Assignments name top-level columns, each at most once (Spark has cast the values)."""
    seen = set()
    for key, value in node.assignments:
        if J.simple_name(key) != "AttributeReference":
            raise NotSupported(
                f"lakerules: UPDATE {node.table}: assigning to {key.sql()} is not supported; "
                "assign the whole top-level column (e.g. SET s = named_struct(...))"
            )
        ident = key.exprId().id()
        if ident in seen:
            raise LakeError(f"lakerules: UPDATE {node.table}: column {key.name()} is assigned more than once")
        seen.add(ident)
        if not value.deterministic():
            raise LakeError(f"lakerules: UPDATE {node.table}: the value {value.sql()} for {key.name()} is not deterministic")
    if node.condition is not None and not node.condition.deterministic():
        raise LakeError(f"lakerules: UPDATE {node.table}: the condition {node.condition.sql()} is not deterministic")
