# rewardbox developer entry points.
#   make run    HOST=0.0.0.0 PORT=8000     serve (after host set-up)
#   make test   PYTEST_ARGS='-k foo -x'    test suite (installs redis-server too)
#   make test-fast                         the pure unit tests (tests/test_*_units.py): no sandbox, Docker or Redis
#   make lint | image | bench | setup | venv
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# torch before the trainer extra: torch==2.13.0 is the CPU wheel these machines hold on disk, where the extra's
# open range would fetch a multi-GB CUDA build. Elsewhere: make setup TORCH='torch'.
TORCH ?= torch==2.13.0

.PHONY: venv setup run test test-fast lint image bench

# (Re)install the package into .venv only when pyproject.toml is newer than the stamp.
venv:
	@[ -x $(PY) ] || rm -f $(VENV)/.stamp
	@$(MAKE) -s --no-print-directory $(VENV)/.stamp

$(VENV)/.stamp: pyproject.toml
	@[ -x $(PY) ] || { echo "creating $(VENV)"; $(PYTHON) -m venv $(VENV); }
	$(VENV)/bin/pip install -q '$(TORCH)'
	$(VENV)/bin/pip install -q -e '.[dev,trainer,frameworks]'
	$(VENV)/bin/pip install -q --no-deps verl==0.9.1 openrlhf==0.11.2  # see the frameworks extra
	@touch $@

# Host packages + Docker engine + sandbox image first: on a fresh Debian box it also installs python3-venv,
# which `make venv` needs.
setup:
	@bash scripts/ensure_host.sh
	@$(MAKE) --no-print-directory venv

run: setup
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
