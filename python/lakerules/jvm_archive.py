"""A class-data-sharing archive of the classes a Spark JVM with lakerules loads: a JVM that maps
it starts, and runs its first statements, without loading and verifying them from the jars.

A Spark JVM loads ~15,000 classes from pyspark's jars before its first answer. Measured on this
project's 2-core machine (bench/jvm_start.py, medians of 3 new processes): `lakerules.session()`
6.06 s -> 3.94 s, the first point query of that process on a 100,000-file table 2.65 s -> 2.23 s;
the test suite's `spark-sql -e "SELECT 1"` 13-14.6 s -> 4.5 s. Java's dynamic archive (-XX:ArchiveClassesAtExit,
Java 13+) records the classes one run loaded; later JVMs map it (-XX:SharedArchiveFile).

``python -m lakerules jvm-archive --build`` (``make setup`` runs it) builds the archive once: one
JVM runs WORKLOAD below (~40 s). ``session()`` then starts its JVM with ``options()``; spark-sql
and spark-submit take them as ``--driver-java-options "$(python -m lakerules jvm-archive)"``.

The archive is named after what it depends on (the java binary, pyspark's jars, the shim jar), so
a stale one is never used: after a new JDK, pyspark or shim jar, ``options()`` is empty until it
is built again. The JVM checks the class path and the jars' sizes and times itself too and runs
without the archive when they differ; its CDS log lines are off (QUIET), so a JVM that cannot map
the archive behaves as without it, only slower. It lives next to the shim jar (jars/jvm-archive/,
~190 MB), or in LAKERULES_JVM_ARCHIVE_DIR.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

JAR = Path(__file__).resolve().parent / "jars" / "lakerules-shim.jar"
DIR_VARIABLE = "LAKERULES_JVM_ARCHIVE_DIR"
QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off -Xlog:class+path=off"
SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"  # what Spark's launcher adds to the JVM's command line

# What the archive's JVM runs: a session, a table, the row-level verbs, OPTIMIZE and a few reads,
# so that their classes (and Spark's planner, codegen and Parquet classes) are loaded and archived.
WORKLOAD = r"""
import sys
import lakerules
spark = lakerules.session(warehouse=sys.argv[1], master="local[1]", app_name="lakerules-jvm-archive",
                          conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}, jvm_archive=False)
spark.sql("CREATE NAMESPACE lake.a")
spark.sql("CREATE TABLE lake.a.t (id BIGINT, kind STRING) PARTITIONED BY (bucket(2, id))")
spark.sql("INSERT INTO lake.a.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
spark.sql("INSERT INTO lake.a.t VALUES (4, 'd')")
spark.sql("SELECT * FROM lake.a.t WHERE id = 4").collect()
spark.sql("DELETE FROM lake.a.t WHERE id = 1")
spark.sql("UPDATE lake.a.t SET kind = 'x' WHERE id = 2")
spark.sql("MERGE INTO lake.a.t t USING (SELECT 3 AS id, 'y' AS kind) s ON t.id = s.id "
          "WHEN MATCHED THEN UPDATE SET kind = s.kind WHEN NOT MATCHED THEN INSERT *")
spark.sql("OPTIMIZE lake.a.t ZORDER BY (id, kind)")
spark.sql("SELECT kind, count(*) FROM lake.a.t GROUP BY kind ORDER BY kind").collect()
spark.sql("SELECT * FROM lake.a.t.snapshots").collect()
spark.stop()
"""


def directory() -> Path:
    """Where the archives are kept: LAKERULES_JVM_ARCHIVE_DIR, else jars/jvm-archive/."""
    return Path(os.environ.get(DIR_VARIABLE) or JAR.parent / "jvm-archive")


def _java() -> list[Path]:
    """The java binary Spark's launcher runs (JAVA_HOME's, else PATH's), if any."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return [Path(os.path.realpath(java))] if java else []


def path() -> Path:
    """The archive's file for this java, these pyspark jars and this shim jar."""
    import pyspark

    digest = hashlib.sha256()
    jars = Path(pyspark.__file__).parent / "jars"
    for f in sorted([*jars.glob("*.jar"), *([JAR] if JAR.is_file() else [])]) + _java():
        st = f.stat()
        digest.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return directory() / f"spark-{digest.hexdigest()[:16]}.jsa"


def options() -> str:
    """The JVM options that map the archive, or "" when it has not been built."""
    archive = path()
    return f"-XX:SharedArchiveFile={archive} {QUIET}" if archive.is_file() else ""


def chosen(extra_java_options: str = "") -> bool:
    """Whether the JVM's options already choose about class sharing (an archive, or -Xshare):
    then session() adds none of its own."""
    given = " ".join([os.environ.get(k, "") for k in (SUBMIT_OPTS, "JDK_JAVA_OPTIONS", "PYSPARK_SUBMIT_ARGS")]
                     + [extra_java_options])
    return "SharedArchiveFile" in given or "-Xshare:" in given


def build(jvm_options: str = "") -> tuple[Path | None, str]:
    """Builds the archive when missing (one JVM running WORKLOAD, with ``jvm_options`` too).
    Returns (its path, "") or (None, why not): the JVMs then start without one."""
    archive = path()
    if archive.is_file():
        return archive, ""
    if not JAR.is_file():
        return None, f"no shim jar at {JAR} (make setup builds it)"
    try:
        directory().mkdir(parents=True, exist_ok=True)
        for old in directory().glob("spark-*.jsa"):  # built for another java, pyspark or shim jar
            old.unlink()
    except OSError as e:
        return None, f"cannot write {directory()}: {e} (set {DIR_VARIABLE} to a writable folder)"
    partial = archive.with_suffix(".partial")
    with tempfile.TemporaryDirectory(prefix="lakerules-jvm-archive-") as work:
        env = {**os.environ, SUBMIT_OPTS: f"{jvm_options} -XX:ArchiveClassesAtExit={partial} {QUIET}".strip()}
        try:
            done = subprocess.run([sys.executable, "-c", WORKLOAD, work], env=env, capture_output=True, text=True,
                                  timeout=900)
            failure = f"the JVM exited with {done.returncode}: {done.stderr[-2000:]}" if done.returncode else ""
        except subprocess.TimeoutExpired:
            failure = "the JVM did not exit in 900 s"
    if failure or not partial.is_file():
        partial.unlink(missing_ok=True)
        return None, failure or "the JVM wrote no archive"
    partial.rename(archive)
    return archive, ""
