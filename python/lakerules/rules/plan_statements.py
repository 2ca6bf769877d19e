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
        # a statement on a table whose planner plans ahead (ctx.planners: statement type -> planner)
        case StatementCommand(planned=None, table=t) if t is not None and type(plan.statement) in ctx.planners:
            table = ctx.catalogs.load_for_statement(t, ctx.conf, plan.statement)
            return replace(plan, planned=ctx.planners[type(plan.statement)](ctx, table, plan.statement))
        case _:
            return plan
