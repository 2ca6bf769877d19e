"""A hostile-location property test (issue #30 item 10): hypothesis builds random catalogs of
tables at random LOCATIONs (inside, around and beside each other's folders, on folders other tables
imported files from, on dropped tables' folders), in two lake catalogs of one session (``lake`` and
``lake2``, each its own SQLite database and warehouse), namespaces at random locations, random
write.data.path settings, moves (SET LOCATION), files of one table added to another (shared or not)
or from a folder of their own, edits of the protective bookkeeping (``lakerules.borrows``,
``lakerules.previous-folders``: always refused), Structured Streaming checkpoints and ``_``-folders
inside tables, renames, drops, and runs random cleanup (remove_orphan_files, expire_snapshots,
VACUUM, DROP TABLE ... PURGE) in either catalog with every file on disk aged past every cutoff.
After every step:

- every live table reads exactly the rows its model holds (so every file it references is there);
- every checkpoint, ``_``-folder and canary file outside the tables is intact;
- a statement lakerules refuses fails with a one-line lakerules error (no traceback) and changes
  no table.

Profiles (env LAKERULES_PROFILE, as tests/test_model.py): `small` (default, `make test`): a few
short sequences from fixed seeds; `soak` (`make soak`): LAKERULES_SOAK_EXAMPLES (default 40)
sequences of 30 steps. Each run prints its counts (RELIABILITY.md records them).
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import seed
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

import faults_util as fu
import profiles_util

OLD = 1_000_000_000  # 2001: older than any cutoff
FUTURE = "TIMESTAMP '2999-01-01 00:00:00'"
PROFILE = profiles_util.PROFILE
CHOSEN = profiles_util.register("locations-small", "locations-soak", small_examples=3, small_steps=15, soak_steps=30)
STATS = {"sequences": 0, "steps": 0, "refused": 0, "tables made": 0, "cleanups": 0, "files kept": 0, "imports": 0,
         "moves": 0, "bookkeeping edits refused": 0, "tables in lake2": 0}
CATALOGS = ("lake", "lake2")
_seq = itertools.count()
SCHEMA = pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])


def _age(root: Path) -> None:
    for d, _, names in os.walk(root):
        for n in names:
            p = Path(d) / n
            if not p.is_symlink():
                os.utime(p, (OLD, OLD))


class Locations(RuleBasedStateMachine):
    spark = iceberg_catalog = warehouse = scratch = None  # set by the test
    catalogs: dict = {}  # catalog name -> its pyiceberg catalog (set by the test)

    def __init__(self):
        super().__init__()
        n = next(_seq)
        self.prefix = f"hl{n}"
        self.base = Path(self.scratch) / self.prefix  # folders outside the warehouse
        self.namespaces: list[str] = []  # <catalog>.<ns>
        self.tables: dict[str, set[int]] = {}  # <catalog>.<ns>.<name> -> its rows (ids)
        self.kept: dict[Path, bytes] = {}  # files that must survive every step
        self.imported: list[Path] = []  # folders files were imported from
        self.dropped: list[Path] = []  # folders of tables dropped without PURGE
        self.counter = itertools.count()
        self.log: list[str] = []

    @staticmethod
    def split(name: str) -> tuple[str, tuple]:
        """(catalog, identifier) of <catalog>.<ns>.<name>."""
        catalog, _, rest = name.partition(".")
        return catalog, tuple(rest.split("."))

    # ---- helpers ------------------------------------------------------------------------------

    def sql(self, text: str, may_refuse: bool = False) -> bool:
        """Run a statement; False if lakerules refused it (only where ``may_refuse``), after
        checking the refusal is a clear one-line error that changed no table."""
        self.log.append(text)
        before = self._state() if may_refuse else None
        try:
            self.spark.sql(text).collect()
            return True
        except Exception as e:  # noqa: BLE001
            message = str(e)
            if not may_refuse or "lakerules" not in message:
                raise AssertionError(f"{text}\nfailed: {message}\nstatements so far:\n" + ";\n".join(self.log)) from e
            assert "Traceback" not in message and "internal error" not in message, message
            assert self._state() == before, f"{text} was refused but changed a table"
            STATS["refused"] += 1
            return False

    def _state(self) -> dict:
        out = {}
        for name in self.tables:
            catalog, ident = self.split(name)
            t = self.catalogs[catalog].load_table(ident)
            out[name] = (t.metadata_location, t.location(), dict(t.properties))
        return out

    def folder(self, name: str) -> Path:
        catalog, ident = self.split(name)
        return fu.local(self.catalogs[catalog].load_table(ident).location())

    def keep(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.kept[path] = text.encode()
        STATS["files kept"] += 1

    def some_folder(self, data) -> str:
        """A location a hostile user might give: beside, inside or around a table's folder, a
        namespace's folder, or a fresh folder."""
        choices = (["fresh"] + (["inside", "equal", "parent", "data"] if self.tables else [])
                   + (["imported"] if self.imported else []) + (["dropped"] if self.dropped else []))
        kind = data.draw(st.sampled_from(choices))
        if kind == "fresh":
            return str(self.base / f"free{next(self.counter)}")
        if kind in ("imported", "dropped"):
            folder = data.draw(st.sampled_from(self.imported if kind == "imported" else self.dropped))
            return str(data.draw(st.sampled_from([folder, folder.parent, folder / f"x{next(self.counter)}"])))
        target = self.folder(data.draw(st.sampled_from(sorted(self.tables))))
        return str({"inside": target / f"x{next(self.counter)}", "equal": target, "parent": target.parent,
                    "data": target / "data"}[kind])

    # ---- rules --------------------------------------------------------------------------------

    @initialize()
    def start(self):
        STATS["sequences"] += 1
        ns = f"{self.prefix}n0"
        for catalog in CATALOGS:
            self.sql(f"CREATE NAMESPACE {catalog}.{ns}")
            self.namespaces.append(f"{catalog}.{ns}")
        self.keep(self.base / "outside" / "canary.txt", "canary")
        self.keep(Path(self.warehouse) / f"{self.prefix}-root-canary.txt", "canary")
        # two tables to start from: one in its default folder, one at a LOCATION of its own
        for name, clause in (("first", ""), ("second", f" LOCATION '{self.base / 'second'}'")):
            self.sql(f"CREATE TABLE lake.{ns}.{name} (id BIGINT){clause}")
            self.tables[f"lake.{ns}.{name}"] = set()
            self.insert_into(f"lake.{ns}.{name}", 3)
        self.sql(f"CREATE TABLE lake2.{ns}.third (id BIGINT)")
        self.tables[f"lake2.{ns}.third"] = set()
        self.insert_into(f"lake2.{ns}.third", 2)

    @rule(data=st.data(), catalog=st.sampled_from(CATALOGS))
    def create_namespace(self, data, catalog):
        ns = f"{catalog}.{self.prefix}s{next(self.counter)}"
        where = data.draw(st.one_of(st.none(), st.just("somewhere")))
        location = f" LOCATION '{self.some_folder(data)}'" if where else ""
        if self.sql(f"CREATE NAMESPACE {ns}{location}", may_refuse=True):
            self.namespaces.append(ns)

    @rule(data=st.data(), rows=st.integers(1, 4))
    def create_table(self, data, rows):
        ns = data.draw(st.sampled_from(self.namespaces))
        name = f"{ns}.{data.draw(st.sampled_from(['t', 'u', 'a%2F', 'v']))}{next(self.counter) % 3}"
        catalog, ident = self.split(name)
        if name in self.tables or self.catalogs[catalog].table_exists(ident):
            return
        how = data.draw(st.sampled_from(["default", "location", "data_path"]))
        clause = ""
        if how == "location":
            clause = f" LOCATION '{self.some_folder(data)}'"
        elif how == "data_path":
            clause = f" TBLPROPERTIES ('write.data.path'='{self.some_folder(data)}')"
        quoted = ".".join(f"`{p}`" for p in name.split("."))
        if self.sql(f"CREATE TABLE {quoted} (id BIGINT){clause}", may_refuse=True):
            STATS["tables made"] += 1
            STATS["tables in lake2"] += catalog == "lake2"
            self.tables[name] = set()
            self.insert_into(name, rows)

    def insert_into(self, name: str, rows: int):
        start = next(self.counter) * 100
        quoted = ".".join(f"`{p}`" for p in name.split("."))
        self.sql(f"INSERT INTO {quoted} SELECT id FROM range({start}, {start + rows})")
        self.tables[name] |= set(range(start, start + rows))

    @precondition(lambda self: self.tables)
    @rule(data=st.data(), rows=st.integers(1, 3))
    def insert(self, data, rows):
        self.insert_into(data.draw(st.sampled_from(sorted(self.tables))), rows)

    @precondition(lambda self: self.tables)
    @rule(data=st.data())
    def delete_some(self, data):
        name = data.draw(st.sampled_from(sorted(self.tables)))
        quoted = ".".join(f"`{p}`" for p in name.split("."))
        self.sql(f"DELETE FROM {quoted} WHERE id % 2 = 0")
        self.tables[name] = {i for i in self.tables[name] if i % 2}

    @precondition(lambda self: len(self.tables) >= 1)
    @rule(data=st.data(), shared=st.booleans(), where=st.sampled_from(["other table", "free folder"]))
    def add_files(self, data, shared, where):
        """Files written by another tool, added to a table: inside another table's folder (only
        with shared => true) or in a folder of their own."""
        target = data.draw(st.sampled_from(sorted(self.tables)))
        owners = [t for t in sorted(self.tables) if t != target]
        if where == "other table" and owners:
            folder = self.folder(data.draw(st.sampled_from(owners))) / "data"
        else:
            folder = self.base / f"files{next(self.counter)}"
        start = next(self.counter) * 100
        path = folder / f"added{start}.parquet"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": pa.array([start, start + 1], pa.int64())}, schema=SCHEMA), path)
        catalog, parts = self.split(target)
        ident = ".".join(f"`{p}`" for p in parts)
        flag = ", shared => true" if shared else ""
        if self.sql(f"CALL {catalog}.system.add_files(table => '{ident}', source_table => '`parquet`.`{path}`'{flag})",
                    may_refuse=True):
            self.tables[target] |= {start, start + 1}
            self.imported.append(folder)
            STATS["imports"] += 1
        else:
            path.unlink()

    @precondition(lambda self: self.tables)
    @rule(data=st.data(), key=st.sampled_from(["lakerules.borrows", "lakerules.previous-folders"]),
          how=st.sampled_from(["set", "unset"]))
    def edit_bookkeeping(self, data, key, how):
        """A user erasing what protects other tables' files: always refused."""
        name = data.draw(st.sampled_from(sorted(self.tables)))
        quoted = ".".join(f"`{p}`" for p in name.split("."))
        change = f"SET TBLPROPERTIES ('{key}'='[]')" if how == "set" else f"UNSET TBLPROPERTIES ('{key}')"
        assert not self.sql(f"ALTER TABLE {quoted} {change}", may_refuse=True), f"{change} on {name} was accepted"
        STATS["bookkeeping edits refused"] += 1

    @precondition(lambda self: self.tables)
    @rule(data=st.data())
    def move(self, data):
        name = data.draw(st.sampled_from(sorted(self.tables)))
        quoted = ".".join(f"`{p}`" for p in name.split("."))
        if self.sql(f"ALTER TABLE {quoted} SET LOCATION '{self.some_folder(data)}'", may_refuse=True):
            STATS["moves"] += 1

    @precondition(lambda self: self.tables)
    @rule(data=st.data(), kind=st.sampled_from(["checkpoint", "underscore", "dot"]))
    def foreign_folder(self, data, kind):
        """What other engines keep in a table's folder: a stream's checkpoint, Delta's _delta_log,
        a staging folder."""
        root = self.folder(data.draw(st.sampled_from(sorted(self.tables))))
        n = next(self.counter)
        if kind == "checkpoint":
            for part in ("offsets/0", "commits/0", "metadata", "sources/0/0"):
                self.keep(root / f"ck{n}" / part, "{}")
        else:
            self.keep(root / f"{'_' if kind == 'underscore' else '.'}f{n}" / "part-0", "x")

    @precondition(lambda self: self.tables)
    @rule(data=st.data())
    def remove_orphans(self, data):
        self.cleanup(data, "orphans")

    @precondition(lambda self: self.tables)
    @rule(data=st.data())
    def expire(self, data):
        self.cleanup(data, "expire")

    @precondition(lambda self: self.tables)
    @rule(data=st.data())
    def vacuum(self, data):
        self.cleanup(data, "vacuum")

    @precondition(lambda self: self.tables)
    @rule(data=st.data(), what=st.sampled_from(["purge", "drop", "rename"]))
    def drop_or_rename(self, data, what):
        self.cleanup(data, what)

    def cleanup(self, data, what):
        STATS["cleanups"] += 1
        name = data.draw(st.sampled_from(sorted(self.tables)))
        catalog, parts = self.split(name)
        ident = ".".join(f"`{p}`" for p in parts)
        quoted = ".".join(f"`{p}`" for p in name.split("."))
        _age(Path(self.scratch))
        _age(Path(self.warehouse))
        _age(Path(self.catalogs["lake2"].properties["warehouse"].removeprefix("file://")))
        if what == "orphans":
            self.sql(f"CALL {catalog}.system.remove_orphan_files(table => '{ident}', older_than => {FUTURE})",
                     may_refuse=True)
        elif what == "expire":
            self.sql(f"CALL {catalog}.system.expire_snapshots(table => '{ident}', older_than => {FUTURE}, "
                     "retain_last => 1)", may_refuse=True)
        elif what == "vacuum":
            self.sql(f"VACUUM {quoted} RETAIN 168 HOURS", may_refuse=True)
        elif what == "purge":
            if self.sql(f"DROP TABLE {quoted} PURGE", may_refuse=True):
                del self.tables[name]
        elif what == "drop":  # its files stay: they are nobody's, and a new table of the name goes elsewhere
            self.dropped.append(self.folder(name))
            self.sql(f"DROP TABLE {quoted}")
            del self.tables[name]
        else:
            new = f"{name.rsplit('.', 1)[0]}.r{next(self.counter)}"
            self.sql(f"ALTER TABLE {quoted} RENAME TO {new}")
            self.tables[new] = self.tables.pop(name)

    # ---- after every step ----------------------------------------------------------------------

    @invariant()
    def every_table_reads_its_rows_and_nothing_kept_is_gone(self):
        STATS["steps"] += 1
        for name, rows in self.tables.items():
            quoted = ".".join(f"`{p}`" for p in name.split("."))
            try:
                got = sorted(r.id for r in self.spark.sql(f"SELECT id FROM {quoted}").collect())
            except Exception as e:  # noqa: BLE001
                raise AssertionError(f"{name} cannot be read: {e}\nstatements so far:\n" + ";\n".join(self.log)) from e
            assert got == sorted(rows), f"{name}: {got} != {sorted(rows)}\nstatements so far:\n" + ";\n".join(self.log)
        gone = [str(p) for p, text in self.kept.items() if not p.is_file() or p.read_bytes() != text]
        assert not gone, f"deleted or changed: {gone}\nstatements so far:\n" + ";\n".join(self.log)

    def teardown(self):
        for name in list(self.tables):
            catalog, ident = self.split(name)
            if self.catalogs[catalog].table_exists(ident):
                self.catalogs[catalog].drop_table(ident)
        for qualified in reversed(self.namespaces):
            catalog, ns = self.split(qualified)
            try:
                for ident in self.catalogs[catalog].list_tables(ns):
                    self.catalogs[catalog].drop_table(ident)
                self.catalogs[catalog].drop_namespace(ns)
            except Exception:  # noqa: BLE001
                pass
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.mark.parametrize("seed_", [20261126, 31] if PROFILE == "small" else [None])
def test_hostile_locations_never_lose_a_file(spark, warehouse, iceberg_catalog, lake2, tmp_path, seed_):
    Locations.spark, Locations.iceberg_catalog, Locations.warehouse = spark, iceberg_catalog, warehouse
    Locations.scratch = tmp_path
    Locations.catalogs = {"lake": iceberg_catalog, "lake2": lake2[1]}
    spark.conf.set("spark.lakerules.removeOrphanFiles.minAge", "0")
    try:
        machine = Locations if seed_ is None else seed(seed_)(type(f"LocationsSeed{seed_}", (Locations,), {}))
        run_state_machine_as_test(machine, settings=CHOSEN)
    finally:
        spark.conf.unset("spark.lakerules.removeOrphanFiles.minAge")
    print(f"\nhostile locations ({PROFILE}, seed {seed_}): {STATS}")
