"""Which column metrics a data file records: Iceberg's MetricsConfig, as its Java writers apply it.

``write.metadata.metrics.default`` (truncate(16) unless set) and
``write.metadata.metrics.column.<name>`` per column, the name as the schema spells it (``s.a``
for field a of struct s, ``x.y`` for a top-level column whose name holds a dot). Truncation
applies to strings and binaries only (other types keep full bounds). Lower/upper bounds are kept
for every primitive field reached through structs only, as Iceberg's Parquet writer keeps them:
a struct's fields get bounds, so scans and OPTIMIZE ZORDER BY s.a can skip by them; the fields
of lists and maps get counts at most (one row holds many of their values).

pyiceberg's own plan (``compute_statistics_plan``) takes any name with a dot for a nested field
and keeps counts only for struct fields and for dotted top-level columns alike; this plan has
the same shape (field id -> StatisticsCollector), so its footer reader reads with it.
"""

from __future__ import annotations

from pyiceberg.io.pyarrow import MetricModeTypes, MetricsMode, StatisticsCollector, match_metrics_mode
from pyiceberg.schema import Schema
from pyiceberg.types import BinaryType, ListType, MapType, NestedField, StringType, StructType

DEFAULT = "write.metadata.metrics.default"
DEFAULT_MODE = "truncate(16)"
COLUMN = "write.metadata.metrics.column."


def statistics_plan(schema: Schema, properties: dict[str, str]) -> dict[int, StatisticsCollector]:
    """field id -> the metrics kept for it, for every primitive field of the schema."""
    default = match_metrics_mode(properties.get(DEFAULT, DEFAULT_MODE))
    out: dict[int, StatisticsCollector] = {}

    def visit(field: NestedField, in_collection: bool) -> None:
        t = field.field_type
        if isinstance(t, StructType):
            for f in t.fields:
                visit(f, in_collection)
        elif isinstance(t, ListType):
            visit(t.element_field, True)
        elif isinstance(t, MapType):
            visit(t.key_field, True)
            visit(t.value_field, True)
        else:
            name = schema.find_column_name(field.field_id)
            if name is None:
                return
            mode = default
            own = properties.get(COLUMN + name)
            if own:
                mode = match_metrics_mode(own)
            if mode.type == MetricModeTypes.TRUNCATE and not isinstance(t, (StringType, BinaryType)):
                mode = MetricsMode(MetricModeTypes.FULL)
            if in_collection and mode.type in (MetricModeTypes.TRUNCATE, MetricModeTypes.FULL):
                mode = MetricsMode(MetricModeTypes.COUNTS)
            out[field.field_id] = StatisticsCollector(field_id=field.field_id, iceberg_type=t, mode=mode,
                                                      column_name=name)

    for f in schema.fields:
        visit(f, False)
    return out


def has_bounds(collector: StatisticsCollector | None) -> bool:
    """Whether files record lower and upper bounds of the column."""
    return collector is not None and collector.mode.type in (MetricModeTypes.TRUNCATE, MetricModeTypes.FULL)
