# edgewave: `make demo` sets everything up and runs the demo; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench setup system clean

setup: system $(STAMP)

system:
	@bash scripts/install-system-packages.sh

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

test: setup
	@$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

bench: setup
	@$(PY) tests/benchmarks/run.py $(BENCH_ARGS)

demo: setup
	@$(PY) scripts/demo.py $(DEMO_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
