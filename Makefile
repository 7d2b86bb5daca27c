# Two commands: `make run` (demo on an embedded default) and `make test` (the whole suite).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
PORT ?= 8000
HOST ?= 127.0.0.1
STAMP := $(VENV)/.installed

.PHONY: help install db db-stop setup run test check lint typecheck migrations-check format bench clean

help:
	@echo "make run    set up and start web, worker, scheduler and demo traffic on http://$(HOST):$(PORT)"
	@echo "make test   set up and run the whole suite (lint, types, migrations, tests)"
	@echo "make bench  run the benchmarks under bench/"
	@echo "make db-stop  stop the embedded PostgreSQL server that run and test leave running"

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The embedded PostgreSQL server under var/postgres/, unless DATABASE_URL names a database:
# started once, reused by every later command, stopped by `make db-stop` (or `make clean`).
db: install
ifeq ($(DATABASE_URL)$(DATABASE_URL_FILE),)
	$(PY) -m apps.core.embedded_postgres start
endif

db-stop:
	if [ -x $(PY) ]; then $(PY) -m apps.core.embedded_postgres stop; fi

# Everything `make run` needs before the processes start; safe to repeat.
setup: install db
	DEBUG=true $(PY) manage.py migrate --noinput
	DEBUG=true $(PY) manage.py collectstatic --noinput --verbosity 0
	DEBUG=true $(PY) manage.py demo_setup --site-url http://$(HOST):$(PORT)

run: setup
	@echo ""
	@echo "  Latency Budgets is starting on http://$(HOST):$(PORT)  (Ctrl-C stops everything)"
	@echo ""
	PATH="$(abspath $(BIN)):$$PATH" DEBUG=true HOST=$(HOST) PORT=$(PORT) \
		SITE_URL=http://$(HOST):$(PORT) $(BIN)/honcho start -f Procfile

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy budgets_site apps tests bench

migrations-check: install db
	DEBUG=true $(PY) manage.py makemigrations --check --dry-run

check: lint typecheck migrations-check

# pytest exits 5 when a selection (PYTEST_ARGS="-m ...") collects nothing: not an error.
test: db check
	$(BIN)/pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests for this selection"; rc=0; fi; \
	exit $$rc

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install db
	$(PY) -m bench

clean: db-stop
	rm -rf $(VENV) var/ .pytest_cache .mypy_cache .ruff_cache
