"""A model-based test: hypothesis runs random sequences of CREATE, INSERT, DELETE, UPDATE, MERGE,
OPTIMIZE [ZORDER BY], partition evolution and schema changes on a lake table and on a plain
in-memory model of its rows; after every step lakerules, pyiceberg and DuckDB must read exactly
the model's rows.

Each sequence's table also draws: a NOT NULL id (assigning NULL to it fails and changes
nothing), a nested struct column (whole-struct and nested-field assignments), CACHE TABLE (every
read then goes through Spark's cache, which each write must refresh), and the session's
spark.sql.storeAssignmentPolicy (ANSI or STRICT: which assignments of another type are refused).

Profiles (env LAKERULES_PROFILE): `small` (default, `make test`: a few derandomized sequences),
`soak` (`make soak`: many longer ones). Every failure it found is kept as a regular test in
tests/test_reliability_regressions.py.
"""

from __future__ import annotations

import datetime
import itertools
import os

import pytest
from hypothesis import seed
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

import profiles_util
from conftest import _sorted

# small: fixed seeds, 3 sequences each (hypothesis starts from its simplest sequence, one
# statement repeated, so one sequence a seed is that); soak: derandomized unless
# LAKERULES_SOAK_RANDOM is set, shrinking failures
SMALL_SEEDS = (20261123, 7)
CHOSEN = profiles_util.register("small", "soak", small_examples=3, small_steps=10, soak_steps=30, derandomize=False)
PROFILE = profiles_util.PROFILE
STATS = {"sequences": 0, "steps": 0, "rows checked": 0}

_tables = itertools.count()
LONG, INT, STRING, DATE = "BIGINT", "INT", "STRING", "DATE"
STRUCT = "STRUCT<a: BIGINT, b: STRING>"
DATES = [datetime.date(*d) for d in ((1969, 12, 31), (1970, 1, 1), (2025, 12, 31), (2026, 1, 1), (2026, 1, 31),
                                     (2026, 2, 1), (2026, 3, 15))]
TIME_TRANSFORMS = {"year": "years", "month": "months", "day": "days"}


# ---- SQL three-valued logic for the model -------------------------------------------------------


def _cmp(op, a, b):
    if a is None or b is None:
        return None
    return {"=": a == b, "<": a < b, ">=": a >= b, "<>": a != b}[op]


def _and(a, b):
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a, b):
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


class Col:
    def __init__(self, key: int, name: str, type_: str):
        self.key, self.name, self.type = key, name, type_


class LakeModel(RuleBasedStateMachine):
    """The table and its model: ``rows`` are dicts from a column's stable key (it survives
    renames) to its value; ``cols`` the columns in table order."""

    spark = engines = ns = None  # set by the test

    def __init__(self):
        super().__init__()
        self.cols: list[Col] = []
        self.rows: list[dict] = []
        self.log: list[str] = []
        self.partitioned: set[int] = set()  # keys of columns any spec ever partitioned by
        self.fields: list[tuple[str, str]] = []  # current spec: (partition field name, transform SQL)
        self.next_key = 0
        self.not_null_id, self.cached, self.policy = False, False, "ANSI"

    # ---- helpers ----------------------------------------------------------------------------

    def sql(self, text: str):
        self.log.append(text)
        try:
            return self.spark.sql(text).collect()
        except Exception as e:
            raise AssertionError(f"{text}\nfailed: {e}\nstatements so far:\n" + ";\n".join(self.log)) from e

    def col(self, name: str) -> Col:
        return next(c for c in self.cols if c.name == name)

    def new_col(self, name: str, type_: str) -> Col:
        c = Col(self.next_key, name, type_)
        self.next_key += 1
        self.cols.append(c)
        return c

    def fresh_name(self) -> str:
        return f"c{self.next_key}_{len(self.log)}"

    @classmethod
    def literal(cls, value, type_: str) -> str:
        if value is None:
            return f"CAST(NULL AS {type_})"
        if type_ == STRUCT:
            return f"named_struct('a', {cls.literal(value['a'], LONG)}, 'b', {cls.literal(value['b'], STRING)})"
        if type_ == STRING:
            return f"'{value}'"
        if type_ == DATE:
            return f"DATE'{value.isoformat()}'"
        return f"CAST({value} AS {type_})"

    @staticmethod
    def values(type_: str):
        if type_ == STRUCT:
            return st.one_of(st.none(), st.fixed_dictionaries({
                "a": st.one_of(st.none(), st.integers(-3, 12)), "b": st.one_of(st.none(), st.sampled_from(["a", "b"]))}))
        if type_ == STRING:
            return st.one_of(st.none(), st.sampled_from(["a", "b", "bb", "c", "zz"]))
        if type_ == DATE:
            return st.one_of(st.none(), st.sampled_from(DATES))
        return st.one_of(st.none(), st.integers(-3, 12))

    def row_strategy(self):
        return st.fixed_dictionaries({c.key: (st.integers(0, 15) if c.name == "id" else self.values(c.type))
                                      for c in self.cols})

    def predicate(self, data):
        """(SQL, fn(row) -> True/False/None) of a random condition on the current columns."""
        def atom():
            c = data.draw(st.sampled_from(self.cols))
            kind = data.draw(st.sampled_from(["null", "notnull", "cmp", "cmp", "mod"] if c.type in (LONG, INT)
                                             else ["null", "notnull", "field"] if c.type == STRUCT
                                             else ["null", "notnull", "cmp", "cmp"]))
            if kind == "field":  # a comparison on a nested field: NULL when the struct is
                op = data.draw(st.sampled_from(["=", "<", ">=", "<>"]))
                v = data.draw(st.integers(-3, 12))
                return (f"{c.name}.a {op} {self.literal(v, LONG)}",
                        lambda r: None if r[c.key] is None else _cmp(op, r[c.key]["a"], v))
            if kind == "null":
                return f"{c.name} IS NULL", lambda r: r[c.key] is None
            if kind == "notnull":
                return f"{c.name} IS NOT NULL", lambda r: r[c.key] is not None
            if kind == "mod":
                m = data.draw(st.integers(2, 4))
                rem = data.draw(st.integers(0, m - 1))
                # Spark's % keeps the dividend's sign: (-3) % 2 = -1
                return (f"{c.name} % {m} = {rem}",
                        lambda r: None if r[c.key] is None else (abs(r[c.key]) % m) * (1 if r[c.key] >= 0 else -1) == rem)
            op = data.draw(st.sampled_from(["=", "<", ">=", "<>"]))
            v = data.draw(self.values(c.type).filter(lambda x: x is not None))
            return f"{c.name} {op} {self.literal(v, c.type)}", lambda r: _cmp(op, r[c.key], v)

        text, fn = atom()
        if data.draw(st.booleans()):
            text2, fn2 = atom()
            if data.draw(st.booleans()):
                return f"({text} AND {text2})", lambda r: _and(fn(r), fn2(r))
            return f"({text} OR {text2})", lambda r: _or(fn(r), fn2(r))
        return text, fn

    # ---- CREATE ---------------------------------------------------------------------------------

    @initialize(
        partitioning=st.sampled_from([("", ()), ("bucket(2, id)", ("id",)), ("truncate(1, s)", ("s",)), ("n", ("n",)),
                                      ("bucket(3, id), n", ("id", "n")), ("v", ("v",)), ("months(d)", ("d",)),
                                      ("days(d), bucket(2, id)", ("d", "id"))]),
        props=st.sampled_from(["", "'write.delete.mode'='copy-on-write'", "'write.update.mode'='copy-on-write'",
                               "'write.delete.mode'='copy-on-write', 'write.update.mode'='copy-on-write'"]),
        not_null_id=st.booleans(), nested=st.booleans(), cached=st.booleans(),
        policy=st.sampled_from(["ANSI", "STRICT"]),
    )
    def create(self, partitioning, props, not_null_id, nested, cached, policy):
        self.table = f"lake.{self.ns}.m{next(_tables)}"
        self.not_null_id, self.cached, self.policy = not_null_id, cached, policy
        columns = [("id", LONG), ("v", LONG), ("s", STRING), ("n", INT), ("d", DATE)] + ([("st", STRUCT)] if nested else [])
        for name, type_ in columns:
            self.new_col(name, type_)
        ddl = ", ".join(f"{name} {type_}" + (" NOT NULL" if name == "id" and not_null_id else "") for name, type_ in columns)
        text = f"CREATE TABLE {self.table} ({ddl})"
        spec, sources = partitioning
        if spec:
            text += f" PARTITIONED BY ({spec})"
            self.partitioned.update(self.col(name).key for name in sources)
        if props:
            text += f" TBLPROPERTIES ({props})"
        self.sql(text)
        self.sql(f"SET spark.sql.storeAssignmentPolicy={policy}")
        if cached:
            self.sql(f"CACHE TABLE {self.table}")
        self._spec()
        STATS["sequences"] += 1

    # ---- writes ---------------------------------------------------------------------------------

    @rule(data=st.data())
    def insert(self, data):
        rows = data.draw(st.lists(self.row_strategy(), min_size=1, max_size=10))
        names = ", ".join(c.name for c in self.cols)
        values = ", ".join("(" + ", ".join(self.literal(r[c.key], c.type) for c in self.cols) + ")" for r in rows)
        if data.draw(st.booleans()):
            self.sql(f"INSERT INTO {self.table} ({names}) VALUES {values}")  # about a file a row
        else:  # one task: a file a partition, several rows each
            self.sql(f"INSERT INTO {self.table} ({names}) SELECT /*+ REPARTITION(1) */ * FROM VALUES {values}")
        self.rows.extend(rows)

    @rule(data=st.data())
    def delete(self, data):
        if data.draw(st.integers(0, 9)) == 0:
            (r,) = self.sql(f"DELETE FROM {self.table}")
            expected, self.rows = len(self.rows), []
        else:
            text, fn = self.predicate(data)
            (r,) = self.sql(f"DELETE FROM {self.table} WHERE {text}")
            kept = [row for row in self.rows if fn(row) is not True]
            expected, self.rows = len(self.rows) - len(kept), kept
        assert r[0] == expected, f"DELETE affected {r[0]} rows, the model says {expected}"

    @rule(data=st.data())
    def update(self, data):
        c = data.draw(st.sampled_from([c for c in self.cols if c.name != "id"] or self.cols))
        if c.name == "id" and self.not_null_id:
            return  # NULL into the NOT NULL id: null_into_not_null
        target = c.name
        if c.type == STRUCT:
            how = data.draw(st.sampled_from(["lit", "field"]))
        elif c.type == STRING:
            how = data.draw(st.sampled_from(["lit", "concat"]))
        elif c.type == DATE:
            how = data.draw(st.sampled_from(["lit", "date_add"]))
        else:
            how = data.draw(st.sampled_from(["lit", "plus"]))
        if how == "lit":
            v = data.draw(self.values(c.type))
            expr, fn = self.literal(v, c.type), (lambda r, v=v: v)
        elif how == "field":  # SET st.a = v: a NULL struct becomes one with only a set
            v = data.draw(st.one_of(st.none(), st.integers(-3, 12)))
            target, expr = f"{c.name}.a", self.literal(v, LONG)
            fn = (lambda r, v=v: {"a": v, "b": None if r[c.key] is None else r[c.key]["b"]})
        elif how == "date_add":
            expr, fn = f"date_add({c.name}, 1)", (lambda r: None if r[c.key] is None else r[c.key] + datetime.timedelta(1))
        elif how == "plus":
            expr, fn = f"{c.name} + 1", (lambda r: None if r[c.key] is None else r[c.key] + 1)
        else:
            expr, fn = f"concat({c.name}, 'x')", (lambda r: None if r[c.key] is None else r[c.key] + "x")
        if data.draw(st.integers(0, 7)) == 0:
            where, match = "", (lambda r: True)
        else:
            text, match = self.predicate(data)
            where = f" WHERE {text}"
        (r,) = self.sql(f"UPDATE {self.table} SET {target} = {expr}{where}")
        n = 0
        for row in self.rows:
            if match(row) is True:
                row[c.key] = fn(row)
                n += 1
        assert r[0] == n, f"UPDATE affected {r[0]} rows, the model says {n}"

    @rule(data=st.data())
    def merge(self, data):
        id_col = self.col("id")
        target = data.draw(st.sampled_from([c for c in self.cols if c.name != "id"] or [id_col]))
        source = data.draw(st.lists(st.tuples(st.integers(0, 18), st.sampled_from("udi"), self.values(target.type)),
                                    min_size=1, max_size=5, unique_by=lambda t: t[0]))
        by_source = data.draw(st.booleans())
        values = ", ".join(f"({i}L, '{op}', {self.literal(x, target.type)})" for i, op, x in source)
        # typed NULLs: a bare NULL (VOID) is no BIGINT under STRICT, in MERGE as in INSERT
        insert_values = ", ".join("s.id" if c is id_col else ("s.x" if c is target else self.literal(None, c.type))
                                  for c in self.cols)
        text = (
            f"MERGE INTO {self.table} t USING (SELECT * FROM VALUES {values} AS s(id, op, x)) s ON t.id = s.id "
            f"WHEN MATCHED AND s.op = 'd' THEN DELETE "
            f"WHEN MATCHED AND s.op = 'u' THEN UPDATE SET {target.name} = s.x "
            f"WHEN NOT MATCHED AND s.op <> 'd' THEN INSERT ({', '.join(c.name for c in self.cols)}) VALUES ({insert_values})"
        )
        cut = None
        if by_source:
            cut = data.draw(st.integers(0, 15))
            text += f" WHEN NOT MATCHED BY SOURCE AND t.id >= {cut} THEN DELETE"
        (r,) = self.sql(text)
        ops = {i: (op, x) for i, op, x in source}
        out, updated, deleted, seen = [], 0, 0, set()
        for row in self.rows:
            hit = ops.get(row[id_col.key])
            if hit is None:
                if cut is not None and row[id_col.key] is not None and row[id_col.key] >= cut:
                    deleted += 1
                    continue
                out.append(row)
                continue
            seen.add(row[id_col.key])
            op, x = hit
            if op == "d":
                deleted += 1
                continue
            if op == "u":
                row = {**row, target.key: x}
                updated += 1
            out.append(row)
        inserted = 0
        for i, op, x in source:
            if i not in seen and op != "d":
                new = {c.key: None for c in self.cols}
                new[id_col.key] = i
                if target is not id_col:
                    new[target.key] = x
                out.append(new)
                inserted += 1
        self.rows = out
        got = (r.num_updated_rows, r.num_deleted_rows, r.num_inserted_rows)
        assert got == (updated, deleted, inserted), f"MERGE counts {got}, the model says {(updated, deleted, inserted)}"

    @rule(data=st.data())
    def optimize(self, data):
        self._spec()
        identity = {name for name, transform in self.fields if transform == "identity"}
        candidates = [c.name for c in self.cols if c.name not in identity and c.type != STRUCT]
        text = f"OPTIMIZE {self.table}"
        if candidates and data.draw(st.booleans()):
            cols = data.draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=2, unique=True))
            text += f" ZORDER BY ({', '.join(cols)})"
        self.sql(text)

    @rule(data=st.data())
    def null_into_not_null(self, data):
        """SET id = NULL on a NOT NULL id fails when a row matches (Spark's NOT NULL check),
        and changes nothing either way."""
        if not self.not_null_id:
            return
        text, match = self.predicate(data)
        statement = f"UPDATE {self.table} SET id = CAST(NULL AS BIGINT) WHERE {text}"
        hits = sum(1 for row in self.rows if match(row) is True)
        self.log.append(statement)
        try:
            (r,) = self.spark.sql(statement).collect()
        except Exception as e:  # noqa: BLE001
            assert hits and "NOT_NULL" in str(e), f"{statement} failed with {hits} matching rows: {e}"
            return
        assert hits == 0 and r[0] == 0, f"{statement} set NULL in {r[0]} rows of a NOT NULL column"

    @rule(data=st.data())
    def assign_other_type(self, data):
        """An assignment of a BIGINT value to an INT column is a store-assignment cast under
        ANSI and refused under STRICT; a STRING value is refused under both."""
        ints = [c for c in self.cols if c.type == INT]
        if not ints:
            return
        c = data.draw(st.sampled_from(ints))
        v = data.draw(st.integers(-3, 12))
        kind = data.draw(st.sampled_from(["bigint", "bigint", "string"]))
        expr = f"CAST({v} AS BIGINT)" if kind == "bigint" else f"'{v}'"
        text, match = self.predicate(data)
        statement = f"UPDATE {self.table} SET {c.name} = {expr} WHERE {text}"
        self.log.append(statement)
        allowed = kind == "bigint" and self.policy == "ANSI"
        try:
            (r,) = self.spark.sql(statement).collect()
        except Exception as e:  # noqa: BLE001
            assert not allowed and "CANNOT_SAFELY_CAST" in str(e), f"{statement} under {self.policy}: {e}"
            return
        assert allowed, f"{statement} was accepted under storeAssignmentPolicy={self.policy}"
        n = 0
        for row in self.rows:
            if match(row) is True:
                row[c.key] = v
                n += 1
        assert r[0] == n, f"UPDATE affected {r[0]} rows, the model says {n}"

    # ---- partition and schema evolution -------------------------------------------------------

    @rule(data=st.data())
    def evolve(self, data):
        """One rule for the six kinds of change, so that writes stay most of the steps."""
        change = data.draw(st.sampled_from([
            self.add_partition_field, self.drop_or_replace_partition_field, self.add_column,
            self.rename_column, self.drop_column, self.promote_column,
        ]))
        change(data)

    def _field_choices(self):
        out = []
        for c in self.cols:
            if c.type == STRUCT:
                continue
            if c.type == STRING:
                out.append((f"truncate(1, {c.name})", c))
            elif c.type == DATE:
                out += [(f"{fn}({c.name})", c) for fn in ("years", "months", "days")]
            elif c.name == "id":
                out += [(f"bucket(2, {c.name})", c), (f"bucket(3, {c.name})", c)]
            else:
                out.append((c.name, c))
        return out

    def add_partition_field(self, data):
        current = self._spec()
        choices = [(t, c) for t, c in self._field_choices() if (t, c.key) not in current]
        if not choices:
            return
        transform, c = data.draw(st.sampled_from(choices))
        self.sql(f"ALTER TABLE {self.table} ADD PARTITION FIELD {transform}")
        self.partitioned.add(c.key)

    def drop_or_replace_partition_field(self, data):
        spec = self._spec_fields()
        if not spec:
            return
        name = data.draw(st.sampled_from(sorted(spec)))
        current = self._spec()
        choices = [(t, c) for t, c in self._field_choices() if (t, c.key) not in current]
        if choices and data.draw(st.booleans()):
            transform, c = data.draw(st.sampled_from(choices))
            self.sql(f"ALTER TABLE {self.table} REPLACE PARTITION FIELD {name} WITH {transform}")
            self.partitioned.add(c.key)
        else:
            self.sql(f"ALTER TABLE {self.table} DROP PARTITION FIELD {name}")

    def _iceberg(self):
        return self.engines.catalog.load_table(self.table.split(".", 1)[1])

    def _spec_fields(self) -> dict:
        t = self._iceberg()
        return {f.name: f for f in t.spec().fields}

    def _spec(self) -> set:
        """(transform SQL, column key) of the current spec's fields."""
        t = self._iceberg()
        schema = t.schema()
        keys = {c.name: c.key for c in self.cols}
        out = set()
        for f in t.spec().fields:
            name = schema.find_column_name(f.source_id)
            text = str(f.transform)
            if text == "identity":
                sql = name
            elif text in TIME_TRANSFORMS:
                sql = f"{TIME_TRANSFORMS[text]}({name})"
            else:
                fn, _, arg = text.partition("[")
                sql = f"{fn}({arg.rstrip(']')}, {name})"
            out.add((sql, keys.get(name)))
        self.fields = [(schema.find_column_name(f.source_id), str(f.transform)) for f in t.spec().fields]
        return out

    # ---- schema evolution ---------------------------------------------------------------------

    def add_column(self, data):
        type_ = data.draw(st.sampled_from([LONG, STRING, INT, DATE]))
        name = self.fresh_name()
        self.sql(f"ALTER TABLE {self.table} ADD COLUMN {name} {type_}")
        c = self.new_col(name, type_)
        for r in self.rows:
            r[c.key] = None

    def rename_column(self, data):
        others = [c for c in self.cols if c.name != "id"]
        if not others:
            return
        c = data.draw(st.sampled_from(others))
        name = self.fresh_name()
        self.sql(f"ALTER TABLE {self.table} RENAME COLUMN {c.name} TO {name}")
        c.name = name
        self._spec()

    def drop_column(self, data):
        droppable = [c for c in self.cols if c.name != "id" and c.key not in self.partitioned]
        if not droppable:
            return
        c = data.draw(st.sampled_from(droppable))
        self.sql(f"ALTER TABLE {self.table} DROP COLUMN {c.name}")
        self.cols.remove(c)
        for r in self.rows:
            r.pop(c.key, None)

    def promote_column(self, data):
        if not any(c.type == INT for c in self.cols):
            return
        c = data.draw(st.sampled_from([c for c in self.cols if c.type == INT]))
        self.sql(f"ALTER TABLE {self.table} ALTER COLUMN {c.name} TYPE BIGINT")
        c.type = LONG

    def teardown(self):
        if self.cols:
            self.spark.sql("SET spark.sql.storeAssignmentPolicy=ANSI")
            self.spark.sql(f"UNCACHE TABLE IF EXISTS {self.table}")
        if os.environ.get("LAKERULES_MODEL_VERBOSE"):
            print("\n-- sequence:\n" + ";\n".join(self.log))

    # ---- the check ----------------------------------------------------------------------------

    @invariant()
    def engines_read_the_model(self):
        if not self.cols:
            return
        columns = ", ".join(c.name for c in self.cols)
        expected = _sorted(tuple(r[c.key] for c in self.cols) for r in self.rows)
        try:
            ours = self.engines.lakerules(self.table, columns)
            assert ours == expected, f"lakerules reads {ours}, the model has {expected}"
            assert self.engines.pyiceberg(self.table, columns) == expected, "pyiceberg reads differently"
            assert self.engines.duckdb(self.table, columns) == expected, "DuckDB reads differently"
        except AssertionError as e:
            raise AssertionError(f"{e}\nafter:\n" + ";\n".join(self.log)) from None
        STATS["steps"] += 1
        STATS["rows checked"] += 3 * len(expected)


@pytest.mark.parametrize("seed_", SMALL_SEEDS if PROFILE == "small" else [None])
def test_random_sequences_read_the_same_everywhere(spark, ns, engines, seed_):
    LakeModel.spark, LakeModel.engines, LakeModel.ns = spark, engines, ns
    machine = LakeModel if seed_ is None else seed(seed_)(type(f"LakeModelSeed{seed_}", (LakeModel,), {}))
    run_state_machine_as_test(machine, settings=CHOSEN)
    print(f"\nmodel test ({PROFILE}, seed {seed_}): {STATS}")
