# rewardbox developer entry points.
#   make run    HOST=0.0.0.0 PORT=8000     serve (after host set-up)
#   make test   PYTEST_ARGS='-k foo -x'    test suite (installs redis-server too)
#   make test-fast                         the pure unit tests (tests/test_*_units.py): no sandbox, Docker or Redis
#   make docs                             the docs site into site/ (mkdocs build --strict: warnings fail)
#   make lint | image | bench | setup | venv | venv-server
#   make dist                              the wheels and sdists users install (client/ and the root), in dist/
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# torch before the trainer extra: torch==2.13.0 is the CPU wheel these machines hold on disk, where the extra's
# open range would fetch a multi-GB CUDA build. Elsewhere: make setup TORCH='torch'.
TORCH ?= torch==2.13.0

.PHONY: venv venv-server host setup run test test-fast lint image bench dist docs

# Two installs share .venv, each with its own stamp, redone only when pyproject.toml is newer than it:
#   .stamp-server  what serving needs (the client and the server, both editable), for `make run`
#   .stamp-all     everything the tests use (server, trainer, frameworks, dev tools), for `make setup`/`make test`
# The full install covers the server's and renews its stamp, so `make run` after `make test` installs nothing.
STAMPS := $(VENV)/.stamp-server $(VENV)/.stamp-all
NEW_VENV = @[ -x $(PY) ] || { echo "creating $(VENV)"; $(PYTHON) -m venv $(VENV); }

venv:
	@[ -x $(PY) ] || rm -f $(STAMPS)
	@$(MAKE) -s --no-print-directory $(VENV)/.stamp-all

venv-server:
	@[ -x $(PY) ] || rm -f $(STAMPS)
	@$(MAKE) -s --no-print-directory $(VENV)/.stamp-server

$(VENV)/.stamp-server: pyproject.toml client/pyproject.toml
	$(NEW_VENV)
	$(VENV)/bin/pip install -q -e ./client -e .
	@touch $@

$(VENV)/.stamp-all: pyproject.toml client/pyproject.toml
	$(NEW_VENV)
	$(VENV)/bin/pip install -q '$(TORCH)'
	$(VENV)/bin/pip install -q -e ./client -e '.[dev,trainer,frameworks,docs]'
	$(VENV)/bin/pip install -q --no-deps verl==0.9.1 openrlhf==0.11.2  # see the frameworks extra
	$(VENV)/bin/pip install -q --no-deps swebench==5.0.2  # SWE-bench's own grading, see the frameworks extra
	@touch $(STAMPS)

# Host packages + Docker engine + sandbox image first: on a fresh Debian box it also installs python3-venv,
# which the venv needs. `make run` installs only what serving needs; `make setup` (and `make test`) everything.
host:
	@bash scripts/ensure_host.sh

setup: host
	@$(MAKE) --no-print-directory venv

run: host
	@$(MAKE) --no-print-directory venv-server
	$(VENV)/bin/rewardbox serve --host $${HOST:-127.0.0.1} --port $${PORT:-8000}

test: export REWARDBOX_NEED_REDIS ?= 1
test: export REWARDBOX_NEED_BROWSER ?= 1
test: export REWARDBOX_NEED_FRAMEWORKS ?= 1
test: setup
	$(PY) -m pytest -q $(PYTEST_ARGS)

# Only the venv, not setup: these tests run no sandbox, so they can fail fast before the image is built.
test-fast: venv
	$(PY) -m pytest -q $(PYTEST_ARGS) $(wildcard tests/test_*_units.py)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

image:
	@bash sandboxes/image/build.sh

bench: setup
	@shopt -s nullglob; scripts=(bench/*.py bench/*.sh); \
	if [ $${#scripts[@]} -eq 0 ]; then echo "no benchmarks in bench/ yet"; exit 0; fi; \
	for s in "$${scripts[@]}"; do \
		echo "== $$s"; \
		case "$$s" in *.py) $(PY) "$$s" $(BENCH_ARGS) ;; *) bash "$$s" $(BENCH_ARGS) ;; esac || exit $$?; \
	done

# The two distributions users install (docs/packaging.md): the client `rewardbox` from client/, the server
# `rewardbox-server` from the root; wheel and sdist of each. tests/test_wheel.py installs and runs them.
dist: venv
	rm -rf dist
	$(PY) -m build -o dist client
	$(PY) -m build -o dist .

docs: venv
	$(VENV)/bin/mkdocs build --strict
