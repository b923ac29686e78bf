# Each target sets itself up: a fresh clone needs nothing but python3 (>= 3.10).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_BASE := $(VENV)/.installed-base
STAMP_TEST := $(VENV)/.installed-test

.PHONY: demo test test-slow test-programs bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP_BASE): pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip >/dev/null 2>&1 || true
	$(PY) -m pip install -q -e ".[train,bf16,fast,plot]"
	touch $@

# The tests and benchmarks also get Intel MKL (the `mkl` extra: ember's GEMMs on Intel CPUs), so `make bench` measures
# what a user with the recommended extras runs; demo's fresh-clone install stays without its 221 MB download.
$(STAMP_TEST): pyproject.toml $(STAMP_BASE)
	$(PY) -m pip install -q -e ".[test,train,bf16,fast,plot,mkl]"
	touch $@

demo: $(STAMP_BASE)
	$(PY) -m ember.cli demo

# Two pytest workers by default (pytest-xdist, a test extra; ~6 instead of ~9-10 minutes on 2 cores; whole files per
# worker, the costliest first: tests/worker_schedule.py). TEST_WORKERS=0 runs one process: docs/testing.md, "Two workers".
TEST_WORKERS ?= 2
test: $(STAMP_TEST)
	$(PY) -m pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder,)

test-slow: $(STAMP_TEST)
	$(PY) -m pytest -m slow

# Real PyTorch programs through `ember run` vs PyTorch (skips cleanly where they were not brought in):
# PROGRAMS_DIR=/tmp/ember-programs make test-programs   (see docs/pytorch-compat.md)
test-programs: $(STAMP_TEST)
	$(PY) tools/run_programs.py $(ARGS)

bench: $(STAMP_TEST)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info
