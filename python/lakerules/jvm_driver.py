"""The rule registry of a JVM driver: ``python -m lakerules.jvm_driver``.

spark-sql, the Thrift server, Java and Scala applications (and Python applications that never
import lakerules) have no Python process of their own that could attach the registry. The shim
(``io.lakerules.PythonBackend``) starts this module on the first statement that needs the
registry, the way spark-submit starts a Python driver: a Py4J server in the JVM, its port and
secret in ``PYSPARK_GATEWAY_PORT`` and ``PYSPARK_GATEWAY_SECRET``. This module connects to it,
wraps the JVM's running SparkContext and SparkSession (it creates neither), calls
``lakerules.attach`` and then serves the JVM's callbacks until the JVM goes away: its stdin is a
pipe from the JVM, which closes when the JVM exits.
"""

from __future__ import annotations

import logging
import os
import signal
import sys

from lakerules.spark import shared

USAGE = (
    f"{shared.JVM_DRIVER_MODULE} is started by the lakerules shim inside a Spark JVM driver (spark-sql, "
    "spark-submit, a Java/Scala application); it needs PYSPARK_GATEWAY_PORT and "
    "PYSPARK_GATEWAY_SECRET from that JVM and is not meant to be run by hand."
)


def connect():
    """The PySpark session of the JVM that started this process (its own SparkSession object)."""
    from lakerules.spark import jvm as J

    return J.connect_to_driver(shared.PYTHON_SETTING)


def main() -> int:
    # Ctrl-C in spark-sql reaches this process too (same process group): the JVM cancels the
    # statement; this process must keep serving.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    if not os.environ.get("PYSPARK_GATEWAY_PORT") or not os.environ.get("PYSPARK_GATEWAY_SECRET"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        import lakerules

        spark = connect()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # SparkContext installed its own handler
        lakerules.attach(spark)
    except BaseException as e:  # noqa: BLE001 - reported to the JVM through our output and exit code
        print(f"{shared.JVM_DRIVER_MODULE}: could not attach the rule registry: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    # Serve callbacks (on Py4J's threads) until the JVM closes our stdin, i.e. exits.
    try:
        while sys.stdin.buffer.read(65536):
            pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # no interpreter shutdown: nothing may call into the JVM that is gone


if __name__ == "__main__":
    sys.exit(main())
