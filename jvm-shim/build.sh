#!/usr/bin/env bash
# Builds the shim jar with javac against the jars of the installed pyspark (no Maven needed).
# Usage: jvm-shim/build.sh PYTHON OUT_JAR   (the logic: jvm-shim/shim_build.py, shared with the wheel build)
set -euo pipefail
PY=${1:-python3}
OUT=${2:-python/lakerules/jars/lakerules-shim.jar}
here=$(cd "$(dirname "$0")" && pwd)
exec "$PY" "$here/shim_build.py" "$OUT"
