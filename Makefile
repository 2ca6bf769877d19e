# make setup: a fresh machine to a working install (.venv/, pinned deps, the Java shim jar).
# make test:  the test suite.  make demo: examples/quickstart.py on the embedded catalog.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
JAR    := python/lakerules/jars/lakerules-shim.jar

.PHONY: setup java venv shim test demo bench clean

setup: java venv shim

# Spark needs a JVM and the shim needs javac: install Debian's JDK 17 when either is missing.
java:
	@if ! command -v javac >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then \
	  echo "installing openjdk-17-jdk-headless"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q openjdk-17-jdk-headless; \
	fi
	@javac -version

venv:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'

shim:
	jvm-shim/build.sh $(PY) $(JAR)

test:
	$(PY) -m pytest python/lakerules tests

demo:
	$(PY) examples/quickstart.py

bench:
	$(PY) -m pip install -q -e '.[test,bench]'
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) $(JAR) warehouse bench/out
