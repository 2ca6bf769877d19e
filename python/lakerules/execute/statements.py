"""The statements lakerules parses (lakerules.plan.statements) and what runs each: one dispatch
table from statement type to its runner, ``fn(ctx, table, statement[, planned])`` on the table
Spark resolved; the planners of those planned ahead (EXPLAIN shows their plan); their result
columns. CALL runs on its catalog: its table is an argument (lakerules.procedures.call).
"""

from __future__ import annotations

from lakerules.optimize import rewrite as optimize
from lakerules.plan import statements as S
from lakerules.procedures import call, history, vacuum
from lakerules.write import order as write_order, partition_fields


def _optimize(ctx, table, stmt, planned=None):
    return optimize.run(ctx, table, optimize.statement_of(stmt), planned=planned)


def _plan_optimize(ctx, table, stmt):
    return optimize.plan(ctx, table, optimize.statement_of(stmt))


RUNNERS = {
    S.Optimize: _optimize,
    S.PartitionFieldChange: partition_fields.run,
    S.RefChange: history.run_ref_change,
    S.WriteOrderChange: write_order.run_write_order,
    S.IdentifierFieldsChange: write_order.run_identifier_fields,
    S.DescribeHistory: history.run_describe_history,
    S.Restore: history.run_restore,
    S.Vacuum: vacuum.run_statement,
}
PLANNERS = {S.Optimize: _plan_optimize}
RESULTS = {
    S.Optimize: optimize.RESULT_SCHEMA,
    S.DescribeHistory: history.HISTORY_RESULT,
    S.Restore: history.RESTORE_RESULT,
    S.Vacuum: vacuum.RESULT,
}


def result_schema(stmt) -> str:
    """The statement's result columns (DDL; "" for none)."""
    if isinstance(stmt, S.Call):
        return call.result_schema(stmt)
    return RESULTS.get(type(stmt), "")


def run(ctx, node):
    """Run a StatementCommand; (the table it changed, or None, the JVM plan of its result rows)."""
    stmt = node.statement
    if isinstance(stmt, S.Call):
        return call.run(ctx, stmt)
    table = ctx.catalogs.load_for_statement(node.table, ctx.conf, stmt)
    runner = RUNNERS[type(stmt)]
    if node.planned is not None:
        return node.table, runner(ctx, table, stmt, planned=node.planned)
    return node.table, runner(ctx, table, stmt)
