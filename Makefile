# The two commands of the README: `make run` and `make test`.
# Each creates .venv and installs what it needs, idempotently.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check

.PHONY: run test test-fast lint typecheck unit bench prereq java jar clean

prereq:
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; pymq needs Python 3.10+" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
		|| { echo "error: pymq needs Python 3.10+, found $$($(PYTHON) --version 2>&1)" >&2; exit 1; }
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null \
		|| { echo "error: $(PYTHON) lacks venv/ensurepip (Debian: apt-get install python3-venv)" >&2; exit 1; }

$(PY): | prereq
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# the C sources: an edit rebuilds the compiled modules (pip install -e builds them in place)
NATIVE := $(wildcard connector/*/*.c connector/*/*.h broker/*/*.c) setup.py

# the dev checkout gets every part: the client (pymq's base), the servers and Spark
# (`pymq[all]`; pyproject.toml lists each extra, README's Set up says which host needs which)
$(VENV)/.installed: pyproject.toml $(NATIVE) | $(PY)
	$(PIP) install --quiet -e '.[all]'
	@touch $@

$(VENV)/.installed-test: pyproject.toml $(NATIVE) | $(PY)
	$(PIP) install --quiet -e '.[test]'  # the test extra takes pymq[all]
	@touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(PY) jobs/quickstart.py

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: $(VENV)/.installed-test
	$(VENV)/bin/mypy

java:
	@command -v java >/dev/null || { echo "error: java not found; Spark and the Spark tests need Java 17+" >&2; exit 1; }

# format("pymq-jvm"): the Java of jvm/ compiled against the installed pyspark's jars, into the
# package (connector/spark/jars/, served by the editable install; `pymq spark-jar` prints it)
JAR := connector/spark/jars/pymq-spark.jar
JAVA_SRC := $(wildcard jvm/src/io/pymq/spark/*.java) jvm/resources/META-INF/services/org.apache.spark.sql.sources.DataSourceRegister \
	connector/spark/options.json

jar: $(JAR)

$(JAR): $(JAVA_SRC) | $(VENV)/.installed
	@command -v javac >/dev/null && command -v jar >/dev/null \
		|| { echo "error: javac/jar not found; format(\"pymq-jvm\") is built with a JDK 17+ (Debian: apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
	rm -rf build/jvm && mkdir -p build/jvm $(dir $(JAR))
	javac --release 17 -Xlint:all -Xlint:-path -Werror -d build/jvm \
		-cp "$$($(PY) -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars", "*"))')" \
		$(filter %.java,$(JAVA_SRC))
	cp -r jvm/resources/META-INF build/jvm/
	cp connector/spark/options.json build/jvm/io/pymq/spark/  # the option names, shared
	jar cf $@.tmp -C build/jvm . && mv $@.tmp $@

unit: $(VENV)/.installed-test $(JAR) | java
	$(PY) -m pytest

# the unit tests alone (mark `unit`, tests/conftest.py says which tests are): in-process, no
# server processes, no Java; under a minute
test-fast: $(VENV)/.installed-test
	$(PY) -m pytest -m unit -q -n auto

test: lint typecheck unit

# Every benchmark, then one report (benchmarks/run_all.py): JSON and logs in benchmarks/results/,
# the report in docs/benchmarks.md; 28-40 minutes. `make bench QUICK=1`: a smoke run of a few
# minutes (results and report in benchmarks/results/quick/; docs/ keeps the last full run).
bench: $(VENV)/.installed-test $(JAR)
	$(PIP) install --quiet -e '.[bench]'
	$(PY) benchmarks/run_all.py $(if $(filter 1 yes true,$(QUICK)),--quick)

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
	rm -f connector/*/*.so broker/*/*.so $(JAR)
