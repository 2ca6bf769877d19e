"""What a rule may use besides the plan: the session, the catalogs, settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from pyspark.sql import SparkSession

from lakerules.iceberg.catalogs import Catalogs


@dataclass
class Context:
    spark: SparkSession
    catalogs: Catalogs
    # How each planned node type becomes a JVM plan (node type -> fn(ctx, node, lower)).
    lowerings: dict[type, Callable[..., Any]] = field(default_factory=dict)
    # Statements planned ahead, for EXPLAIN (statement type -> fn(ctx, table, statement)).
    planners: dict[type, Callable[..., Any]] = field(default_factory=dict)

    def conf(self, key: str, default: str | None = None) -> str | None:
        return self.spark.conf.get(key, default)
