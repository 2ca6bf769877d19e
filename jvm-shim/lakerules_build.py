"""The PEP 517 build backend of lakerules: setuptools', plus the shim jar compiled into every
wheel (and editable install) from jvm-shim/src with javac against pyspark's jars.

The isolated build environment gets pyspark as a build requirement, so `pip install .`,
`pip wheel .` and `python -m build` need only a JDK. With --no-build-isolation, the installed
pyspark's jars are used; LAKERULES_PYSPARK_JARS=DIR names another jars folder (then no pyspark
is required to build). The sdist carries the Java sources, not a jar."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (prepare_metadata_*, build_sdist, get_requires_for_build_sdist)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import shim_build  # noqa: E402

PYSPARK = "pyspark>=4.1,<4.4"  # as the dependencies (pyproject.toml)
_JAR = Path(__file__).resolve().parent.parent / "python" / "lakerules" / "jars" / "lakerules-shim.jar"


def _pyspark_needed() -> list[str]:
    return [] if os.environ.get("LAKERULES_PYSPARK_JARS") else [PYSPARK]


def get_requires_for_build_wheel(config_settings=None):
    return _setuptools.get_requires_for_build_wheel(config_settings) + _pyspark_needed()


def get_requires_for_build_editable(config_settings=None):
    return _setuptools.get_requires_for_build_editable(config_settings) + _pyspark_needed()


def _build_jar() -> None:
    try:
        shim_build.build(_JAR)
    except shim_build.BuildError as e:
        raise SystemExit(f"lakerules: cannot build the shim jar: {e}") from None


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _build_jar()
    # setuptools builds in ./build of the tree: a module removed since an earlier build would
    # still be there, and go into the wheel
    shutil.rmtree(_JAR.parents[3] / "build" / "lib", ignore_errors=True)
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _build_jar()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
