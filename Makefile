# Two entry points for a new user; both install everything first (into .venv).
#   make demo   install, then run the offline demo pipeline end to end
#   make test   install, then run the test suite
#   make test-fast  everything not marked slow (no end-to-end Prefect or subprocess runs)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test test-fast benchmarks gpu-check reliability-report clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $@

demo: install
	$(BIN)/xlembed run configs/demo.toml

test: install
	$(BIN)/python -m pytest

test-fast: install
	$(BIN)/python -m pytest -m "not slow" -q

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
