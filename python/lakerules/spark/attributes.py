"""Catalyst attributes (a plan's output, an expression's references) as Python reads them: the
expression ids and names of all of them in one Py4J call, each JVM object in one more.

Iterating a Scala Seq through Py4J costs two calls an element (``hasNext``, ``next``), and each
``exprId().id()`` or ``name()`` one or two more: about 400 calls planning a late-materialized
query of a 60-column table, a tenth of a second of round trips.
"""

from __future__ import annotations

from lakerules.spark.jclasses import jclass_of

_BUILDERS = "io.lakerules.PlanBuilders"


def ids_and_names(attributes) -> list[tuple[int, str]]:
    """(exprId's id, name) of each attribute of a Scala iterable of them, in order: one call."""
    if not hasattr(attributes, "_gateway_client"):  # not through Py4J (the rule unit layer's stand-ins)
        return [(a.exprId().id(), a.name()) for a in _each(attributes)]
    text = str(jclass_of(attributes._gateway_client, _BUILDERS).attributeIds(attributes))
    out = []
    i = 0
    while i < len(text):
        comma = text.index(",", i)
        ident = int(text[i:comma])
        second = text.index(",", comma + 1)
        end = second + 1 + int(text[comma + 1:second])
        out.append((ident, text[second + 1:end]))
        i = end
    return out


def _each(attributes) -> list:
    it = attributes.iterator()
    out = []
    while it.hasNext():
        out.append(it.next())
    return out


def expr_ids(attributes) -> list[int]:
    """The exprIds' ids of a Scala iterable of attributes, in order: one call."""
    return [ident for ident, _ in ids_and_names(attributes)]


def with_objects(attributes) -> list[tuple[int, str, object]]:
    """(exprId's id, name, the JVM attribute) of each attribute, in order: one call for the ids
    and names, one for each object."""
    named = ids_and_names(attributes)
    if not named:
        return []
    if not hasattr(attributes, "_gateway_client"):
        return [(ident, name, a) for (ident, name), a in zip(named, _each(attributes))]
    array = jclass_of(attributes._gateway_client, _BUILDERS).attributeArray(attributes)
    return [(ident, name, array[k]) for k, (ident, name) in enumerate(named)]
