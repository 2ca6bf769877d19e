"""Builds the shim jar: javac against a pyspark's jars, plus the routes the parser hands to
Python (lakerules/sql/routes.py) and the names the shim and Python share
(lakerules/spark/shared.py). The jar is reproducible: sorted entries, fixed timestamps.

    python jvm-shim/shim_build.py OUT_JAR [--pyspark-jars DIR]

Without --pyspark-jars (or LAKERULES_PYSPARK_JARS), the jars of the pyspark importable by the
running interpreter. Used by jvm-shim/build.sh and by the wheel build (jvm-shim/lakerules_build.py).
Needs only the standard library and a JDK (javac, release 17)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src" / "main" / "java"
RESOURCES = HERE / "src" / "main" / "resources"
ROUTES_FILE = HERE.parent / "python" / "lakerules" / "sql" / "routes.py"
SHARED_FILE = HERE.parent / "python" / "lakerules" / "spark" / "shared.py"
# 1980-01-01, zip's epoch: the same bytes from the same sources on every build.
_STAMP = (1980, 1, 1, 0, 0, 0)


class BuildError(Exception):
    pass


def pyspark_jars() -> Path:
    """The jars folder of the pyspark this interpreter imports (or LAKERULES_PYSPARK_JARS)."""
    given = os.environ.get("LAKERULES_PYSPARK_JARS")
    if given:
        return Path(given)
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise BuildError(f"the shim compiles against pyspark's jars, and {sys.executable} has no pyspark "
                         "(install pyspark>=4.1,<4.4, or set LAKERULES_PYSPARK_JARS to a pyspark jars folder)")
    return Path(spec.origin).parent / "jars"


def _module(path: Path, name: str):
    """A module of the package read on its own (it imports nothing), without the package's dependencies."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def routes() -> str:
    return _module(ROUTES_FILE, "_lakerules_routes").ROUTES


def shared_names(path: Path = SHARED_FILE) -> dict[str, str]:
    """The upper-case strings of lakerules/spark/shared.py, as the jar holds them (shared.json)."""
    module = _module(path, "_lakerules_shared")
    return {k: v for k, v in sorted(vars(module).items()) if k.isupper() and isinstance(v, str)}


def check_classes(names: dict[str, str], classes: Path) -> None:
    """Every ``*_CLASS`` of shared.py is a class the shim compiled into ``classes``."""
    missing = [f"{k} = {v!r}" for k, v in names.items()
               if k.endswith("_CLASS") and not (classes / (v.replace(".", "/") + ".class")).is_file()]
    if missing:
        raise BuildError(f"{SHARED_FILE} names classes the shim does not have: {', '.join(missing)}")


def build(out: str | os.PathLike, jars: str | os.PathLike | None = None) -> Path:
    jars = Path(jars) if jars else pyspark_jars()
    if not any(jars.glob("spark-sql_*.jar")):
        raise BuildError(f"no Spark SQL jar in {jars}: not a pyspark jars folder")
    javac = shutil.which("javac")
    if javac is None:
        raise BuildError("the shim jar is compiled with javac: install a JDK 17 or newer "
                         "(Debian: apt-get install openjdk-17-jdk-headless)")
    sources = sorted(str(p) for p in SOURCES.rglob("*.java"))
    out = Path(out).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        classes = Path(tmp)
        cmd = [javac, "--release", "17", "-nowarn", "-Xlint:-options", "-encoding", "UTF-8",
               "-d", str(classes), "-cp", str(jars / "*"), *sources]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildError(f"javac failed against {jars}:\n{done.stdout}{done.stderr}")
        (classes / "io" / "lakerules" / "routes.regex").write_text(routes(), encoding="utf-8")
        names = shared_names()
        check_classes(names, classes)
        (classes / "io" / "lakerules" / "shared.json").write_text(
            json.dumps(names, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        # resources (the DataSourceRegister service that names format("iceberg"))
        if RESOURCES.is_dir():
            shutil.copytree(RESOURCES, classes, dirs_exist_ok=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(out.name + ".part")
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as jar:
            entries = [("META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\r\nCreated-By: lakerules shim_build\r\n\r\n")]
            entries += sorted((p.relative_to(classes).as_posix(), p.read_bytes()) for p in classes.rglob("*") if p.is_file())
            for name, data in entries:
                info = zipfile.ZipInfo(name, _STAMP)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                jar.writestr(info, data)
        os.replace(part, out)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="shim_build.py")
    parser.add_argument("out", nargs="?", default=str(HERE.parent / "python" / "lakerules" / "jars" / "lakerules-shim.jar"))
    parser.add_argument("--pyspark-jars", help="compile against this pyspark jars folder")
    args = parser.parse_args(argv)
    try:
        print("built", build(args.out, args.pyspark_jars))
    except BuildError as e:
        print(f"shim_build: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
