"""CALL <catalog>.system.<procedure>(...) (lakerules.plan.statements.Call), run when Spark
executes the statement: the arguments evaluated and checked against the procedure's signature
(lakerules.procedures.maintenance.bind), the table they name loaded, the procedure run.
"""

from __future__ import annotations

from pyiceberg import exceptions as ie

from lakerules.errors import LakeError
from lakerules.plan.nodes import TableRef
from lakerules.procedures import changelog, history, imports, maintenance, missing_files, rewrite_data_files
from lakerules.procedures import rewrite_position_delete_files
from lakerules.spark import jvm as J
from lakerules.iceberg import format_version

# procedure -> run(ctx, table, values); register_table runs on the catalog (the table is new)
RUNS = {
    "add_files": imports.add_files,
    "remove_missing_files": missing_files.remove_missing_files,
    "remove_orphan_files": maintenance.remove_orphan_files,
    "expire_snapshots": maintenance.expire_snapshots,
    "rewrite_manifests": maintenance.rewrite_manifests,
    "rewrite_data_files": rewrite_data_files.rewrite_data_files,
    "rewrite_position_delete_files": rewrite_position_delete_files.run,
    "rollback_to_snapshot": history.rollback_to_snapshot,
    "rollback_to_timestamp": history.rollback_to_timestamp,
    "set_current_snapshot": history.set_current_snapshot,
    "cherrypick_snapshot": history.cherrypick_snapshot,
    "fast_forward": history.fast_forward,
    "publish_changes": history.publish_changes,
    "create_changelog_view": changelog.create_changelog_view,
}


def result_schema(stmt) -> str:
    """The procedure's result columns (Iceberg's); a LakeError naming lakerules' procedures for
    one it does not have."""
    if stmt.procedure not in maintenance.PROCEDURES:
        raise LakeError(
            f"lakerules: procedure {stmt.catalog}.system.{stmt.procedure} not found; lakerules has "
            f"{', '.join(f'{stmt.catalog}.system.' + p for p in maintenance.PROCEDURES)}"
        )
    return maintenance.RESULTS[stmt.procedure]


def run(ctx, stmt):
    """Run the CALL; (the table it ran on or None, the JVM plan of its result rows)."""
    result_schema(stmt)
    spark, catalog, procedure = ctx.spark, stmt.catalog, stmt.procedure
    values = maintenance.bind(spark, procedure, catalog, list(stmt.args))
    table_parts = J.name_parts(spark, values["table"])
    if len(table_parts) >= 3 and (table_parts[0].lower() == catalog.lower() or _is_catalog(spark, table_parts[0])):
        if table_parts[0].lower() != catalog.lower():
            raise LakeError(
                f"lakerules: CALL {catalog}.system.{procedure}: table {values['table']!r} is in catalog "
                f"{table_parts[0]!r}; call that catalog's procedure"
            )
        table_parts = table_parts[1:]
    if len(table_parts) < 2:
        raise LakeError(
            f"lakerules: CALL {catalog}.system.{procedure}: name the table as namespace.table, not {values['table']!r}"
        )
    ref = TableRef(catalog, tuple(table_parts[:-1]), table_parts[-1])
    if procedure == "register_table":  # the table does not exist yet: on the catalog
        return ref, imports.register_table(ctx, catalog, ref.identifier, values)
    try:
        table = ctx.catalogs.load_for_statement(ref, ctx.conf, stmt)
    except (ie.NoSuchTableError, ie.NoSuchNamespaceError):
        raise LakeError(f"lakerules: CALL {catalog}.system.{procedure}: table {ref} does not exist") from None
    if procedure in NOT_ON_V3:
        format_version.refuse_on_v3(table, f"CALL {catalog}.system.{procedure}")
    return ref, RUNS[procedure](ctx, table, values)


# Procedures that write what lakerules does not write correctly on format-version 3 tables yet:
# refused there (none now; the check stays for the next one).
NOT_ON_V3: frozenset = frozenset()


def _is_catalog(spark, name: str) -> bool:
    return bool(J.catalog_manager(spark).isCatalogRegistered(name))



