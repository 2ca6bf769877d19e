#!/usr/bin/env bash
# Builds the shim jar with javac against the jars of the installed pyspark (no Maven needed).
# Usage: jvm-shim/build.sh PYTHON OUT_JAR
set -euo pipefail
PY=${1:-python3}
OUT=${2:-python/lakerules/jars/lakerules-shim.jar}
here=$(cd "$(dirname "$0")" && pwd)
jars=$("$PY" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
javac --release 17 -nowarn -Xlint:-options -encoding UTF-8 -d "$classes" -cp "$jars/*" \
  $(find "$here/src/main/java" -name '*.java')
# What the parser may route to Python before a JVM driver's registry is attached: the
# statements.ROUTES of the lakerules source next to this shim.
PYTHONPATH="$here/../python${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c \
  'import sys; from lakerules.statements import ROUTES; sys.stdout.write(ROUTES)' \
  > "$classes/io/lakerules/routes.regex"
# Resources: the data source registration (format("iceberg") -> io.lakerules.LakeSource).
if [ -d "$here/src/main/resources" ]; then cp -R "$here/src/main/resources/." "$classes/"; fi
mkdir -p "$(dirname "$OUT")"
jar --create --file "$OUT" -C "$classes" .
echo "built $OUT"
