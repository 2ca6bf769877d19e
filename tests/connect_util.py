"""A Spark Connect server with the lakerules flags, as a separate JVM on a free localhost port.

The server is a JVM driver like spark-sql: it gets the rule registry from the configuration alone
(the shim starts `python -m lakerules.jvm_driver` on its first lake statement, with the
interpreter `spark.lakerules.python` names, which `python -m lakerules conf` sets to this one).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT = 240  # seconds: two cores shared with other JVMs
LOG_TAIL = 60  # lines of the server's log shown when it fails


def lake_flags(warehouse) -> list[str]:
    """What `python -m lakerules conf --warehouse W` prints, as spark-submit arguments."""
    out = subprocess.run([sys.executable, "-m", "lakerules", "conf", "--warehouse", str(warehouse)],
                         capture_output=True, text=True, check=True).stdout
    return shlex.split(out)


def jvm_env() -> dict[str, str]:
    """This environment without anything that would name an interpreter or a gateway for the JVM
    (PYTHONPATH stays: the registry process the server starts imports the lakerules under test)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET",
                        "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")}
    env["SPARK_HOME"] = str(SPARK_HOME)
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class ConnectServer:
    """`spark-submit --class SparkConnectServer` with the lakerules flags. `launch()` starts it,
    `wait()` returns its URL once the gRPC port accepts connections, `stop()` ends the JVM, and
    with it the registry process it started."""

    def __init__(self, warehouse: Path, workdir: Path, conf: dict[str, str] | None = None):
        self.warehouse, self.workdir = Path(warehouse), Path(workdir)
        self.conf = dict(conf or {})
        self.log = self.workdir / "connect-server.log"
        self.process: subprocess.Popen | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        return f"sc://localhost:{self.port}"

    def command(self, port: int) -> list[str]:
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
            **self.conf,
        }
        return [str(SPARK_HOME / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--name", "lakerules-connect-test",
                *lake_flags(self.warehouse), *(a for k, v in conf.items() for a in ("--conf", f"{k}={v}"))]

    def launch(self) -> None:
        """Start the JVM on a free port; returns at once (wait() waits for it to listen)."""
        self.port = free_port()
        command = self.command(self.port)
        with open(self.log, "ab") as log:
            log.write(f"==== {shlex.join(command)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=jvm_env(), cwd=self.workdir)

    def wait(self, timeout: float = START_TIMEOUT, attempts: int = 3) -> str:
        """Wait until the gRPC port accepts connections; the client URL. If the port was taken
        meanwhile (the server fails fast on a clash), start again on another one. Raises
        RuntimeError with the log's tail if the server exits or does not listen in time."""
        if self.process is None:
            self.launch()
        for attempt in range(attempts):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.process.poll() is None:
                if accepts(self.port):
                    return self.url
                time.sleep(0.5)
            if self.process.poll() is None:  # still running, never listening
                self.stop()
                raise RuntimeError(f"the Spark Connect server did not accept connections on port {self.port} "
                                   f"within {timeout:.0f}s; its log ({self.log}) ends:\n{self.tail()}")
            clash = "BindException" in self.tail() or "Address already in use" in self.tail()
            if not clash or attempt == attempts - 1:
                break
            self.launch()
        raise RuntimeError(f"the Spark Connect server exited with code {self.process.returncode} before it "
                           f"accepted connections; its log ({self.log}) ends:\n{self.tail()}")

    def tail(self, lines: int = LOG_TAIL) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        all_lines = text.splitlines()
        # a JVM's failure ends in a stack trace: also show the errors' own lines above it
        errors = [line for line in all_lines[:-lines] if not line[:1].isspace() and ("Exception" in line or "Error" in line)]
        head = ["(errors above:)", *errors[-10:], "(last lines:)"] if errors else []
        return "\n".join(head + all_lines[-lines:])

    def stop(self, timeout: float = 60) -> None:
        p = self.process
        if p is None or p.poll() is not None:
            return
        p.terminate()  # spark-submit execs the JVM: this is the server's own pid
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout)


# ---- what `DataFrame.show()` printed --------------------------------------------------------------

_BORDER = re.compile(r"^\+(-+\+)+$")


def shown_tables(text: str) -> list[tuple[tuple[str, ...], list[tuple[str, ...]]]]:
    """Every table `show(truncate=False)` printed in text, as (header, rows), cells stripped.
    Cells are cut at the border's `+` positions, so a `|` inside a value does not split it."""
    lines = [line.rstrip() for line in text.splitlines()]
    tables = []
    i = 0
    while i + 2 < len(lines):
        if _BORDER.match(lines[i]) and lines[i + 1].startswith("|") and lines[i + 2] == lines[i]:
            cuts = [j for j, c in enumerate(lines[i]) if c == "+"]

            def cells(line: str) -> tuple[str, ...]:
                return tuple(line[a + 1:b].strip() for a, b in zip(cuts, cuts[1:]))

            header, rows, i = cells(lines[i + 1]), [], i + 3
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(cells(lines[i]))
                i += 1
            tables.append((header, rows))
        i += 1
    return tables
