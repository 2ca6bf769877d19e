"""One writer of the concurrency test (tests/test_concurrency.py), in its own process with its own
local[1] SparkSession. It reads commands on stdin, one a line, answers on stdout:

    setup <table>                      create the table and load its first rows
    run <table> <seconds> <log.json>   random statements for that long; log each one
    dump <table> <rows.json>           the table's rows as lakerules reads them
    quit

Each statement is tagged with its id through the session setting
spark.lakerules.snapshot-property.test.statement, so the snapshot it committed (if any) says
which statement made it. Statements are built so that their effect depends only on the table's
rows: the test replays the committed ones in snapshot order against a model of the rows.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

INITIAL_ROWS = 120  # ids 0..119, v = -1
MIN_STATEMENTS = 3  # each writer runs at least these, however slow the machine
FRESH_IDS = 1_000_000  # INSERT ids: FRESH_IDS + statement id * 10 + i: never seen before


def statement(rng: random.Random, table: str, k: int) -> dict:
    """Statement k: its kind, parameters and SQL, a pure function of (rng state, k)."""
    kind = rng.choices(["insert", "delete", "update", "merge", "optimize", "zorder"], [3, 3, 3, 3, 1, 1])[0]
    s = {"kind": kind, "k": k}
    if kind == "insert":
        s["ids"] = [FRESH_IDS + k * 10 + i for i in range(rng.randint(1, 3))]
        s["sql"] = f"INSERT INTO {table} VALUES " + ", ".join(f"({i}, {k})" for i in s["ids"])
    elif kind == "delete" and rng.random() < 0.5:
        lo = rng.randrange(INITIAL_ROWS)
        s.update(kind="delete_range", lo=lo, hi=lo + rng.randint(0, 15))
        s["sql"] = f"DELETE FROM {table} WHERE id BETWEEN {s['lo']} AND {s['hi']}"
    elif kind in ("delete", "update"):
        s["m"] = rng.randint(5, 13)
        s["r"] = rng.randrange(s["m"])
        where = f"WHERE id % {s['m']} = {s['r']}"
        s["sql"] = f"DELETE FROM {table} {where}" if kind == "delete" else f"UPDATE {table} SET v = {k} {where}"
    elif kind == "merge":
        s["source"] = [[i, rng.choice("ud")] for i in rng.sample(range(INITIAL_ROWS + 40), 3)]
        values = ", ".join(f"({i}L, '{op}')" for i, op in s["source"])
        s["sql"] = (
            f"MERGE INTO {table} t USING (SELECT * FROM VALUES {values} AS s(id, op)) s ON t.id = s.id "
            f"WHEN MATCHED AND s.op = 'd' THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET v = {k} "
            f"WHEN NOT MATCHED AND s.op = 'u' THEN INSERT (id, v) VALUES (s.id, {k})"
        )
    elif kind == "optimize":
        s["sql"] = f"OPTIMIZE {table}"
    else:
        s["sql"] = f"OPTIMIZE {table} ZORDER BY (v, id)"
    return s


def apply(s: dict, rows: list[tuple]) -> tuple[list[tuple], int | None]:
    """The rows (id, v) after statement s, and the rows it affected (None for INSERT/OPTIMIZE)."""
    kind, k = s["kind"], s["k"]
    if kind == "insert":
        return rows + [(i, k) for i in s["ids"]], None
    if kind in ("optimize", "zorder"):
        return rows, None
    if kind == "delete_range":
        kept = [r for r in rows if not s["lo"] <= r[0] <= s["hi"]]
        return kept, len(rows) - len(kept)
    if kind == "delete":
        kept = [r for r in rows if r[0] % s["m"] != s["r"]]
        return kept, len(rows) - len(kept)
    if kind == "update":
        hit = [r for r in rows if r[0] % s["m"] == s["r"]]
        return [(r[0], k) if r[0] % s["m"] == s["r"] else r for r in rows], len(hit)
    ops = dict((i, op) for i, op in s["source"])
    out, affected, seen = [], 0, set()
    for r in rows:
        op = ops.get(r[0])
        if op is None:
            out.append(r)
            continue
        seen.add(r[0])
        affected += 1
        if op == "u":
            out.append((r[0], k))
    for i, op in s["source"]:
        if i not in seen and op == "u":
            out.append((i, k))
            affected += 1
    return out, affected


def classify(error: BaseException) -> str:
    """'conflict' for lakerules' conflict error (nothing committed), else 'error'."""
    text = str(error)
    if "nothing was committed" in text and "conflict" in text.lower():
        return "conflict"
    return "error"


def run(spark, table: str, seconds: float, worker: int, seed: int, first_k: int) -> list[dict]:
    rng = random.Random(seed)
    log, k = [], first_k
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or len(log) < MIN_STATEMENTS:
        entry = statement(rng, table, k)
        entry.update(worker=worker, start=time.time())
        spark.conf.set("spark.lakerules.snapshot-property.test.statement", str(k))
        try:
            rows = spark.sql(entry["sql"]).collect()
            entry["status"] = "ok"
            if entry["kind"] in ("delete", "delete_range", "update", "merge"):
                entry["affected"] = rows[0][0]
        except Exception as e:  # noqa: BLE001 - recorded, judged by the test
            entry["status"] = classify(e)
            entry["error"] = str(e)[:2000]
        entry["end"] = time.time()
        log.append(entry)
        k += 1
    spark.conf.unset("spark.lakerules.snapshot-property.test.statement")
    return log


def main() -> None:
    worker, seed, warehouse, catalogs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
    os.environ["TZ"] = "UTC"
    import lakerules

    others = {}
    for name, props in catalogs.items():
        if name != "lake":
            others[f"spark.sql.catalog.{name}"] = lakerules.CATALOG_CLASS
            others.update({f"spark.sql.catalog.{name}.{k}": v for k, v in props.items()})

    spark = lakerules.session(
        warehouse=warehouse,
        master="local[1]",
        app_name=f"lakerules-concurrency-{worker}",
        catalog_properties=catalogs["lake"],
        conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "1",
            "spark.default.parallelism": "1",
            "spark.sql.session.timeZone": "UTC",
            "spark.driver.memory": "1g",
            **others,
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    print("ready", flush=True)
    runs = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd, *args = line.split()
        if cmd == "setup":
            (table,) = args
            namespace = table.rsplit(".", 1)[0]
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
            spark.sql(f"CREATE TABLE {table} (id BIGINT, v BIGINT) PARTITIONED BY (bucket(4, id))")
            spark.conf.set("spark.lakerules.snapshot-property.test.statement", "setup")
            spark.sql(f"INSERT INTO {table} SELECT id, -1 FROM range({INITIAL_ROWS})")
            spark.conf.unset("spark.lakerules.snapshot-property.test.statement")
        elif cmd == "run":
            table, seconds, path = args[0], float(args[1]), args[2]
            log = run(spark, table, seconds, worker, seed * 1000 + runs, (worker + 1) * 100_000 + runs * 10_000)
            runs += 1
            with open(path, "w") as f:
                json.dump(log, f)
        elif cmd == "dump":
            table, path = args
            with open(path, "w") as f:
                json.dump([list(r) for r in spark.sql(f"SELECT id, v FROM {table}").collect()], f)
        elif cmd == "quit":
            break
        print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
