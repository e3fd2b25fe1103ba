# `make run` and `make test` are the two entry points the README documents.
SHELL := /bin/bash
.DEFAULT_GOAL := test

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Extra pytest arguments, e.g. make test PYTEST_ARGS='-k faust -x'
PYTEST_ARGS ?=
# pytest-xdist workers. More than the cores: many tests mostly wait (on the broker, on agents and
# CLIs in subprocesses, on sleeps that prove nothing happens). worksteal evens out the long tests.
# PYTEST_WORKERS=0 runs the suite in one process.
PYTEST_WORKERS ?= 4
PYTEST_XDIST := $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist worksteal)
# If set, pytest's own exit status is written here (make itself only says 0/2).
PYTEST_STATUS_FILE ?=

.PHONY: run test venv compile broker-start broker-stop

# Reinstall only when the project metadata changed since the last install.
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $@

venv: $(VENV)/.installed

# domain/ compiled in place by mypyc, rebuilt when a source changes (deploy/compile.py). Without
# a C compiler the engine runs from its sources: same decisions, slower. CI requires the build.
# devtools/compile_cache.py keeps builds between clones: a fresh clone of sources compiled before
# restores that build instead of compiling again.
DOMAIN_SOURCES := $(wildcard domain/*.py domain/*/*.py)
domain/.compiled.json: $(VENV)/.installed $(DOMAIN_SOURCES) deploy/compile.py devtools/compile_cache.py
	@$(PY) -m devtools.compile_cache || { $(PY) deploy/compile.py --clean; \
	  echo "make: compiling domain/ failed; quotaflow runs it from its sources" >&2; \
	  test "$${QUOTAFLOW_REQUIRE_COMPILED:-}" != 1; }

compile: domain/.compiled.json

run: $(VENV)/.installed compile
	$(VENV)/bin/quotaflow demo

# The broker is owned by this recipe's shell: the EXIT trap stops it whether
# pytest passes, fails or is interrupted, and --owner-pid makes a watchdog stop
# it even if the shell itself is killed. An externally provided
# QUOTAFLOW_KAFKA_BOOTSTRAP is used as is.
test: $(VENV)/.installed compile
	@set -uo pipefail; \
	state="$$(mktemp -d)/broker.json"; \
	trap '$(PY) -m devtools.local_broker stop --state "$$state" >&2; rm -rf "$$(dirname "$$state")"' EXIT; \
	trap 'exit 130' INT; trap 'exit 143' TERM; \
	if [ -z "$${QUOTAFLOW_KAFKA_BOOTSTRAP:-}" ] && command -v java >/dev/null && command -v mvn >/dev/null; then \
	  if bootstrap="$$($(PY) -m devtools.local_broker start --state "$$state" --owner-pid $$$$)"; then \
	    export QUOTAFLOW_KAFKA_BOOTSTRAP="$$bootstrap"; \
	  else \
	    echo "make test: local broker did not start; pytest picks a fallback" >&2; \
	  fi; \
	fi; \
	$(PY) -m devtools.browser ensure >/dev/null || echo "make test: no Chromium; browser tests are skipped (CI requires them)" >&2; \
	$(PY) -m pytest $(PYTEST_XDIST) $(PYTEST_ARGS); status=$$?; \
	if [ -n "$(PYTEST_STATUS_FILE)" ]; then echo "$$status" > "$(PYTEST_STATUS_FILE)"; fi; \
	exit $$status

# For benchmarks and manual poking; pair every start with a stop.
broker-start: $(VENV)/.installed
	@$(PY) -m devtools.local_broker start

broker-stop:
	@$(PY) -m devtools.local_broker stop
