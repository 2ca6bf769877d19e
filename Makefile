# make setup: a fresh machine to a working install (.venv/, the deps, a JDK, the Java shim jar).
# make test:  the test suite (installs the PostgreSQL server the concurrency test starts, and the anchor, if missing).
# make unit:  the rule unit layer alone (tests/unit: each rule applied to small plans; part of make test too).
# make test-matrix: the wheel built, installed into a fresh venv and run, per pyspark version.
# make demo: examples/demo.py on the embedded catalog.
# make docs: the documentation site (README.md, docs/) into site/, mkdocs build --strict.
# make soak:  the model, hostile-alphabet, concurrency, wide-read, scale, Connect, stream small-files, hostile-location, streams-x-maintenance and differential (against Iceberg's runtime) tests, long profiles (see RELIABILITY.md).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
JAR    := python/lakerules/jars/lakerules-shim.jar

.PHONY: setup java postgres venv shim jvm-archive anchor test unit test-matrix soak demo docs bench clean

setup: java venv shim jvm-archive

# Spark needs a JVM and the shim needs javac: install Debian's JDK 17 when either is missing.
java:
	@if ! command -v javac >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then \
	  echo "installing openjdk-17-jdk-headless"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q openjdk-17-jdk-headless; \
	fi
	@javac -version

# Only the tests need it: the concurrency test starts a throwaway PostgreSQL server (the SQL
# catalog users share). make test installs Debian's server when its binaries are missing.
postgres:
	@if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then \
	  echo "installing postgresql"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q postgresql; \
	fi
	@ls -d /usr/lib/postgresql/*/bin

venv:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'

shim:
	jvm-shim/build.sh $(PY) $(JAR)

# The class-data-sharing archive lakerules.session()'s JVM starts from (python/lakerules/jvm_archive.py:
# one JVM's run recorded, ~40 s; a session then starts in about half the time). Without it the JVMs
# start as before, only slower: a failure here is reported, not fatal.
jvm-archive:
	@$(PY) -m lakerules jvm-archive --build >/dev/null && echo "class-data archive: $$($(PY) -m lakerules jvm-archive | sed 's/ .*//')" \
	  || echo "no class-data archive: Spark JVMs start without one (see above)"

# Two pytest workers (pytest-xdist), each with its SparkSession, a test file each at a time
# (module fixtures stay in one process): a serial run leaves a core idle while Py4J, pyiceberg
# and the drivers' processes wait on each other.
# tests/jvm_archive.py first: the class-data-sharing archive the suite's JVMs start from (make setup
# builds it; again after the shim jar, pyspark or java changed; a JVM start 13 s -> 4.5 s).
TEST_WORKERS ?= 2
test: postgres anchor
	$(PY) tests/jvm_archive.py
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=20 python/lakerules tests

unit:
	$(PY) -m pytest tests/unit -q

# The anchor (tests/anchor.py): Iceberg's own Spark runtime, run beside lakerules by the interop tests
# and the benchmarks. Iceberg's newest runtime is for Spark 4.1 (1.12.0 has none for 4.2 or 4.3), so
# it gets a venv of its own with that pyspark, and its jars come from Maven Central into .anchor/jars.
# Nothing a user's `make setup` needs depends on it.
ANCHOR        := .anchor
ANCHOR_PY     := $(ANCHOR)/venv/bin/python
ANCHOR_SPARK  ?= 4.1.4
ICEBERG       ?= 1.12.0
ANCHOR_JARS   := org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:$(ICEBERG) org.xerial:sqlite-jdbc:3.54.1.0
anchor:
	@test -x $(ANCHOR_PY) || $(PYTHON) -m venv $(ANCHOR)/venv
	@$(ANCHOR_PY) -c "import pyspark, sys; sys.exit(pyspark.__version__ != '$(ANCHOR_SPARK)')" 2>/dev/null \
	  || $(ANCHOR_PY) -m pip install -q "pyspark==$(ANCHOR_SPARK)" "pyarrow>=18"
	@mkdir -p $(ANCHOR)/jars
	@for a in $(ANCHOR_JARS); do \
	  f=$$(echo $$a | awk -F: '{print $$2"-"$$3".jar"}'); \
	  test -f $(ANCHOR)/jars/$$f || mvn -q -B dependency:copy -Dartifact=$$a -DoutputDirectory=$(ANCHOR)/jars \
	    > $(ANCHOR)/mvn.log 2>&1 || { cat $(ANCHOR)/mvn.log; exit 1; }; \
	done
	@echo "anchor: pyspark $(ANCHOR_SPARK), $$(ls $(ANCHOR)/jars | tr '\n' ' ')"

# The built wheel in a fresh venv (tests/test_packaging.py), once with the newest dependencies
# pip resolves and once with the oldest the package declares (pyproject.toml). Minutes, mostly
# pip installing into the venv.
MATRIX ?= ; pyspark==4.1.0 pyarrow==18.1.0 numpy==1.26.4
test-matrix:
	LAKERULES_PACKAGING=1 LAKERULES_MATRIX="$(MATRIX)" $(PY) -m pytest tests/test_packaging.py -q

# Long profiles: SOAK_EXAMPLES random sequences of 30 steps (and hostile-alphabet statement cycles
# per parser setting), writers racing for SOAK_SECONDS.
SOAK_EXAMPLES ?= 40
SOAK_SECONDS  ?= 120
soak:
	LAKERULES_PROFILE=soak LAKERULES_SOAK_EXAMPLES=$(SOAK_EXAMPLES) LAKERULES_CONCURRENCY_SECONDS=$(SOAK_SECONDS) \
	  $(PY) -m pytest tests/test_model.py tests/test_hostile_alphabet.py tests/test_concurrency.py tests/test_wide_read.py \
	    tests/test_scale.py tests/test_connect.py tests/test_stream_small_files.py tests/test_hostile_locations.py \
	    tests/test_stream_maintenance.py tests/test_anchor_differential.py -s -q

demo:
	$(PY) examples/demo.py

# MkDocs comes with the test extra (make setup); any warning (a broken link or anchor) fails.
docs:
	$(PY) -m mkdocs build --strict

bench: anchor
	$(PY) -m pip install -q -e '.[test,bench]'
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) $(JAR) warehouse bench/out site build/jvm-archive $(ANCHOR)
