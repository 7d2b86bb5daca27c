# Two commands: `make run` (demo on an embedded default) and `make test` (the whole suite).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
# `make run PORT=8001`, `make run HOST=0.0.0.0`: where the development server listens;
# SITE_URL, the base of the links in e-mails, follows unless given too.
PORT ?= 8000
HOST ?= 127.0.0.1
SITE_URL ?= http://$(HOST):$(PORT)
STAMP := $(VENV)/.installed

.PHONY: help install db db-stop setup run test check lint typecheck imports migrations-check tables-check format bench clean test-cluster

help:
	@echo "make run    set up and start web, worker, scheduler and demo traffic on $(SITE_URL) (PORT=, HOST= change it)"
	@echo "make test   set up and run the whole suite (lint, types, import layers, migrations, tests)"
	@echo "make bench  run the benchmarks under bench/"
	@echo "make db-stop  stop the embedded PostgreSQL server that test and db leave running"
	@echo "make test-cluster  the ClickHouse span store's tests and the span suites on a local cluster"
	@echo "make cluster-start  start the local ClickHouse cluster under var/clickhouse (cluster-stop stops it)"

# The client library (clients/python) is a package of its own; the demo traffic and the
# tests use it, installed from this checkout.
$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ./clients/python -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The embedded PostgreSQL server under var/postgres/, unless DATABASE_URL names a database:
# started once, reused by every later command, stopped by `make db-stop` (or `make clean`)
# and when `make run` ends.
db: install
ifeq ($(DATABASE_URL)$(DATABASE_URL_FILE),)
	$(PY) -m apps.core.embedded_postgres start
endif

db-stop:
	if [ -x $(PY) ]; then $(PY) -m apps.core.embedded_postgres stop; fi

# The local ClickHouse cluster for the ClickHouse span store, under var/clickhouse/: two
# shards of two replicas and a ZooKeeper, from Debian's packages, on 127.0.0.1 ports from
# 19000 (apps/core/local_clickhouse lists them). Started once and reused, like `make db`;
# `make cluster-stop` (or `make clean`) stops it.
.PHONY: cluster-start cluster-stop
cluster-start: install
	$(PY) -m apps.core.local_clickhouse start

cluster-stop:
	if [ -x $(PY) ]; then $(PY) -m apps.core.local_clickhouse stop; fi

# Everything `make run` needs before the processes start; safe to repeat.
setup: install db
	@echo "Bringing the database schema up to date…"
	DEBUG=true $(PY) manage.py migrate --noinput --verbosity 0
	DEBUG=true $(PY) manage.py collectstatic --noinput --verbosity 0
ifneq ($(SPAN_STORE_URL),)
	DEBUG=true $(PY) manage.py span_store_migrate
endif
	DEBUG=true $(PY) manage.py demo_setup --site-url $(SITE_URL)

# What `make run` logs: the worker's and the scheduler's level, and that of the development
# server's line per request. WARNING leaves out the routine lines (each task received and
# succeeded, several a second, each POST of the demo traffic), never warnings or errors.
WORKER_LOG_LEVEL ?= WARNING
REQUEST_LOG_LEVEL ?= WARNING
RUN_ENV = PATH="$(abspath $(BIN)):$$PATH" DEBUG=true HOST=$(HOST) PORT=$(PORT) \
	SITE_URL=$(SITE_URL) WORKER_LOG_LEVEL=$(WORKER_LOG_LEVEL) \
	REQUEST_LOG_LEVEL=$(REQUEST_LOG_LEVEL)
ifeq ($(DATABASE_URL)$(DATABASE_URL_FILE),)
RUN_DB_STOP = $(PY) -m apps.core.embedded_postgres stop
endif

# Ctrl-C reaches honcho, which stops its processes (in order: see apps/core/ordered_stop.py
# and the Procfile) and returns; then, unlike every other
# command, `make run` stops the embedded PostgreSQL server, so that nothing is left running.
# The shell waits for honcho rather than die with it (the INT trap), and runs the setup
# itself, so that a Ctrl-C during it stops the server too. The banner waits in the
# background until the web server is ready, then prints the address and the credentials
# after the startup lines.
run: install
	@trap ':' INT; \
	trap '[ -z "$$banner" ] || kill $$banner 2>/dev/null; $(RUN_DB_STOP)' EXIT; \
	$(MAKE) --no-print-directory setup || exit; \
	echo ""; \
	echo "  Starting web, OTLP/gRPC, worker, scheduler and demo traffic: the address and the sign-in follow once they are up."; \
	echo ""; \
	$(RUN_ENV) $(PY) manage.py demo_banner --url $(SITE_URL) & banner=$$!; \
	$(RUN_ENV) $(BIN)/honcho start -f Procfile; rc=$$?; \
	exit $$(( rc == 130 ? 0 : rc ))

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy budgets_site apps tests bench
	$(BIN)/mypy --strict clients/python/src

# The apps import one way, down the data flow (the layers in pyproject.toml).
imports: install
	$(BIN)/lint-imports --no-cache

migrations-check: install db
	DEBUG=true $(PY) manage.py makemigrations --check --dry-run

# SQL names tables through their models (``_meta.db_table``), never literally: a rename
# follows, and which app writes which tables stays visible. Migrations are exempt.
tables-check: install
	DEBUG=true REQUEST_LOG_LEVEL=WARNING $(PY) manage.py check_table_names

check: lint typecheck imports migrations-check tables-check

# pytest exits 5 when a selection (PYTEST_ARGS="-m ...") collects nothing: not an error.
test: db check
	$(BIN)/pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests for this selection"; rc=0; fi; \
	exit $$rc

# The ClickHouse span store on a local cluster (2 shards x 2 replicas and a ZooKeeper, from
# Debian's clickhouse-server and zookeeper; see docs/scaling.md): its own tests, then the
# suites that store and read spans run again with spans on the cluster. The cluster is
# stopped afterwards, whatever the outcome.
CLUSTER_SUITES ?= tests/ingest tests/analysis tests/whatif tests/dashboards/test_trace_detail*.py \
	tests/dashboards/test_api_traces*.py tests/dashboards/test_rule_tester*.py \
	tests/dashboards/test_trace_list_filters.py tests/dashboards/test_trace_stage_filters.py
test-cluster: db cluster-start
	url=$$($(PY) -m apps.core.local_clickhouse url); \
	SPAN_STORE_TEST_URL=$$url $(BIN)/pytest -p no:cacheprovider tests/span_store $(PYTEST_ARGS) && \
	SPAN_STORE_TEST_URL=$$url $(BIN)/pytest -p no:cacheprovider --span-store=clickhouse \
		$(CLUSTER_SUITES) $(PYTEST_ARGS); rc=$$?; \
	$(PY) -m apps.core.local_clickhouse stop; exit $$rc

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install db
	$(PY) -m bench

clean: cluster-stop
clean: db-stop
	rm -rf $(VENV) var/ .pytest_cache .mypy_cache .ruff_cache
