"""A class-data-sharing archive of the classes a Spark JVM with lakerules loads, for the test
suite's JVMs (its two sessions, spark-sql, Connect, the driver and writer processes).

A Spark JVM loads and verifies ~15,000 classes from pyspark's jars before it runs a statement; the
suite starts more than a dozen. Measured on 2 cores: `spark-sql -e "SELECT 1"` 13-14.6 s without
the archive, 4.5 s with it. Java 17's dynamic archive (-XX:ArchiveClassesAtExit) records what one
run loaded; later JVMs map it (-XX:SharedArchiveFile).

The archive is named after what it depends on (the java binary, pyspark's jars, the shim jar): any
change gives a new name, so a stale archive is never used. The JVM itself checks the class path
and the jars' sizes and times, and runs without the archive when they differ; its CDS log lines
are turned off (the options below), so a JVM that cannot use it behaves as before, only slower.

`python tests/jvm_archive.py` (make test runs it before pytest) builds the archive when missing;
tests/conftest.py adds `options()` to SPARK_SUBMIT_OPTS when the archive exists.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "jvm-archive"
# The test JVMs' options (tests/conftest.py adds the archive's). The suite's queries are tiny and
# many, on 2 cores shared by two workers:
# - C2's compiles cost more CPU than they win back (the delete/update/merge tests 159 s -> 134 s);
# - C1 alone gets a 48 MiB code cache, which Spark's classes and the generated code of thousands of
#   queries fill: the sweeper then flushes and C1 compiles again (sweeper ~10% and C1 ~17% of a
#   worker JVM's CPU); 240 MiB, as with C2, stops that;
# - one thread's collector: G1's and the parallel collector's threads compete with the other
#   worker for the same two cores.
# Measured on the optimize/merge/delete/update/semantics tests (87): 225-228 s -> 155-157 s.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off -Xlog:class+path=off"

# what the archive's JVM runs: a session, a table, the row-level verbs and OPTIMIZE, so that their
# classes (and Spark's planner, codegen and Parquet classes) are loaded once and archived
WORKLOAD = r"""
import sys
import lakerules
spark = lakerules.session(warehouse=sys.argv[1], master="local[1]", app_name="lakerules-jvm-archive",
                          conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
spark.sql("CREATE NAMESPACE lake.a")
spark.sql("CREATE TABLE lake.a.t (id BIGINT, kind STRING) PARTITIONED BY (bucket(2, id))")
spark.sql("INSERT INTO lake.a.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
spark.sql("DELETE FROM lake.a.t WHERE id = 1")
spark.sql("UPDATE lake.a.t SET kind = 'x' WHERE id = 2")
spark.sql("MERGE INTO lake.a.t t USING (SELECT 3 AS id, 'y' AS kind) s ON t.id = s.id "
          "WHEN MATCHED THEN UPDATE SET kind = s.kind WHEN NOT MATCHED THEN INSERT *")
spark.sql("OPTIMIZE lake.a.t ZORDER BY (id, kind)")
spark.sql("SELECT * FROM lake.a.t ORDER BY id").collect()
spark.sql("SELECT * FROM lake.a.t.snapshots").collect()
spark.stop()
"""


def _java() -> list[Path]:
    """The java binary Spark's launcher runs (JAVA_HOME's, else PATH's), if any."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return [Path(os.path.realpath(java))] if java else []


def path() -> Path:
    """The archive's file for this java, these pyspark jars and this shim jar."""
    import pyspark

    import lakerules

    digest = hashlib.sha256()
    jars = Path(pyspark.__file__).parent / "jars"
    for f in sorted([*jars.glob("*.jar"), Path(lakerules.jar_path())]) + _java():
        st = f.stat()
        digest.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return CACHE / f"spark-{digest.hexdigest()[:16]}.jsa"


def options() -> str:
    """The JVM options that map the archive, or "" when it has not been built."""
    archive = path()
    return f"-XX:SharedArchiveFile={archive} {QUIET}" if archive.exists() else ""


def build(jvm_options: str) -> Path | None:
    """Builds the archive when missing (one JVM running WORKLOAD); returns its path, or None when
    that JVM failed (the suite then runs without an archive)."""
    archive = path()
    if archive.exists():
        return archive
    CACHE.mkdir(parents=True, exist_ok=True)
    for old in CACHE.glob("spark-*.jsa"):
        old.unlink()
    partial = archive.with_suffix(".partial")
    with tempfile.TemporaryDirectory(prefix="lakerules-jvm-archive-") as work:
        env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{jvm_options} -XX:ArchiveClassesAtExit={partial} {QUIET}"}
        try:
            done = subprocess.run([sys.executable, "-c", WORKLOAD, work], env=env, capture_output=True, text=True,
                                  timeout=600)
            failure = f"exit {done.returncode}\n{done.stderr[-2000:]}" if done.returncode != 0 else None
        except subprocess.TimeoutExpired:
            failure = "no exit in 600 s"
    if failure or not partial.exists():
        partial.unlink(missing_ok=True)
        print(f"jvm_archive: no archive (the JVMs run without one): {failure or 'no file written'}", file=sys.stderr)
        return None
    partial.rename(archive)
    return archive


if __name__ == "__main__":
    print(build(TEST_JVM_OPTIONS) or "")
