# The two commands a newcomer runs: `make run` and `make test`.
# Both set up everything they need (OS packages, the venv, node modules) and are idempotent.
# `make unit` is the inner loop: the venv only (no PostgreSQL, Chromium, node or root).

SHELL := /bin/bash
# Python writes its bytecode, and pytest its rewritten test modules, even where the environment
# says not to: else every test process and server compiles them again (bench/RESULTS.md, "Set-up").
unexport PYTHONDONTWRITEBYTECODE
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
VAR := var
DEV_DB := $(VAR)/normdive.sqlite3
DEV_SECRET := $(VAR)/secret-key
HOST ?= 127.0.0.1
PORT ?= 8000

# Two xdist workers, each given whole test files, the longest first (tests/conftest.py): module
# fixtures are set up once and the run ends on short files (bench/RESULTS.md, "Set-up").
# A crashed worker is not replaced, so the run stops naming the test: pytest-xdist 3.8 can
# deadlock after replacing one in a loadfile run (its issue #1378), and CI would wait in silence.
XDIST := -n 2 --dist loadfile --no-loadscope-reorder --max-worker-restart=0

# The tests `make unit` runs: neither PostgreSQL (--no-postgresql: see tests/conftest.py), nor
# the app's HTTP tests, nor Chromium, nor node, nor the slow ones; property tests on fewer
# examples (the Hypothesis profile "unit", tests/conftest.py).
UNIT_TESTS := --no-postgresql -m "not http and not browser and not node and not slow" \
  --hypothesis-profile=unit

.PHONY: run test pytest lint typecheck unit browser record record-sweep record-lab clean-venv help

help:
	@echo "make run       - set up and serve the lesson at http://$(HOST):$(PORT) (SQLite under $(VAR)/)"
	@echo "make test      - set up and run every test (lint, types, unit, HTTP, browser)"
	@echo "make unit      - the quick tests: no PostgreSQL, HTTP, browser, node or root"
	@echo "make lint      - ruff check, ruff format --check, and tsc over the page's JavaScript"
	@echo "make typecheck - mypy (strict)"
	@echo "make pytest    - every pytest test (PostgreSQL, Chromium and node must be there)"
	@echo "make browser   - the browser tests (Chromium, and PostgreSQL for one journey)"
	@echo "make record    - re-record the ablation (recordings/the-transformer-block.json)"
	@echo "make record-sweep - record the depth sweep beside it (about 41 min on 2 cores)"
	@echo "make record-lab - record the lab grid beside it (docs/lab.md)"

# --- set-up -------------------------------------------------------------------

# uv installs the packages: half of pip's time on a fresh machine (bench/RESULTS.md, "Set-up").
# It comes from PyPI into the venv itself, pinned, by the venv's own pip.
UV_VERSION := 0.13.9

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(BIN)/uv: | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# Re-install only when pyproject.toml changes. Nothing is byte-compiled at install: a module's
# first importer compiles it, so only what is imported is (bench/RESULTS.md, "Set-up").
# uv reads neither pip's configuration nor its find-links, so PIP_FIND_LINKS (on our machines,
# the CPU build of torch) is handed to it as well.
UV_INSTALL := $(BIN)/uv pip install --quiet --python $(BIN)/python \
  $(if $(PIP_FIND_LINKS),--find-links $(PIP_FIND_LINKS))

$(VENV)/.installed-base: pyproject.toml | $(BIN)/uv
	$(UV_INSTALL) -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/uv
	$(UV_INSTALL) -e '.[test]'
	touch $@ $(VENV)/.installed-base

# Ralph, the real LRS the xAPI tests and benchmark send to (scripts/ralph_lrs.py), in a venv of
# its own: its extras pin click and importlib-metadata below what our packages may need.
RALPH_VENV := .venv-ralph
RALPH_REQUIREMENTS := scripts/ralph-requirements.txt

$(RALPH_VENV)/.installed: $(RALPH_REQUIREMENTS) | $(BIN)/uv
	$(PYTHON) -m venv $(RALPH_VENV)
	$(BIN)/uv pip install --quiet --python $(RALPH_VENV)/bin/python --no-deps \
	  -r $(RALPH_REQUIREMENTS)
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $@

# Debian's Chromium drives the browser tests; Node runs the JavaScript twin's tests;
# Debian's PostgreSQL server runs a throwaway cluster (scripts/pg_cluster.py) for the tests
# that run on both databases. Required: without it `make test` stops here, saying why.
.PHONY: os-packages
os-packages:
	@missing=""; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v node >/dev/null || missing="$$missing nodejs npm"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  echo "installing OS packages:$$missing"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; } \
	  || { echo "make: could not install$$missing with apt-get; the tests need them" \
	       "(PostgreSQL: Debian's postgresql package). Install them and run make test again." >&2; \
	       exit 1; }; \
	fi

$(DEV_SECRET):
	mkdir -p $(VAR)
	umask 077 && $(PYTHON) -c 'import secrets; print(secrets.token_hex(32))' > $@

# --- the two commands ------------------------------------------------------------

run: $(VENV)/.installed-base $(DEV_SECRET)
	mkdir -p $(VAR)
	DATABASE_URL=sqlite:///$(DEV_DB) NORMDIVE_SECRET_KEY=$$(cat $(DEV_SECRET)) $(BIN)/normdive db upgrade
	DATABASE_URL=sqlite:///$(DEV_DB) NORMDIVE_SECRET_KEY=$$(cat $(DEV_SECRET)) \
	  NORMDIVE_DEV_PREREQUISITE_DONE=1 NORMDIVE_DEV_LTI_LOOPBACK=1 \
	  $(BIN)/normdive serve --host $(HOST) --port $(PORT)

# mypy runs beside pytest, not before it: its quarter-minute takes a share of the two cores
# while the tests run, instead of a quarter-minute of its own first (bench/RESULTS.md, "Set-up").
test: os-packages $(VENV)/.installed-test $(RALPH_VENV)/.installed node_modules/.installed lint
	$(MAKE) --no-print-directory -j2 typecheck pytest

pytest: $(VENV)/.installed-test $(RALPH_VENV)/.installed
	$(BIN)/python -m pytest $(XDIST)

# --- parts of `make test` ----------------------------------------------------------

# The browser's JavaScript (web/static) is type-checked from its JSDoc by TypeScript's tsc
# (tsconfig.json; pinned in package.json): a second or two.
lint: $(VENV)/.installed-test node_modules/.installed
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	node_modules/.bin/tsc -p tsconfig.json

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

unit: $(VENV)/.installed-test
	$(BIN)/python -m pytest $(XDIST) $(UNIT_TESTS)

browser: os-packages $(VENV)/.installed-test node_modules/.installed
	$(BIN)/python -m pytest $(XDIST) -m browser

# --- authors ---------------------------------------------------------------------

record: $(VENV)/.installed-test
	$(BIN)/normdive record-runs

# The depth sweep beside the recording (about 41 minutes on 2 cores; docs/recording.md).
record-sweep: $(VENV)/.installed-test
	$(BIN)/normdive record-runs --sweep

# The lab grid the live lab is held to (docs/lab.md, "The grid file"), on the CPU.
record-lab: $(VENV)/.installed-test
	$(BIN)/normdive record-runs --lab

clean-venv:
	rm -rf $(VENV) $(RALPH_VENV) node_modules

include mk/i18n.mk
include mk/wasm.mk
