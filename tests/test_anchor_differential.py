"""Differential semantics against Iceberg's own Spark runtime (issue #52, Required 3; tests/anchor.py).

A seeded generator draws a table (decimals, timestamps, a struct, NULLs; unpartitioned or
partitioned by identity, bucket, days or truncate) with the same starting rows, and a sequence of
statements: DELETE, UPDATE, MERGE (matched update and delete, not-matched insert, not-matched-by-
source delete, each with conditions), INSERT OVERWRITE (dynamic), ADD COLUMN, and a compaction
(lakerules' OPTIMIZE, Iceberg's rewrite_data_files). lakerules runs it on its table in this process,
Iceberg's runtime on its own table of the same catalog in the anchor's process; after every statement
the two tables must hold the same rows, and a statement one engine refuses the other must refuse
too (DIFFERENCES lists the deliberate ones, with the reason; docs/compared.md says the same).

Profiles (LAKERULES_PROFILE, tests/profiles_util): `small` (make test) runs SMALL sequences of
SMALL_STEPS statements; `soak` LAKERULES_SOAK_EXAMPLES sequences (default 40) of 30. Each run
prints its counts (RELIABILITY.md records them).
"""

from __future__ import annotations

import itertools
import os
import random

import pytest

import anchor
import anchor_values
import profiles_util

SMALL, SMALL_STEPS = 2, 10
SEQUENCES = SMALL if profiles_util.PROFILE == "small" else int(os.environ.get("LAKERULES_SOAK_EXAMPLES", "40"))
STEPS = SMALL_STEPS if profiles_util.PROFILE == "small" else 30
STATS = {"sequences": 0, "statements": 0, "refused by both": 0, "rows compared": 0, "Iceberg's runtime wrong": 0}
COLUMNS = "id BIGINT, k INT, s STRING, amount DECIMAL(10,2), ts TIMESTAMP, st STRUCT<a: INT, b: STRING>"
NAMES = "id, k, s, amount, ts, st"  # written by name: a column added later is NULL in new rows
PARTITIONINGS = ["", "PARTITIONED BY (k)", "PARTITIONED BY (bucket(4, id))", "PARTITIONED BY (days(ts))",
                 "PARTITIONED BY (truncate(2, s))"]
# Statements the engines answer differently on purpose: (a substring of the statement, why).
DIFFERENCES: list[tuple[str, str]] = []
REFUSALS: list[tuple[str, str, str]] = []  # (statement, lakerules' error, Iceberg's), shown by -s
# (statement, the rows it should have kept and Iceberg's runtime deleted): where Iceberg's runtime,
# not lakerules, leaves rows Spark's semantics do not (docs/compared.md)
ICEBERG_WRONG: list[tuple[str, list]] = []
_ids = itertools.count()


class Draw:
    """One sequence's random choices (seeded: the same sequence every run)."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def value(self, column: str) -> str:
        r = self.r
        if r.random() < 0.15:
            return "NULL"
        return {
            "id": lambda: str(r.randint(0, 30)),
            "k": lambda: str(r.randint(-2, 3)),
            "s": lambda: repr(r.choice(["a", "ab", "b", "ba", "", "zz", "é"])).replace('"', "'"),
            "amount": lambda: f"{r.randint(-500, 500) / 100:.2f}",
            "ts": lambda: f"TIMESTAMP'2026-01-{r.randint(1, 4):02d} {r.randint(0, 23):02d}:00:00'",
            "st": lambda: f"named_struct('a', {r.randint(0, 3)}, 'b', '{r.choice('xy')}')",
        }[column]()

    def row(self, id_: int | None = None) -> str:
        values = [str(id_) if id_ is not None else self.value("id")] + [self.value(c) for c in ("k", "s", "amount", "ts", "st")]
        return "(" + ", ".join(values) + ")"

    def condition(self, alias: str = "") -> str:
        r, p = self.r, f"{alias}." if alias else ""
        atoms = [f"{p}id % 3 = {r.randint(0, 2)}", f"{p}k = {r.randint(-2, 3)}", f"{p}k IS NULL", f"{p}s LIKE 'a%'",
                 f"{p}amount > {r.randint(-3, 3)}", f"{p}ts < TIMESTAMP'2026-01-0{r.randint(2, 4)} 00:00:00'",
                 f"{p}st.a = {r.randint(0, 3)}", f"{p}s IS NOT NULL", f"{p}id BETWEEN {r.randint(0, 10)} AND {r.randint(10, 30)}"]
        first = r.choice(atoms)
        if r.random() < 0.4:
            return f"({first} {r.choice(['AND', 'OR'])} {r.choice(atoms)})"
        return first

    def assignment(self) -> str:
        r = self.r
        return r.choice(["k = k + 1", "s = concat(s, 'x')", "amount = amount * 2", "ts = ts + INTERVAL 1 DAY",
                         "st = named_struct('a', 9, 'b', 'z')", "k = NULL", f"amount = {self.value('amount')}"])

    def source(self, n: int) -> str:
        rows = ", ".join(self.row(self.r.randint(0, 35)) for _ in range(n))
        return f"(SELECT * FROM VALUES {rows} AS v(id, k, s, amount, ts, st))"


def statements(draw: Draw, steps: int) -> list[tuple[str, str]]:
    """(kind, SQL with {t} for the table) of one sequence."""
    out = []
    for _ in range(steps):
        kind = draw.r.choice(["delete", "update", "merge", "merge", "overwrite", "insert", "compact", "add_column"])
        if kind == "delete":
            sql = f"DELETE FROM {{t}} WHERE {draw.condition()}"
        elif kind == "update":
            sql = f"UPDATE {{t}} SET {draw.assignment()} WHERE {draw.condition()}"
        elif kind == "merge":
            clauses = [f"WHEN MATCHED AND {draw.condition('t')} THEN DELETE",
                       "WHEN MATCHED THEN UPDATE SET t.s = s.s, t.amount = s.amount",
                       draw.r.choice(["WHEN NOT MATCHED THEN INSERT *",
                                      f"WHEN NOT MATCHED THEN INSERT ({NAMES}) VALUES ({', '.join('s.' + n for n in NAMES.split(', '))})"])]
            if draw.r.random() < 0.4:
                clauses.append(f"WHEN NOT MATCHED BY SOURCE AND {draw.condition('t')} THEN DELETE")
            # distinct source keys: a key matched twice is an error in both (cardinality), drawn apart
            sql = (f"MERGE INTO {{t}} t USING (SELECT id, k, s, amount, ts, st FROM (SELECT *, row_number() OVER "
                   f"(PARTITION BY id ORDER BY k) AS n FROM {draw.source(draw.r.randint(1, 4))}) WHERE n = 1) s "
                   "ON t.id = s.id " + " ".join(clauses))
        elif kind == "overwrite":
            sql = f"INSERT OVERWRITE {{t}} ({NAMES}) SELECT * FROM {draw.source(draw.r.randint(1, 3))}"
        elif kind == "insert":
            sql = f"INSERT INTO {{t}} ({NAMES}) VALUES {', '.join(draw.row() for _ in range(draw.r.randint(1, 3)))}"
        elif kind == "compact":
            sql = "COMPACT"
        else:
            sql = f"ALTER TABLE {{t}} ADD COLUMN c{draw.r.randint(0, 999)} INT"
        out.append((kind, sql))
    return out


def _engine_sql(kind: str, sql: str, table: str, ident: str, engine: str) -> str:
    if kind == "compact":
        return f"OPTIMIZE {table}" if engine == "lakerules" else \
            f"CALL lake.system.rewrite_data_files(table => '{ident}', options => map('min-input-files', '1'))"
    return sql.format(t=table)


@pytest.fixture(scope="module")
def space(spark):
    anchor.require()
    ns = f"diff{next(_ids)}"
    spark.sql(f"CREATE NAMESPACE lake.{ns}")
    yield ns
    spark.sql(f"DROP NAMESPACE lake.{ns} CASCADE")
    print(f"\ndifferential ({profiles_util.PROFILE}): {STATS}")  # -s shows it (RELIABILITY.md records it)
    for statement, ours, theirs in REFUSALS:
        print(f"refused by both: {statement[:200]}\n  lakerules: {ours}\n  Iceberg:   {theirs}")
    for statement, lost in ICEBERG_WRONG:
        print(f"Iceberg's runtime wrong: {statement}\n  deleted rows Spark's semantics keep: {lost}")


MOR = ("TBLPROPERTIES ('write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
       "'write.merge.mode'='merge-on-read', 'format-version'='{v}')")


@pytest.mark.parametrize("sequence", range(SEQUENCES))
def test_the_same_statements_leave_the_same_rows(spark, warehouse, iceberg_catalog, space, sequence):
    draw = Draw(20261205 + sequence)
    version = draw.r.choice([2, 3])
    partitioning = draw.r.choice(PARTITIONINGS)
    start = ", ".join(draw.row(i) for i in range(12))
    steps = statements(draw, STEPS)
    ours, theirs = f"lake.{space}.ours{sequence}", f"lake.{space}.theirs{sequence}"
    create = f"CREATE TABLE {{t}} ({COLUMNS}) USING iceberg {partitioning} {MOR.format(v=version)}"
    read = "SELECT * FROM {t}"
    # Iceberg's runtime: its table, then each statement and a read of the table after it
    script = [create.format(t=theirs), f"INSERT INTO {theirs} VALUES {start}", read.format(t=theirs)]
    for kind, sql in steps:
        script += [_engine_sql(kind, sql, theirs, f"{space}.theirs{sequence}", "iceberg"), read.format(t=theirs)]
    answers = anchor.run(warehouse, script)
    assert "error" not in answers[0] and "error" not in answers[1], answers[:2]
    log = [f"-- format-version {version}, {partitioning or 'unpartitioned'}", create.format(t=ours),
           f"INSERT INTO {ours} VALUES {start}"]
    spark.sql(log[1]).collect()
    spark.sql(log[2]).collect()
    differ = []

    def rows_of(sql: str) -> list[tuple]:
        return sorted((anchor_values.row(r) for r in spark.sql(sql).collect()), key=repr)

    def compare(step: str, answer: dict, truth: str | None = None) -> bool:
        """Whether the tables still agree; where they do not and ``truth`` (SQL giving the rows
        Spark's semantics leave) sides with lakerules, Iceberg's runtime is wrong: recorded, and
        the sequence ends there (the tables differ from then on)."""
        mine = rows_of(read.format(t=ours))
        STATS["rows compared"] += len(mine)
        if anchor.rows(answer) == mine:
            return True
        if truth is not None and rows_of(truth) == mine:
            theirs = anchor.rows(answer)
            ICEBERG_WRONG.append((step, [r for r in mine if r not in theirs]))
            STATS["Iceberg's runtime wrong"] += 1
        else:
            differ.append(f"after {step}:\n  Iceberg   {anchor.rows(answer)}\n  lakerules {mine}")
        return False

    compare("the starting rows", answers[2])
    for i, (kind, sql) in enumerate(steps):
        text = _engine_sql(kind, sql, ours, f"{space}.ours{sequence}", "lakerules")
        log.append(text)
        truth = None
        if kind == "delete":  # the rows Spark's three-valued logic keeps, from the snapshot before
            before = iceberg_catalog.load_table(f"{space}.ours{sequence}").current_snapshot().snapshot_id
            truth = f"SELECT * FROM {ours} VERSION AS OF {before} WHERE NOT coalesce({sql.split(' WHERE ', 1)[1]}, false)"
        try:
            spark.sql(text).collect()
            ours_error = None
        except Exception as e:  # noqa: BLE001 - compared with Iceberg's answer
            ours_error = str(e).strip().splitlines()[0]
        theirs_error = answers[3 + 2 * i].get("error")
        STATS["statements"] += 1
        if (ours_error is None) != (theirs_error is None):
            if not any(k in text for k, _ in DIFFERENCES):
                differ.append(f"{text}\n  Iceberg: {theirs_error or 'ran'}\n  lakerules: {ours_error or 'ran'}")
            break
        if ours_error is not None:
            STATS["refused by both"] += 1
            REFUSALS.append((text, ours_error[:160], theirs_error[:160]))
        if not compare(text, answers[4 + 2 * i], truth):
            break
    STATS["sequences"] += 1
    assert not differ, "\n".join(differ) + "\nstatements:\n" + ";\n".join(log)
