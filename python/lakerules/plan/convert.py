"""The plan model's conversions: a resolved Spark JVM plan as lakerules nodes (``from_jvm``) and
back (``to_jvm``). ``from_jvm`` turns the parts of a plan that touch lake tables into nodes of
lakerules.plan.nodes; everything else stays a ``SparkNode`` that wraps the JVM node (a subtree
that touches no lake table is kept whole, as one opaque leaf). ``to_jvm`` reuses every JVM node
that did not change and lowers planned nodes through ``ctx.lowerings`` (running nothing).
"""

from __future__ import annotations

from lakerules.errors import LakeError, NotSupported
from lakerules.plan.nodes import (
    Attribute,
    CreateTableAsSelect,
    DeleteFromLake,
    DescribeLakeColumn,
    Filter,
    LakeRelation,
    MergeAction,
    MergeIntoLake,
    Node,
    SparkNode,
    StatementCommand,
    StreamWriteToLake,
    TableRef,
    UpdateLake,
    WriteToLake,
)
from lakerules.spark import attributes, jvm as J, shared


# ---- JVM -> lakerules ---------------------------------------------------------------------

_WRITE_MODES = {"AppendData": "append", "OverwriteByExpression": "overwrite", "OverwritePartitionsDynamic": "dynamic"}


def from_jvm(spark, plan) -> Node:
    """The lakerules view of a resolved JVM plan."""
    if not J.touches_lake(spark, plan):
        return SparkNode(plan)
    name = J.simple_name(plan)
    if J.class_name(plan) == shared.STATEMENT_CLASS:
        return _statement(plan)
    if name == "DataSourceV2Relation" and _is_lake_table(plan.table()):
        return _relation(plan)
    if name == "Filter":
        return Filter(plan, (from_jvm(spark, plan.child()),), conjuncts=tuple(split_conjuncts(plan.condition())))
    if name in _WRITE_MODES and _is_lake_relation(plan.table()):
        target = _writable(_relation(plan.table()))
        return WriteToLake(
            table=target.table,
            mode=_WRITE_MODES[name],
            query=from_jvm(spark, plan.query()),
            delete_condition=plan.deleteExpr() if name == "OverwriteByExpression" else None,
            jvm=plan,
            options=tuple(sorted(J.scala_map(plan.writeOptions()).items())),
        )
    if name == "WriteToMicroBatchDataSource" and _is_lake_relation(plan.relation()):
        batch = J.option_value(plan.batchId())
        if batch is not None:  # Spark sets it on each batch's plan, before running it
            return StreamWriteToLake(
                table=_relation(plan.relation()).table,
                query=from_jvm(spark, plan.query()),
                query_id=str(plan.queryId()),
                batch_id=int(batch),
                mode=str(plan.outputMode().toString()).lower(),
                options=tuple(sorted(J.scala_map(plan.writeOptions()).items())),
                jvm=plan,
            )
    if name == "UpdateTable":
        target = _unaliased(plan.table())
        if _is_lake_relation(target):
            rel = _writable(_relation(target))
            cond = plan.condition()
            cond = J.option_value(cond) if hasattr(cond, "isDefined") else cond
            if cond is not None and J.simple_name(cond) == "Literal" and cond.sql() == "true":
                cond = None
            assignments = tuple((a.key(), a.value()) for a in J.from_seq(plan.assignments()))
            return UpdateLake(table=rel.table, relation=rel, assignments=assignments, condition=cond, jvm=plan)
    if name == "MergeIntoTable":
        target = _unaliased(plan.targetTable())
        if _is_lake_relation(target):
            rel = _writable(_relation(target))
            return MergeIntoLake(
                table=rel.table, relation=rel, source=plan.sourceTable(), condition=plan.mergeCondition(),
                matched=_merge_actions(plan.matchedActions()),
                not_matched=_merge_actions(plan.notMatchedActions()),
                not_matched_by_source=_merge_actions(plan.notMatchedBySourceActions()),
                jvm=plan,
            )
    if name == "DeleteFromTable":
        target = _unaliased(plan.table())
        if _is_lake_relation(target):
            rel = _writable(_relation(target))
            cond = plan.condition()
            is_true = J.simple_name(cond) == "Literal" and cond.sql() == "true"
            return DeleteFromLake(table=rel.table, relation=rel, condition=None if is_true else cond, jvm=plan)
    if name == "TruncateTable" and _is_resolved_lake_table(plan.table()):
        rel = _writable(_relation(J.relation_of(spark, plan.table())))
        return DeleteFromLake(table=rel.table, relation=rel, condition=None, jvm=plan, truncate=True)
    if name == "DescribeColumn" and _is_resolved_lake_table(plan.relation()):
        rel = _relation(J.relation_of(spark, plan.relation()))
        node = _describe_column(plan, rel.table)
        if node is not None:
            return node
    if name in ("CreateTableAsSelect", "ReplaceTableAsSelect") and _is_lake_catalog(plan.name()):
        return _ctas(spark, plan, name == "ReplaceTableAsSelect")
    kids = tuple(from_jvm(spark, c) for c in J.from_seq(plan.children()))
    return SparkNode(plan, kids)


def _describe_column(plan, table_ref: TableRef) -> DescribeLakeColumn | None:
    """Spark's DescribeColumn EXTENDED over a lake table, or None (another column form: Spark's)."""
    column = plan.column()
    if not plan.isExtended() or J.simple_name(column) != "AttributeReference":
        return None
    lake_table = plan.relation().table()
    metadata = column.metadata()
    snapshot = lake_table.snapshotId()
    return DescribeLakeColumn(
        table=table_ref,
        column=column.name(),
        data_type=column.dataType().catalogString(),
        comment=metadata.getString("comment") if metadata.contains("comment") else None,
        snapshot_id=None if snapshot < 0 else snapshot,
        metadata_table=lake_table.properties().get(shared.METADATA_TABLE_PROPERTY),
        jvm=plan,
    )


def _statement(plan) -> StatementCommand:
    """io.lakerules.LakeStatement: the statement's data (lakerules.sql.statements parsed it) over
    the table Spark resolved, or over none (a statement on a catalog)."""
    from lakerules.plan import statements

    payload, child = J.statement_of(plan)
    statement = statements.from_json(payload)
    if statement.table is None:
        return StatementCommand(table=None, statement=statement)
    while J.simple_name(child) == "SubqueryAlias":  # Spark names the resolved relation
        child = child.child()
    if not _is_lake_relation(child):
        raise LakeError(f"lakerules: {statement.describe()}: this statement needs a lake table; "
                        f"{child.simpleString(1)} is not one")
    return StatementCommand(table=_writable(_relation(child)).table, statement=statement)


def _writable(rel: LakeRelation) -> LakeRelation:
    """The target of a write; a metadata table is refused."""
    if rel.metadata_table is not None:
        raise NotSupported(f"lakerules: metadata table {rel.table}.{rel.metadata_table} is read-only")
    return rel


def _unaliased(plan):
    """The relation under a row-level command's target alias (DELETE FROM t AS x)."""
    while J.simple_name(plan) == "SubqueryAlias":
        plan = plan.child()
    return plan


def _merge_actions(seq) -> tuple:
    out = []
    for a in J.from_seq(seq):
        kind = {"UpdateAction": "update", "DeleteAction": "delete", "InsertAction": "insert"}.get(J.simple_name(a))
        if kind is None:
            raise NotSupported(f"lakerules: MERGE action {a.simpleString(5)} is not supported")
        assignments = () if kind == "delete" else tuple((x.key(), x.value()) for x in J.from_seq(a.assignments()))
        out.append(MergeAction(kind, J.option_value(a.condition()), assignments))
    return tuple(out)


def split_conjuncts(expr) -> list:
    if J.simple_name(expr) == "And":
        return split_conjuncts(expr.left()) + split_conjuncts(expr.right())
    return [expr]


def _is_lake_table(table) -> bool:
    return J.class_name(table) == shared.TABLE_CLASS


def _is_resolved_lake_table(plan) -> bool:
    """A command's target table (ResolvedTable) that is a lake table."""
    return J.simple_name(plan) == "ResolvedTable" and _is_lake_table(plan.table())


def _is_lake_relation(plan) -> bool:
    return J.simple_name(plan) == "DataSourceV2Relation" and _is_lake_table(plan.table())


def _is_lake_catalog(ident_plan) -> bool:
    return J.simple_name(ident_plan) == "ResolvedIdentifier" and J.class_name(ident_plan.catalog()) == shared.CATALOG_CLASS


def _relation(plan) -> LakeRelation:
    t = plan.table()
    snapshot = t.snapshotId()
    meta = t.properties().get(shared.METADATA_TABLE_PROPERTY)
    ref = TableRef(t.catalogName(), tuple(t.namespace()), t.tableName(), t.ref())
    if meta is not None:  # a metadata table: the relation names its base table
        import json

        base = json.loads(t.properties().get(shared.METADATA_TABLE_BASE_PROPERTY))
        ref = TableRef(t.catalogName(), tuple(base[:-1]), base[-1])
    return LakeRelation(
        table=ref,
        metadata_table=meta,
        snapshot_id=None if snapshot < 0 else snapshot,
        time_travel=bool(plan.timeTravelSpec().isDefined()),
        output=tuple(Attribute(name, a, ident) for ident, name, a in attributes.with_objects(plan.output())),
        jvm=plan,
        options=_options(plan.options()),
    )


def _options(options) -> tuple:
    """A relation's read options (a CaseInsensitiveStringMap) as sorted (lower-case key, value)
    pairs; one JVM call when there are none (a Py4J map is read entry by entry)."""
    if options.isEmpty():
        return ()
    return tuple(sorted((str(k).lower(), str(v)) for k, v in options.asCaseSensitiveMap().items()))


def _ctas(spark, plan, is_replace: bool) -> CreateTableAsSelect:
    ident = plan.name().identifier()
    spec = plan.tableSpec()
    props = {t._1(): t._2() for t in J.from_seq(spec.properties().toList())}
    provider = J.option_value(spec.provider())
    if provider is not None:
        props["provider"] = provider
    location = J.option_value(spec.location())
    if location is not None:
        props["location"] = location
    comment = J.option_value(spec.comment())
    if comment is not None:
        props["comment"] = comment
    transforms = tuple(_transform_json(t) for t in J.from_seq(plan.partitioning()))
    return CreateTableAsSelect(
        table=TableRef(plan.name().catalog().name(), tuple(ident.namespace()), ident.name()),
        partitioning=transforms,
        properties=tuple(sorted(props.items())),
        query=from_jvm(spark, plan.query()),
        if_not_exists=bool(plan.ignoreIfExists()) if not is_replace else False,
        replace=is_replace,
        or_create=bool(plan.orCreate()) if is_replace else False,
        jvm=plan,
        options=tuple(sorted(J.scala_map(plan.writeOptions()).items())),
    )


def _transform_json(t) -> dict:
    args = []
    for e in t.arguments():
        cls = J.class_name(e)
        if hasattr(e, "fieldNames") and "Reference" in cls:
            args.append({"ref": list(e.fieldNames())})
        elif "Literal" in cls:
            args.append({"lit": str(e.value())})
        else:
            args.append({"expr": e.describe()})
    return {"name": t.name(), "args": args}


# ---- lakerules -> JVM ---------------------------------------------------------------------


def to_jvm(ctx, node: Node):
    """The JVM plan for a lakerules plan. Nodes lakerules planned lower through
    ``ctx.lowerings`` (by node type, the nearest base class that has one): a scan becomes a
    file read, a command one JVM command node that runs when Spark executes it. Lowering runs
    nothing."""

    def lower(n: Node):
        match n:
            case SparkNode(kids=()):
                return n.jvm
            case SparkNode():
                new = [lower(k) for k in n.kids]
                # Unchanged children lower to the very JVM proxies from_jvm took them from.
                if all(j is getattr(k, "jvm", None) for j, k in zip(new, n.kids)):
                    return n.jvm
                return n.jvm.withNewChildren(J.to_seq(ctx.spark, new))
            case LakeRelation():
                return n.jvm
            case _:
                lowering = next((ctx.lowerings[c] for c in type(n).__mro__ if c in ctx.lowerings), None)
                if lowering is None:
                    raise TypeError(f"lakerules: no lowering for plan node {type(n).__name__}")
                return lowering(ctx, n, lower)

    return lower(node)
