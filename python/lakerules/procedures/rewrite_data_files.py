"""Iceberg's rewrite_data_files on OPTIMIZE's engine (lakerules.optimize.rewrite): binpack is its
compaction, ``zorder(...)`` its ZORDER BY, ``hilbert(...)`` its HILBERT BY, a plain sort order its
sort; Iceberg's options honored or refused by name; Iceberg's result row.

    CALL lake.system.rewrite_data_files(table => 'db.t' [, strategy => 'binpack' | 'sort']
                                        [, sort_order => 'zorder(a, b)' | 'hilbert(a, b)' | 'a ASC, b DESC']
                                        [, options => map('target-file-size-bytes', '...', ...)]
                                        [, where => 'partition predicate'])
"""

from __future__ import annotations

from lakerules.errors import LakeError, NotSupported
from lakerules.iceberg import names
from lakerules.optimize.rewrite import Statement, parse, run
from lakerules.spark import jvm as J
from lakerules.write import order as write_order


# Iceberg's rewrite_data_files options: name -> (Settings field or None, kind); None: accepted and
# checked, with no setting of lakerules' to carry (said in the comment). Options Iceberg has that
# lakerules cannot honor are refused with the reason; any other name is an error listing these.
_REWRITE_OPTIONS = {
    "target-file-size-bytes": ("target_file_size", "size"),
    "min-file-size-bytes": ("min_file_size", "size"),
    "min-input-files": ("min_input_files", "count"),
    "delete-file-threshold": ("delete_file_threshold", "count"),
    "delete-ratio-threshold": ("delete_ratio_threshold", "ratio"),
    "rewrite-all": ("rewrite_all", "bool"),
    "max-file-size-bytes": ("max_file_size", "size"),
    "partial-progress.enabled": (None, "false"),  # one atomic commit: partial progress off
    "use-starting-sequence-number": (None, "true"),  # rewritten rows keep the starting sequence number
}
_REFUSED_OPTIONS = {
    "partial-progress.max-commits": "lakerules commits a rewrite once, atomically (partial-progress.enabled is false)",
    "partial-progress.max-failed-commits": "lakerules commits a rewrite once, atomically",
    "max-file-group-size-bytes": "lakerules rewrites a partition's selected files as one group",
    "max-concurrent-file-group-rewrites": "lakerules rewrites all file groups in one Spark job",
    "output-spec-id": "lakerules writes the table's current partition spec",
    "remove-dangling-deletes": "lakerules always drops delete files no live data file needs",
    "shuffle-partitions-per-file": "lakerules writes each file from one task",
    "compression-factor": "lakerules sizes output files by the input's bytes",
}
_CURVES = {"zorder": "zorder", "hilbert": "hilbert"}


def options_of(where: str, raw, known: dict, refused: dict) -> dict:
    out = {}
    for name, value in (raw or {}).items():
        key = name.strip().lower() if name is not None else None
        if key in refused:
            raise NotSupported(f"lakerules: {where}: option {name!r} is not supported: {refused[key]}")
        if key not in known:
            raise LakeError(f"lakerules: {where}: unknown option {name!r}; the options are {sorted(known)}")
        field, kind = known[key]
        text = (value or "").strip().lower()
        if kind in ("true", "false"):
            if text not in ("true", "false"):
                raise LakeError(f"lakerules: {where}: option {name}={value!r}: expected true or false")
            if text != kind:
                raise NotSupported(f"lakerules: {where}: option {name}={value!r} is not supported: lakerules commits "
                                   f"each rewrite once, atomically ({name} is always {kind})")
            continue
        if kind == "bool":
            if text not in ("true", "false"):
                raise LakeError(f"lakerules: {where}: option {name}={value!r}: expected true or false")
            out[field] = text == "true"
            continue
        if kind == "ratio":
            try:
                ratio = float(text)
            except ValueError:
                ratio = -1.0
            if not 0 < ratio <= 1:
                raise LakeError(f"lakerules: {where}: option {name}={value!r}: expected a number > 0 and <= 1")
            out[field] = ratio
            continue
        try:
            number = int(text)
        except ValueError:
            number = -1
        if number < (1 if kind == "size" else 0):
            raise LakeError(f"lakerules: {where}: option {name}={value!r}: expected "
                            f"{'a positive number of bytes' if kind == 'size' else 'a whole number >= 0'}")
        out[field] = number
    return out


def _sort_order(where: str, text: str) -> tuple[str, tuple[tuple[str, ...], ...]]:
    """('zorder' | 'hilbert', column paths) of sort_order 'zorder(a, b)' / 'hilbert(a, b)', read by
    the OPTIMIZE grammar (names quoted with backticks as Spark quotes them)."""
    head, _, rest = text.strip().partition("(")
    curve = _CURVES.get(head.strip().lower())
    if curve is None or not rest.rstrip().endswith(")"):
        raise LakeError(
            f"lakerules: {where}: sort_order {text!r} is not a curve: write 'zorder(c1, c2, ...)' or "
            "'hilbert(c1, c2, ...)' (a plain sort order is 'a ASC, b DESC')"
        )
    inner = rest.rstrip()[:-1]
    clause = "HILBERT BY" if curve == "hilbert" else "ZORDER BY"
    try:
        statement = parse(f"OPTIMIZE t {clause} ({inner})")
    except LakeError as e:
        raise LakeError(f"lakerules: {where}: sort_order {text!r}: {str(e).splitlines()[0].split(': ', 2)[-1]}") from None
    return curve, statement.zorder


def _rewrite_statement(ctx, table, values: dict, procedure: str, result):
    where = f"CALL system.{procedure}"
    strategy = (values.get("strategy") or "").strip().lower() or None
    sort_order = values.get("sort_order")
    if strategy not in (None, "binpack", "sort"):
        raise LakeError(f"lakerules: {where}: unknown strategy {values['strategy']!r}; the strategies are binpack, sort")
    if strategy == "binpack" and sort_order is not None:
        raise LakeError(f"lakerules: {where}: strategy binpack takes no sort_order; use strategy => 'sort'")
    curve, columns, sort, sort_order_id = "zorder", (), (), None
    if sort_order is not None or strategy == "sort":
        if sort_order is None:
            sort, sort_order_id = write_order.table_sort_fields(table)
            if not sort:
                raise LakeError(f"lakerules: {where}: strategy sort without a sort_order sorts by the table's sort "
                                f"order, and {names.table_name(table)} has none: give sort_order => 'a ASC, b DESC' "
                                "(or 'zorder(a, b)'), or set one with ALTER TABLE ... WRITE ORDERED BY")
        elif _is_curve(sort_order):
            curve, columns = _sort_order(where, sort_order)
        else:
            sort = write_order.parse_sort_order(table, sort_order, where)
            table_fields, table_order_id = write_order.table_sort_fields(table)
            sort_order_id = table_order_id if _same_fields(sort, table_fields) else None
    overrides = options_of(where, values.get("options"), _REWRITE_OPTIONS, _REFUSED_OPTIONS)
    if "min_file_size" not in overrides and "target_file_size" in overrides:
        overrides["min_file_size"] = overrides["target_file_size"] * 3 // 4  # Iceberg's default: 75% of the target
    overrides.setdefault("min_input_files", 5)  # Iceberg's default
    return Statement(table=".".join(table.name()), where=values.get("where"), zorder=columns,
                     text=f"{where}", curve=curve, overrides=tuple(sorted(overrides.items())),
                     result=result, sort=sort, sort_order_id=sort_order_id)


def _is_curve(text: str) -> bool:
    head, paren, _ = text.strip().partition("(")
    return bool(paren) and head.strip().lower() in _CURVES


def _same_fields(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x[0] == y[0] and str(x[1]) == str(y[1]) and x[2:] == y[2:] for x, y in zip(a, b))


def rewrite_data_files(ctx, table, values: dict):
    """Iceberg's rewrite_data_files on OPTIMIZE's engine; Iceberg's result row."""
    from lakerules.procedures.maintenance import RESULTS

    def result(ctx, table, settings, removed, written, dropped):
        row = (len(removed), len(written), sum(f.file_size_in_bytes for f in removed), 0, len(dropped))
        return J.result_rows(ctx.spark, [row], RESULTS["rewrite_data_files"])

    statement = _rewrite_statement(ctx, table, values, "rewrite_data_files", result)
    return run(ctx, table, statement)

