"""What a MERGE learns from its source before it reads the target (lakerules.rowlevel.merge):
the source computed once when it is small, its keys' bounds and values, and the target files
those keys can match.

For each ``t.k = <source expression>`` conjunct of the ON condition on a top-level integer,
long or string column ``k``, the keys' minimum and maximum (NULL keys match nothing) prune the
planned files by their manifest bounds; for a small source, its distinct keys of the first such
column keep only files whose bounds hold one of them.
"""

from __future__ import annotations

import bisect
import dataclasses

from pyiceberg.expressions import And, GreaterThanOrEqual, In, LessThanOrEqual
from pyiceberg.types import IntegerType, LongType, StringType
from pyspark.sql import functions as F

from lakerules.scan import bloom_filters, manifest_columns, manifest_job, manifests
from lakerules.scan.bounds import file_bounds
from lakerules.scan.planning import plan_scan
from lakerules.spark import attributes, jvm as J, progress
from lakerules.spark.local_keys import local_keys

_BOUNDED = (IntegerType, LongType, StringType)
_SPARK_BOUNDED = ("int", "bigint", "string")  # a collated string compares otherwise than its bytes
# a small source's keys probed in the target files' bloom filters at most (lakerules.scan.bloom_filters):
# more keys than this would find nearly every file anyway
BLOOM_KEYS = 1000


def computed_once(spark, node):
    """The node with its source computed once, now, into a LocalRelation when Spark estimates it
    small enough to broadcast (as Spark's broadcast would collect it to the driver anyway): the
    keys, the join and the inserted rows then read it, not the source's plan three times. A
    source reading only what is in memory (a cached DataFrame, local rows) is not collected (that
    would cost more, ~0.05 s, than reading it again); when it is that small, it is read in one
    task (a coalesce, same rows and attributes): a cached DataFrame keeps the partitions that
    cached it (8 after a window over 8 shuffle partitions), and a job of a task per partition
    took 0.11 s to collect 10,000 keys, one task 0.07 s, for the keys, the broadcast and the
    inserted rows each."""
    source = J.dataframe(spark, node.source)
    if J.reads_only_memory(source):
        if _estimated_small(spark, source):
            return dataclasses.replace(node, source=J.analyzed(source.coalesce(1)))
        return node
    if _estimated_small(spark, source):
        progress.step(spark, "read the source")
        return dataclasses.replace(node, source=J.materialized(spark, node.source))
    return node


class Keys:
    """The ON condition's ``t.k = <source expression>`` conjuncts whose target side is a
    top-level column with manifest bounds Python compares as Iceberg does. After ``stats``,
    ``unique`` says whether the source's rows are known to have distinct keys (then no target
    row matches two source rows: nothing for the cardinality check to find)."""

    def __init__(self, spark, node):
        self.spark, self.node = spark, node
        target = {a.expr_id: a for a in node.relation.output}
        source = set(attributes.expr_ids(node.source.output()))
        self.pairs = []  # (column name, source expression)
        for left, right in J.equi_keys(node.condition, set(target), source):
            if J.simple_name(left) != "AttributeReference" or left.exprId().id() not in target:
                continue
            kind = left.dataType().simpleString()
            if kind in _SPARK_BOUNDED and right.dataType().simpleString() == kind:
                self.pairs.append((target[left.exprId().id()].name, right))

    def stats(self) -> tuple[int, list]:
        """The source's row count and, per key, (column name, min, max) of its non-NULL values
        (min None: every key NULL). A source Spark estimates small enough to broadcast comes to
        the driver whole (its key columns, through Arrow: one job, and ``first`` then needs none);
        any other is aggregated in one job."""
        spark = self.spark
        names = [f"__lakerules_k{i}" for i in range(len(self.pairs))]
        frame = J.dataframe(spark, J.project_as(spark, self.node.source, [e for _, e in self.pairs] + [J.literal(spark, 1)],
                                                names + ["__lakerules_one"]))
        self.frame, self._first = frame, None
        self.unique = False  # known only for a source read whole (below)
        if _estimated_small(spark, frame):
            local = local_keys(frame, len(names)) if names else None
            if local is not None:  # local rows of integer keys: no job
                self._first, self.unique = local.first, local.unique
                return local.rows, [(name, low, high) for (name, _), (low, high) in zip(self.pairs, local.bounds)]
            return self._collected(frame.select(*names, "__lakerules_one").toArrow())
        aggs = [F.count(F.lit(1))]
        for n in names:
            aggs += [F.min(n), F.max(n)]
        row = frame.agg(*aggs).collect()[0]
        bounds = [(name, row[1 + 2 * i], row[2 + 2 * i]) for i, (name, _) in enumerate(self.pairs)]
        return row[0], bounds

    def _collected(self, keys) -> tuple[int, list]:
        """stats() of the source's key columns as an Arrow table (Arrow's min and max order
        strings by their UTF-8 bytes, as Spark does)."""
        import pyarrow.compute as pc

        bounds = []
        for i, (name, _) in enumerate(self.pairs):
            found = pc.min_max(keys.column(i))
            bounds.append((name, found["min"].as_py(), found["max"].as_py()))
        if self.pairs:
            self._first = sorted(pc.unique(keys.column(0).drop_null()).to_pylist())
            # no two source rows with the same non-NULL keys: no target row can match two of them
            names = keys.column_names[:len(self.pairs)]
            matching = keys.select(names).drop_null()
            self.unique = matching.group_by(names).aggregate([]).num_rows == matching.num_rows
        return keys.num_rows, bounds

    def first(self) -> list:
        """The first key's distinct non-NULL values in the source, sorted (a small source)."""
        if self._first is not None:
            return self._first
        progress.step(self.spark, "read the source's keys")
        column = "__lakerules_k0"
        # through Arrow: a pickled Row per key costs ~0.1 s per 10,000 keys
        keys = self.frame.where(F.col(column).isNotNull()).select(column).distinct().toArrow()
        return sorted(keys.column(0).to_pylist())


def within_bounds(spark, table, snapshot, expr, files: list, bounds: list, keys=None) -> list:
    """The planned files whose partition and column bounds may hold the source's keys: within
    the keys' min/max (partitions and column bounds, as a scan plans), then, given ``keys``
    (a function returning the first key's sorted distinct values, for a small source), the files
    whose bounds of that column hold one of them."""
    if not bounds or not files:
        return files
    if any(low is None for _, low, _ in bounds):
        return []  # every source key NULL (or no source row): nothing can match
    schema = table.schema()
    ranges = expr
    for name, low, high in bounds:
        field = schema.find_field(name)
        if not isinstance(field.field_type, _BOUNDED):
            continue
        ranges = And(ranges, And(GreaterThanOrEqual(field.name, low), LessThanOrEqual(field.name, high)))
    if ranges is expr:
        return files
    remote = manifest_job.remote_reader(spark, lambda key: spark.conf.get(key, None), table, schema, manifests.CACHE)
    kept = {p.file.file_path for p in plan_scan(table, snapshot.snapshot_id, ranges, remote=remote,
                                                  bulk=manifest_columns.reader(spark, table)).files}
    files = [p for p in files if p.file.file_path in kept]
    if keys is None or len(files) < 2:
        return files
    field = schema.find_field(bounds[0][0])
    if not isinstance(field.field_type, _BOUNDED):
        return files
    values = keys()
    files = [p for p in files if _holds_a_key(p.file, field, values)]
    if 0 < len(values) <= BLOOM_KEYS:  # a few keys: the files whose bloom filters admit one of them
        files = bloom_filters.kept(spark, spark.conf.get, table, schema, files, In(field.name, values))
    return files


def _holds_a_key(data_file, field, values: list) -> bool:
    """Whether one of the sorted ``values`` lies within the file's bounds of ``field`` (no
    bounds: it may hold any)."""
    found = file_bounds(data_file, field)
    if found is None:
        return True
    low, high = found
    i = bisect.bisect_left(values, low)
    return i < len(values) and values[i] <= high


def _estimated_small(spark, df) -> bool:
    """Whether Spark's own size estimate of ``df`` is within spark.sql.autoBroadcastJoinThreshold
    (-1: never), as Spark decides a broadcast."""
    return 0 <= J.estimated_bytes(df) <= J.broadcast_threshold(spark)


def broadcastable(spark, node, rows: int) -> bool:
    """Whether the source is small enough to broadcast, by Spark's own threshold: its rows times
    the width of its columns at most spark.sql.autoBroadcastJoinThreshold (-1: never)."""
    threshold = J.broadcast_threshold(spark)
    if threshold < 0:
        return False
    width = 8 + sum(a.dataType().defaultSize() for a in J.from_seq(node.source.output()))
    return rows * width <= threshold
