"""What EXPLAIN and df.explain() show of lake scans.

When the optimizer plans a lake scan, its facts (table, snapshot, files read of the snapshot's
files, delete files applied) are remembered under the exprIds of the relation's output;
explaining a query looks its lake relations up and adds a "== lakerules scans ==" section
after Spark's own output.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from lakerules.spark import attributes, jvm as J, shared

_MODES = {None: "simple", "EXTENDED": "extended", "FORMATTED": "formatted", "CODEGEN": "codegen", "COST": "cost"}
_labels: OrderedDict = OrderedDict()
_notes: OrderedDict = OrderedDict()
_lock = threading.Lock()
_KEEP = 4096


def scan_label(scan) -> str:
    p = scan.plan
    return (
        f"{scan.table} snapshot={scan.snapshot_id} files={len(p.files)}/{p.total_data_files} "
        f"position_delete_files={len(p.position_delete_files)} equality_delete_files={len(p.equality_delete_files)}"
    )


def _key(output) -> tuple:
    """A node's output (lakerules.plan.nodes.Attribute) as the key of its notes: the exprIds."""
    return tuple(a.expr_id for a in output)


def remember(scan, note: str | None = None) -> None:
    """Remember a planned scan's label; ``note`` (e.g. late materialization's decision) is
    shown on its own line under it, after any note add_note left for the scan."""
    key = _key(scan.output)
    with _lock:
        earlier = _notes.get(key)
    label = scan_label(scan) + (f"\n  {earlier}" if earlier else "") + (f"\n  {note}" if note else "")
    with _lock:
        _labels[key] = label
        while len(_labels) > _KEEP:
            _labels.popitem(last=False)


def remember_label(output, label: str) -> None:
    """Remember the label of a read that is not a planned scan (a metadata table)."""
    with _lock:
        _labels[_key(output)] = label
        while len(_labels) > _KEEP:
            _labels.popitem(last=False)


def add_note(output, note: str) -> None:
    """A note for the scan of the relation with these output attributes, shown when it is
    remembered (e.g. why an aggregate was not answered from metadata)."""
    with _lock:
        _notes[_key(output)] = note
        while len(_notes) > _KEEP:
            _notes.popitem(last=False)


def scan_notes(plan) -> list[str]:
    """The planned lake scans of a JVM plan (analyzed, so its lake relations are still there)."""
    out = []

    def walk(node):
        if J.simple_name(node) == "DataSourceV2Relation" and J.class_name(node.table()) == shared.TABLE_CLASS:
            with _lock:
                label = _labels.get(tuple(attributes.expr_ids(node.output())))
            out.append(label or f"{node.table().name()} (not planned yet)")
        for child in J.from_seq(node.children()):
            walk(child)
        for sub in J.from_seq(node.subqueries()):
            walk(sub)

    walk(plan)
    return out


def section(plan) -> str:
    notes = scan_notes(plan)
    if not notes:
        return ""
    return "\n== lakerules scans ==\n" + "\n".join(notes) + "\n"


def explain_text(spark, plan, keyword: str | None) -> str:
    """Spark's EXPLAIN text for a plan, with the lake scans section."""
    mode = _MODES.get(keyword.upper() if keyword else None, "simple")
    text, analyzed = J.explain_string(spark, J.dataframe(spark, plan), mode)  # plans the query: scans are remembered
    return text + section(analyzed)


def install_dataframe_explain() -> None:
    """df.explain() prints the lake scans section too (once per process)."""
    try:
        from pyspark.sql.classic.dataframe import DataFrame  # PySpark 4: the class sessions make
    except ImportError:  # pragma: no cover - older layouts
        from pyspark.sql import DataFrame

    if getattr(DataFrame.explain, "_lakerules", False):
        return
    original = DataFrame.explain

    def explain(self, extended=None, mode=None):
        original(self, extended, mode)
        extra = section(J.analyzed(self))
        if extra:
            print(extra.strip("\n"))

    explain._lakerules = True
    explain.__doc__ = original.__doc__
    DataFrame.explain = explain


def explain_statement(spark, inner: str, mode: str | None):
    """EXPLAIN [mode] <inner>: for a statement that would run a lake command, the lakerules plan of
    the command (planning runs nothing: lakerules.execute); for a query over lake tables, Spark's
    explanation plus the lake scans; None for a statement that touches no lake table (Spark's own
    EXPLAIN takes it)."""
    from lakerules.spark import jvm as J

    analyzed = J.analyze_sql(spark, inner)
    if J.class_name(analyzed) == "io.lakerules.LakeCommand":
        return J.result_rows(spark, [("== lakerules plan (not run) ==\n" + analyzed.description(),)], "plan string")
    if not J.bridge(spark).touchesLake(analyzed):
        return None
    return J.result_rows(spark, [(explain_text(spark, analyzed, mode),)], "plan string")
