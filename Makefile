# Two entry points for a new user; each installs what it needs first (into .venv).
#   make demo   install xlembed (no extras), then run the offline demo pipeline end to end
#   make test   install xlembed with the `test` extra (task runners, eflomal, fastText, moto,
#               pytest, ruff, ...), then lint and run the test suite
# Each install has its own stamp: `make test` after `make demo` adds the test extra.
# `make install` is the developer's install (the test extra: what `make test` runs on).
#   make test-fast  lint, then everything not marked slow (each under a second on 2 cores; the
#                   whole of it a few minutes); it prints the 10 slowest, so a test that grew slow
#                   gets its `@pytest.mark.slow`
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install install-demo demo test test-fast lint benchmarks gpu-check reliability-report clean

install: $(VENV)/.installed
install-demo: $(VENV)/.installed-demo

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-demo: pyproject.toml constraints.txt | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e .
	touch $@

$(VENV)/.installed: pyproject.toml constraints.txt | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $@

demo: install-demo
	$(BIN)/xlembed run configs/demo.toml

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest

test-fast: lint
	$(BIN)/python -m pytest -m "not slow" -q --durations=10

# Every benchmark's ratios into docs/benchmarks.md (QUICK=1 for small sizes).
benchmarks: install
	$(BIN)/python benchmarks/run_all.py $(if $(QUICK),--quick,)

# On a CUDA machine: the tests that must hold on the GPU and the GPU benchmarks, one table, <= 8 min
# (benchmarks/gpu_check.py). Needs only torch, transformers, numpy, pyarrow, polars, pydantic,
# safetensors, fsspec and pytest: GPU_PYTHON=python3 runs it without this venv.
GPU_PYTHON ?= $(BIN)/python
gpu-check:
	PYTHONPATH=. $(GPU_PYTHON) benchmarks/gpu_check.py

# Regenerate docs/reliability.md (LONG=1: the 20+ kill variant).
reliability-report: install
	$(BIN)/python -m tests.reliability.report $(if $(LONG),--long,)

clean:
	rm -rf $(VENV) artifacts .pytest_cache .hypothesis
