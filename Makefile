# edgewave: `make demo` sets everything up and runs the demo; `make test` sets up and runs the tests.
# The interpreter: Debian's own /usr/bin/python3 where there is one. It is built with
# profile-guided and link-time optimisation, and it is what a Raspberry Pi OS gateway
# runs; a pyenv build without --enable-optimizations (as on our VMs) ran the engine
# 1.05-1.3x slower and the agent at 62-66 % of a core instead of 55-59 % (docs/benchmarks.md,
# "What we measured"). Override: make test PYTHON=python3.11
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench setup system clean FORCE

setup: system $(STAMP)

system:
	@bash scripts/install-system-packages.sh

# A venv made by another interpreter than $(PYTHON) is made again.
$(STAMP): pyproject.toml $(VENV)/.interpreter
	@$(PY) -m pip install -q --upgrade pip
	@# setuptools prints an information box on every editable install (no warning about the
	@# package's configuration, which it accepts silently): filtered by its exact summary.
	@PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

$(VENV)/.interpreter: FORCE
	@want=$$($(PYTHON) -c 'import os, sys; print(os.path.realpath(sys.executable))') || exit 1; \
	 have=$$(cat $@ 2>/dev/null || true); \
	 if [ "$$want" != "$$have" ]; then \
	   if [ -e $(VENV) ]; then echo "re-creating $(VENV) for $$want (was: $${have:-unknown})" >&2; rm -rf $(VENV); fi; \
	   $(PYTHON) -m venv $(VENV) && echo "$$want" > $@; \
	 fi

FORCE:

# The suite in two parts. First, two pytest runs at once: the tests marked paced or realtime
# (they spend their time waiting on real time: a recording at its pace, reconnects, timeouts)
# on PACED_WORKERS workers, in the background, their output shown once they end; everything
# else (the CPU-bound tests) on TEST_WORKERS workers. A file's tests stay on one worker, the
# longest files first (tests/conftest.py's order). Last, the tests marked serial, one at a time.
# MARK narrows each part, e.g. make test MARK='not slow'.
TEST_WORKERS ?= 4
PACED_WORKERS ?= 4
MARK ?= 
marks = -m "$(if $(strip $(MARK)),($(MARK)) and )$(1)"
# The test files that mention a mark: the paced and serial parts collect only those (pytest
# still selects by the mark) instead of importing every test module on every worker.
marked = $(if $(strip $(PYTEST_ARGS)),,$(shell grep -rlE --include='test_*.py' 'mark\.($(1))' tests))
pytest = $(PY) -m pytest -q -p no:cacheprovider
# A part that MARK leaves empty (pytest's exit code 5) is not a failure.
part = { $(pytest) $(1) $(PYTEST_ARGS); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ]; }
parallel = --dist loadfile --no-loadscope-reorder
test: setup
	@log=$$(mktemp); \
	 $(call part,-n $(PACED_WORKERS) $(parallel) $(call marks,(paced or realtime) and not serial) \
	   $(call marked,paced|realtime)) > $$log 2>&1 & paced=$$!; trap 'kill $$paced 2>/dev/null' INT TERM; \
	 $(pytest) -n $(TEST_WORKERS) $(parallel) $(call marks,not paced and not serial and not realtime) $(PYTEST_ARGS); \
	 ok=$$?; wait $$paced; paced=$$?; echo; cat $$log; rm -f $$log; \
	 [ $$ok -eq 0 ] && [ $$paced -eq 0 ] \
	 && $(call part,$(call marks,serial) $(call marked,serial))

bench: setup
	@$(PY) tests/benchmarks/run.py $(BENCH_ARGS)

demo: setup
	@$(PY) scripts/demo.py $(DEMO_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
