"""The test suite's JVM options, and its class-data-sharing archive: lakerules/jvm_archive.py's,
built before pytest starts (make test runs this file) when `make setup` has not built it yet.

tests/conftest.py puts TEST_JVM_OPTIONS and the archive's options (lakerules.jvm_archive.options())
into SPARK_SUBMIT_OPTS, for every Spark JVM the suite starts (its two sessions, spark-sql,
Connect, the driver and writer processes).
"""

from __future__ import annotations

import sys

from lakerules import jvm_archive

# The suite's queries are tiny and many, on 2 cores shared by two workers:
# - C2's compiles cost more CPU than they win back (the delete/update/merge tests 159 s -> 134 s);
# - C1 alone gets a 48 MiB code cache, which Spark's classes and the generated code of thousands of
#   queries fill: the sweeper then flushes and C1 compiles again (sweeper ~10% and C1 ~17% of a
#   worker JVM's CPU); 240 MiB, as with C2, stops that;
# - one thread's collector: G1's and the parallel collector's threads compete with the other
#   worker for the same two cores.
# Measured on the optimize/merge/delete/update/semantics tests (87): 225-228 s -> 155-157 s.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"


if __name__ == "__main__":
    archive, why = jvm_archive.build(TEST_JVM_OPTIONS)
    if archive is None:
        print(f"jvm_archive: no archive (the JVMs run without one): {why}", file=sys.stderr)
    print(archive or "")
