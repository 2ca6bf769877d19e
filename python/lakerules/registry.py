"""The rule registry: one ordered list of batches, each an ordered tuple of rules.

A rule is a function ``rule(plan, ctx) -> plan`` over lakerules plan nodes (``lakerules.plan``).
It returns the same object when it changes nothing. The registry applies each batch's rules in
order to the whole plan, then turns the plan back into Spark's (running commands on the way).

Users add rules with :func:`register_rule`; they run in the ``user`` batch, after lakerules' own
rules have planned the scans and writes, unless another batch is named.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

from lakerules.plan import Node, transform_up
from lakerules.rules.push_filters import push_filters
from lakerules.rules.resolve_scans import resolve_scans

Rule = Callable[[Node, object], Node]


@dataclass
class Batch:
    name: str
    doc: str
    rules: list[Rule] = field(default_factory=list)


def _default_batches() -> list[Batch]:
    return [
        # Row-level commands (DELETE, UPDATE, MERGE) are rewritten while their target is still a
        # relation, before scans are planned: they read the target with file and position columns.
        Batch("row-level", "DELETE/UPDATE/MERGE on lake tables become writes of delete files and data"),
        # Filters over lake relations are handed to them, then every lake relation becomes a
        # scan of the data files of its snapshot that can hold matching rows.
        Batch("scans", "lake relations become planned, pruned file scans", [push_filters, resolve_scans]),
        # Users' rules see planned scans and writes.
        Batch("user", "rules added with lakerules.register_rule"),
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


def apply_rules(plan: Node, ctx) -> Node:
    """Every rule of every batch, in order, each over the whole tree (children first)."""
    for b in list(BATCHES):
        for rule in list(b.rules):
            plan = transform_up(plan, lambda node, r=rule: r(node, ctx))
    return plan
