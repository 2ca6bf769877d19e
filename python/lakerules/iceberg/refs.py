"""Branches and tags: which snapshot a statement reads and which ref its commit moves.

A branch or tag is named as a table, as Iceberg's Spark catalog does: ``lake.db.t.branch_b``
is table ``lake.db.t`` at the head of branch ``b``, ``lake.db.t.tag_v1`` at tag ``v1``'s
snapshot (when no table ``db.t.branch_b`` exists). Reads read that snapshot; writes (INSERT,
DELETE, UPDATE, MERGE, OPTIMIZE) commit to that branch only, validated against its head;
a tag is never written.

Write-audit-publish, as Iceberg's Spark runtime: on a table with ``write.wap.enabled=true``,

- ``spark.wap.branch=b``: reads of the table read branch ``b`` when it exists, and writes
  commit to it (it is created at ``main``'s current snapshot by the first write);
- ``spark.wap.id=w``: writes are staged: a snapshot whose parent is ``main``'s head, with
  ``wap.id=w`` in its summary, that no ref points at (``main`` does not move); publish it with
  ``CALL <catalog>.system.publish_changes(table => 'db.t', wap_id => 'w')`` (or
  ``cherrypick_snapshot``).

Both at once, or a WAP branch and a branch named in the statement that differ, are refused.
On other tables the two settings mean nothing, as in Iceberg.

A write's pyiceberg Table is a *view* (:func:`for_write`, a :class:`WriteTable`): its metadata's
current snapshot is the branch's head (so the statement plans its read there) and it carries the
commit's target, which lakerules.write.commit reads (:func:`target_of`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.table import Table
from pyiceberg.table.refs import MAIN_BRANCH

from lakerules.iceberg import names
from lakerules.errors import LakeError, NotSupported

BRANCH, TAG = "branch", "tag"
WAP_ENABLED = "write.wap.enabled"
WAP_ID = "spark.wap.id"
WAP_BRANCH = "spark.wap.branch"
WAP_SETTINGS = (WAP_ID, WAP_BRANCH)


def parse_ref(text: str | None) -> tuple[str, str] | None:
    """The JVM LakeTable's ref ("branch:b", "tag:v") as (kind, name), or None."""
    if not text:
        return None
    kind, _, name = text.partition(":")
    return kind, name


def split_identifier(name: str) -> tuple[str, str] | None:
    """A table name's branch or tag suffix: ``branch_b`` -> ("branch", "b"), ``tag_v`` -> ("tag", "v")."""
    for kind in (BRANCH, TAG):
        prefix = kind + "_"
        if name.lower().startswith(prefix) and len(name) > len(prefix):
            return kind, name[len(prefix):]
    return None


def ref_snapshot_id(table: Table, name, kind: str, ref: str) -> int:
    """The snapshot a branch or tag points at, or a LakeError naming the refs the table has."""
    r = table.metadata.refs.get(ref)
    if r is None or r.snapshot_ref_type.value != kind:
        have = sorted(n for n, x in table.metadata.refs.items() if x.snapshot_ref_type.value == kind)
        other = f" ({ref!r} is a {r.snapshot_ref_type.value})" if r is not None else ""
        plural = "branches" if kind == BRANCH else "tags"
        raise LakeError(f"lakerules: table {name} has no {kind} {ref!r}{other}; its {plural} are {have}")
    return r.snapshot_id


def wap_enabled(table: Table) -> bool:
    return str(table.properties.get(WAP_ENABLED, "false")).strip().lower() == "true"


def wap_settings(table: Table, name, conf) -> tuple[str | None, str | None]:
    """(spark.wap.id, spark.wap.branch) that apply to ``table`` (none unless write.wap.enabled)."""
    if not wap_enabled(table):
        return None, None
    wap_id, wap_branch = conf(WAP_ID) or None, conf(WAP_BRANCH) or None
    if wap_id and wap_branch:
        raise LakeError(f"lakerules: {name} has write.wap.enabled=true and the session sets both spark.wap.id "
                        f"({wap_id!r}) and spark.wap.branch ({wap_branch!r}); set one")
    if wap_branch:
        r = table.metadata.refs.get(wap_branch)
        if r is not None and r.snapshot_ref_type.value != BRANCH:
            raise LakeError(f"lakerules: spark.wap.branch={wap_branch!r}, but {wap_branch!r} is a tag of {name}, "
                            "and tags are never written")
    return wap_id, wap_branch


def wap_read_snapshot_id(table: Table, name, conf) -> int | None:
    """The snapshot a plain read of ``table`` reads under write-audit-publish: the head of
    spark.wap.branch when write.wap.enabled=true and that branch exists; else None (the current one)."""
    if not wap_enabled(table) or not conf(WAP_BRANCH):
        return None
    _, wap_branch = wap_settings(table, name, conf)
    ref = table.metadata.refs.get(wap_branch)
    return ref.snapshot_id if ref is not None else None


@dataclass(frozen=True)
class Target:
    """Where a write commits: ``branch`` (None: staged, no ref moves) and its ``wap_id``."""

    branch: str | None = MAIN_BRANCH
    wap_id: str | None = None

    def shown(self) -> str:
        if self.branch is None:
            return f"staged (wap.id {self.wap_id!r})"
        return f"branch {self.branch!r}"


def write_target(table: Table, name, ref: tuple[str, str] | None, conf) -> Target:
    """Where a write to ``table`` named with ``ref`` commits, or a LakeError."""
    wap_id, wap_branch = wap_settings(table, name, conf)
    if ref is not None:
        kind, ref_name = ref
        if kind == TAG:
            raise NotSupported(f"lakerules: {name} names tag {ref_name!r}: a tag is a fixed snapshot and is never "
                               "written; write to a branch (lake...<table>.branch_<name>)")
        ref_snapshot_id(table, name, kind, ref_name)
        if wap_branch and wap_branch != ref_name:
            raise LakeError(f"lakerules: the statement writes to branch {ref_name!r} of {name}, and the session's "
                            f"spark.wap.branch is {wap_branch!r}; write to one branch")
        if wap_id:
            raise LakeError(f"lakerules: the statement writes to branch {ref_name!r} of {name}, and the session's "
                            f"spark.wap.id ({wap_id!r}) would stage it; unset one")
        return Target(ref_name)
    if wap_branch:
        if wap_branch not in table.metadata.refs:  # the first write creates it
            names.check_ref_name(wap_branch, BRANCH, f"{WAP_BRANCH}={names.shown_ref(wap_branch)} on {name}")
        return Target(wap_branch)
    if wap_id:
        return Target(None, wap_id)
    return Target()


def for_write(table: Table, target: Target) -> Table:
    """The table a write plans and commits with: the target branch's head as its current snapshot
    (main's when the branch does not exist yet or the write is staged), the target attached. A
    copy: the catalog's metadata and every cached object are unchanged. Commits send updates to
    the catalog, which applies them to the table's metadata as it has it: the view only changes
    what is planned."""
    head = table.metadata.refs.get(target.branch) if target.branch else None
    metadata = table.metadata
    if target.branch not in (None, MAIN_BRANCH) and head is not None and metadata.current_snapshot_id != head.snapshot_id:
        metadata = metadata.model_copy(update={"current_snapshot_id": head.snapshot_id})
    return WriteTable(table, metadata, target)


class WriteTable(Table):
    """A table as a write sees it (:func:`for_write`): ``metadata`` (its current snapshot may be a
    branch's head), and the ``target`` its commit goes to."""

    def __init__(self, table: Table, metadata, target: Target):
        super().__init__(table.name(), metadata, table.metadata_location, table.io, table.catalog)
        self.target = target


def target_of(table: Table) -> Target:
    """The commit target of a write's table (:func:`for_write`); main for any other table."""
    return table.target if isinstance(table, WriteTable) else Target()
