"""The class-data archive lakerules.session() starts its JVM with (lakerules/jvm_archive.py): named
after what it depends on, used only when built and when the JVM's options leave class sharing to
it, and mapped by a JVM that session() starts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import jvm_archive as suite
import lakerules
from lakerules import jvm_archive


def test_the_archive_is_named_after_java_pyspark_and_the_shim_jar(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm_archive.DIR_VARIABLE, str(tmp_path))
    jar = tmp_path / "lakerules-shim.jar"
    jar.write_bytes(jvm_archive.JAR.read_bytes())
    monkeypatch.setattr(jvm_archive, "JAR", jar)
    archive = jvm_archive.path()
    assert archive.parent == tmp_path and archive.name.startswith("spark-") and archive.suffix == ".jsa"
    assert jvm_archive.options() == ""  # not built: the JVMs start without one
    archive.write_bytes(b"")
    assert jvm_archive.options().split()[0] == f"-XX:SharedArchiveFile={archive}"
    assert "-Xlog:cds=off" in jvm_archive.options()  # a JVM that cannot map it says nothing
    # a new shim jar (or pyspark, or java) is another name: the old archive is never used for it
    st = jar.stat()
    os.utime(jar, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert jvm_archive.path() != archive and jvm_archive.options() == ""
    os.utime(jar, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert jvm_archive.path() == archive


@pytest.mark.parametrize("variable, value, chosen", [
    ("SPARK_SUBMIT_OPTS", "-Xmx2g", False),
    ("SPARK_SUBMIT_OPTS", "-XX:SharedArchiveFile=/x.jsa", True),
    ("JDK_JAVA_OPTIONS", "-Xshare:off", True),
    ("PYSPARK_SUBMIT_ARGS", "--driver-java-options -Xshare:off pyspark-shell", True),
])
def test_options_that_choose_about_class_sharing_are_left_alone(monkeypatch, variable, value, chosen):
    for k in ("SPARK_SUBMIT_OPTS", "JDK_JAVA_OPTIONS", "PYSPARK_SUBMIT_ARGS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv(variable, value)
    assert jvm_archive.chosen() is chosen
    assert jvm_archive.chosen("-XX:SharedArchiveFile=/y.jsa -Xmx1g")


def test_a_session_in_a_running_jvm_adds_no_options(spark):
    assert lakerules._archive_options({}) == ""  # getOrCreate reuses this JVM: nothing to start


def test_the_cli_prints_the_options_spark_sql_takes():
    done = subprocess.run([sys.executable, "-m", "lakerules", "jvm-archive"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == jvm_archive.options()


@pytest.mark.skipif(not jvm_archive.options(), reason="the archive is not built (make setup builds it)")
def test_a_session_starts_its_jvm_mapping_the_archive(tmp_path):
    script = (
        "import sys, lakerules\n"
        "spark = lakerules.session(warehouse=sys.argv[1], master='local[1]', conf={'spark.ui.enabled': 'false'})\n"
        "args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())\n"
        "print([a for a in args if 'SharedArchiveFile' in a])\n"
        "print(spark.sql('SELECT 1 + 1').collect()[0][0])\n"
    )
    env = {**os.environ, "SPARK_SUBMIT_OPTS": suite.TEST_JVM_OPTIONS}  # not the suite's archive option
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    mapped, two = done.stdout.strip().splitlines()[-2:]
    assert mapped == str([f"-XX:SharedArchiveFile={jvm_archive.path()}"]) and two == "2"
    assert "cds" not in done.stderr.lower()  # no CDS warning reaches the user
