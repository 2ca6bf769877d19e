"""The rule registry: one ordered list of batches, each an ordered tuple of rules.

A rule is a function ``rule(plan, ctx) -> plan`` over lakerules plan nodes (``lakerules.plan.nodes``).
It returns the same object when it changes nothing. The registry applies each batch's rules in
order to the whole plan, then turns the plan back into Spark's. Rules only plan: a command
becomes a JVM command node that Spark runs when it executes the statement (lakerules.execute.run).

Batches run in one of two phases. ``analysis`` batches see each statement right after Spark
resolved it: writes and row-level commands are planned then. ``optimizer`` batches see
queries inside Spark's operator optimization, after Spark pushed filters down next to each lake
relation: scans are planned then.

Users add rules with :func:`register_rule`; they run in the ``user`` batch (optimizer phase,
after scans are planned), unless another batch is named.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

from lakerules.scan.latemat import late_materialize
from lakerules.plan.nodes import Node, transform_up
from lakerules.rules.aggregates_from_metadata import aggregates_from_metadata
from lakerules.rules.check_options import check_options
from lakerules.rules.plan_statements import plan_statements
from lakerules.rules.push_filters import push_filters
from lakerules.rules.rewrite_delete import rewrite_delete
from lakerules.rules.rewrite_merge import rewrite_merge
from lakerules.rules.rewrite_update import rewrite_update
from lakerules.rules.resolve_scans import resolve_scans

Rule = Callable[[Node, object], Node]


@dataclass
class Batch:
    name: str
    phase: str  # "analysis" or "optimizer"
    doc: str
    rules: list[Rule] = field(default_factory=list)


def _default_batches() -> list[Batch]:
    return [
        # Row-level commands (DELETE, UPDATE, MERGE) are rewritten right after analysis, while
        # their target is a relation: they read it with file and position columns.
        Batch("row-level", "analysis", "DELETE/UPDATE/MERGE on lake tables become writes of delete files and data",
              [rewrite_delete, rewrite_update, rewrite_merge]),
        # Statements Spark lacks (OPTIMIZE) are planned from the table's metadata, for EXPLAIN.
        Batch("statements", "analysis", "OPTIMIZE and the like planned: files, bins", [plan_statements]),
        # Read and write options lakerules does not honor are refused before anything runs.
        Batch("options", "analysis", "read and write options honored or refused", [check_options]),
        # In the optimizer, filters next to lake relations are handed to them, then every lake
        # relation becomes a scan of the data files of its snapshot that can hold matching rows.
        Batch("scans", "optimizer", "lake relations become planned, pruned file scans", [push_filters, resolve_scans]),
        # A filtered scan may be read in two phases: the filter's columns first, the rest only
        # where rows match (seed 004; spark.lakerules.read.lateMaterialization).
        Batch("late-materialization", "optimizer", "filtered scans read the filter columns first, the rest late",
              [late_materialize]),
        # Users' rules see planned scans.
        Batch("user", "optimizer", "rules added with lakerules.register_rule"),
        # count/min/max the manifests answer exactly: that answer, and no scan at all.
        Batch("aggregates", "optimizer", "count(*), min and max answered from the manifests when exact",
              [aggregates_from_metadata]),
    ]


_lock = threading.Lock()
BATCHES: list[Batch] = _default_batches()


def batch(name: str) -> Batch:
    for b in BATCHES:
        if b.name == name:
            return b
    raise KeyError(f"lakerules: no rule batch {name!r}; batches are {[b.name for b in BATCHES]}")


def register_rule(rule: Rule, batch_name: str = "user") -> Rule:
    """Add a rule to a batch (default ``user``). Usable as a decorator. Returns the rule."""
    if not callable(rule):
        raise TypeError("lakerules: a rule is a function rule(plan, ctx) -> plan")
    with _lock:
        target = batch(batch_name)
        if rule not in target.rules:
            target.rules.append(rule)
    return rule


def unregister_rule(rule: Rule) -> None:
    with _lock:
        for b in BATCHES:
            if rule in b.rules:
                b.rules.remove(rule)


def apply_rules(plan: Node, ctx, phase: str) -> Node:
    """Every rule of every batch of the phase, in order, each over the whole tree (children first)."""
    for b in [b for b in BATCHES if b.phase == phase]:
        for rule in list(b.rules):
            plan = transform_up(plan, lambda node, r=rule: r(node, ctx))
    return plan
