# The two commands of the README: `make run` and `make test`.
# Each creates .venv and installs what it needs, idempotently.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check

.PHONY: run test lint typecheck unit bench prereq java clean

prereq:
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; pymq needs Python 3.10+" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
		|| { echo "error: pymq needs Python 3.10+, found $$($(PYTHON) --version 2>&1)" >&2; exit 1; }
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null \
		|| { echo "error: $(PYTHON) lacks venv/ensurepip (Debian: apt-get install python3-venv)" >&2; exit 1; }

$(PY): | prereq
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# the C sources: an edit rebuilds the compiled module (pip install -e builds it in place)
NATIVE := $(wildcard connector/*/*.c)

$(VENV)/.installed: pyproject.toml $(NATIVE) | $(PY)
	$(PIP) install --quiet -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml $(NATIVE) | $(PY)
	$(PIP) install --quiet -e '.[test]'
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

unit: $(VENV)/.installed-test | java
	$(PY) -m pytest

test: lint typecheck unit

# Every benchmark, then one report (benchmarks/run_all.py): JSON and logs in benchmarks/results/,
# the report in docs/benchmarks.md; 20-30 minutes. `make bench QUICK=1`: a smoke run of a few
# minutes (results and report in benchmarks/results/quick/; docs/ keeps the last full run).
bench: $(VENV)/.installed-test
	$(PIP) install --quiet -e '.[bench]'
	$(PY) benchmarks/run_all.py $(if $(filter 1 yes true,$(QUICK)),--quick)

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
	rm -f connector/*/*.so
