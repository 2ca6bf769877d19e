"""The package as users get it: a wheel with the shim jar inside, installed into a fresh venv.

The fast check runs in `make test`: the jar next to the sources routes what the sources route
(a stale jar would send new statements to Spark's parser). The wheel tests build the wheel with
pip (the in-tree backend, jvm-shim/lakerules_build.py, compiling the shim with javac), install
it into a fresh venv and run DELETE, UPDATE and OPTIMIZE there, once per row of
LAKERULES_MATRIX: rows separated by ";", each the requirements pip installs into the venv
before the run (an empty row: the wheel's dependencies as pip resolves them, the newest). They
need minutes and pip's cache (a fresh venv installs pyspark, pyarrow, pyiceberg), so they run
in `make test-matrix`, which .ci/run calls after `make test`: LAKERULES_PACKAGING=1 enables
them. Their folders are their own (tempfile), not pytest's tmp_path, which other pytest runs
on the machine prune."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

import lakerules
from lakerules.sql.routes import ROUTES

ROOT = Path(__file__).resolve().parents[1]
SMOKE = Path(__file__).resolve().parent / "packaging_smoke.py"
PACKAGING = bool(os.environ.get("LAKERULES_PACKAGING"))


def test_the_jar_routes_what_the_sources_route():
    with zipfile.ZipFile(lakerules.jar_path()) as jar:
        assert jar.read("io/lakerules/routes.regex").decode() == ROUTES, \
            "the shim jar is older than lakerules/sql/routes.py: rebuild it (make shim)"


def _shared_names() -> dict[str, str]:
    from lakerules.spark import shared

    return {k: v for k, v in vars(shared).items() if k.isupper() and isinstance(v, str)}


def test_the_jar_shares_the_sources_names():
    """The names the shim and Python both spell (settings, the module a JVM driver starts, file
    format options, class names) are lakerules/spark/shared.py's, written into the jar."""
    import json

    with zipfile.ZipFile(lakerules.jar_path()) as jar:
        built = json.loads(jar.read("io/lakerules/shared.json").decode())
        classes = set(jar.namelist())
    assert built == _shared_names(), "the shim jar is older than lakerules/spark/shared.py: rebuild it (make shim)"
    for key, name in built.items():
        if key.endswith("_CLASS"):
            assert name.replace(".", "/") + ".class" in classes, f"{key}={name!r} is no class of the shim jar"


def test_the_shared_module_is_the_jvm_drivers():
    """JVM_DRIVER_MODULE names the module PythonBackend starts (renaming it fails here, not in spark-sql)."""
    import importlib.util

    from lakerules.spark import shared

    assert importlib.util.find_spec(shared.JVM_DRIVER_MODULE) is not None


def test_the_build_refuses_a_shared_class_the_shim_lacks(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("_shim_build", ROOT / "jvm-shim" / "shim_build.py")
    shim_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim_build)
    assert shim_build.shared_names() == _shared_names()
    (tmp_path / "io" / "lakerules").mkdir(parents=True)
    (tmp_path / "io" / "lakerules" / "LakeCatalog.class").write_bytes(b"")
    shim_build.check_classes({"CATALOG_CLASS": "io.lakerules.LakeCatalog", "OPTION": "x"}, tmp_path)
    with pytest.raises(shim_build.BuildError, match="TABLE_CLASS = 'io.lakerules.Gone'"):
        shim_build.check_classes({"CATALOG_CLASS": "io.lakerules.LakeCatalog", "TABLE_CLASS": "io.lakerules.Gone"}, tmp_path)


def _run(cmd, **kw):
    """A command outside this process's paths: with PYTHONPATH (say, to a source tree holding an
    egg-info) pip would take lakerules as installed already."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LAKERULES_PYSPARK_JARS")}
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, **kw)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def workdir():
    where = Path(tempfile.mkdtemp(prefix="lakerules-packaging-"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(scope="module")
def wheel(workdir) -> Path:
    """The wheel as `pip wheel .` builds it: an isolated build environment with pyspark in it."""
    out = workdir / "wheel"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, ROOT])
    (built,) = out.glob("lakerules-*.whl")
    with zipfile.ZipFile(built) as whl:
        (out / "shim.jar").write_bytes(whl.read("lakerules/jars/lakerules-shim.jar"))
    with zipfile.ZipFile(out / "shim.jar") as jar:
        assert jar.read("io/lakerules/routes.regex").decode() == ROUTES
        assert "io/lakerules/LakeRulesExtensions.class" in jar.namelist()
        assert "io/lakerules/shared.json" in jar.namelist()
    return built


@pytest.fixture(scope="module")
def venv(workdir, wheel) -> Path:
    """A fresh venv with the wheel and its dependencies, from the package index (pip's cache)."""
    where = workdir / "venv"
    _run([sys.executable, "-m", "venv", where])
    python = where / "bin" / "python"
    _run([python, "-m", "pip", "install", "-q", wheel])
    return python


def _rows() -> list[str]:
    return [r.strip() for r in os.environ.get("LAKERULES_MATRIX", "").split(";")]


@pytest.mark.skipif(not PACKAGING, reason="builds and installs the wheel: make test-matrix")
@pytest.mark.parametrize("row", _rows())
def test_the_wheel_in_a_fresh_venv(venv, wheel, row, workdir):
    if row:
        _run([venv, "-m", "pip", "install", "-q", wheel, *row.split()])
    _run([venv, "-m", "pip", "check"])
    version = _run([venv, "-c", "import pyspark; print(pyspark.__version__)"]).strip()
    here = workdir / f"run-{version}"
    # The shim compiles against this version's jars as well (a source build on that cluster).
    jars = _run([venv, "-c", "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))"]).strip()
    _run([venv, ROOT / "jvm-shim" / "shim_build.py", here / "shim.jar", "--pyspark-jars", jars])
    # And the wheel's jar (built once, against the build environment's pyspark) serves it.
    out = _run([venv, SMOKE, here / "warehouse"], cwd=workdir)
    assert f"ok pyspark {version} " in out
    for requirement in row.split():
        name, _, pinned = requirement.partition("==")
        got = _run([venv, "-c", f"import importlib.metadata as m; print(m.version({name!r}))"]).strip()
        assert not pinned or got == pinned, f"{name} {got} in the venv, not {pinned}"


@pytest.mark.skipif(not PACKAGING, reason="builds and installs the wheel: make test-matrix")
def test_the_catalog_and_storage_extras(venv, wheel, workdir):
    """pip resolves the s3, hive and glue extras next to the wheel's dependencies, and lakerules
    builds a Hive and a Glue catalog and an S3 file system with what they bring."""
    _run([venv, "-m", "pip", "install", "-q", f"{wheel}[s3,hive,glue]"])
    _run([venv, "-m", "pip", "check"])
    out = _run([venv, ROOT / "tests" / "extras_smoke.py"], cwd=workdir)
    assert "ok extras GlueCatalog HiveCatalog S3FileSystem" in out, out
