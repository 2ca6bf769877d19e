"""plan_statements: a statement Spark's grammar lacks is planned from the table's metadata.

    StatementCommand lake.db.t OPTIMIZE lake.db.t ZORDER BY (a, b)
becomes the same command holding its plan (for OPTIMIZE: the files considered, the bins and
the files each rewrites, the z-order columns), which EXPLAIN shows and the executor runs
(planning again only if the table moved since). Statements with nothing to plan ahead (CALL,
partition evolution) are left as they are.
"""

from __future__ import annotations

from dataclasses import replace

from lakerules.plan.nodes import Node, StatementCommand


def plan_statements(plan: Node, ctx) -> Node:
    match plan:
        case StatementCommand(planned=None) if hasattr(plan.run_fn, "plan"):
            t = plan.table
            table = ctx.catalogs.load_for_statement(t, ctx.conf, plan.run_fn)
            return replace(plan, planned=plan.run_fn.plan(ctx, table))
        case _:
            return plan
