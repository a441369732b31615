# The padding workbench: `make report` (main job), `make test` (every test) and
# `make browser-test` (the report's pages and the explorer in headless Chromium).
# With no conda env or venv active, both create .venv and install the project into it;
# with one active, they install into that one.

SHELL := /bin/bash
.DEFAULT_GOAL := help

ifdef VIRTUAL_ENV
  ENV_PREFIX := $(VIRTUAL_ENV)
else ifdef CONDA_PREFIX
  ENV_PREFIX := $(CONDA_PREFIX)
else
  ENV_PREFIX := $(CURDIR)/.venv
endif
PY := $(ENV_PREFIX)/bin/python
BASE_PYTHON ?= $(shell command -v python3.11 || command -v python3)
# One stamp per environment and extra: reinstall when pyproject.toml changes.  `make report`
# installs the core and the report extra; `make test` (and the other targets) the dev extra,
# which holds the report extra, so it stamps both.
STAMP_ID := $(subst /,_,$(ENV_PREFIX))
STAMP := .make/setup-$(STAMP_ID).stamp
REPORT_STAMP := .make/setup-report-$(STAMP_ID).stamp
DATA ?= data/case_lengths.csv
REPORT_DIR ?= reports
# Jupyter: use platformdirs paths (silences its migration DeprecationWarning, which
# pytest's filterwarnings=error would turn into a failure).
export JUPYTER_PLATFORM_DIRS := 1
export MPLBACKEND := Agg

NOTEBOOKS := $(sort $(wildcard notebooks/[0-9]*.ipynb))
# Volatile notebook metadata (timestamps, versions) is stripped; outputs and counts are kept.
STRIP := --keep-output --keep-count --extra-keys "cell.metadata.execution metadata.language_info.version"

.PHONY: help setup setup-report report test test-fast browser-deps browser-test lint ruff benchmarks notebooks data clean

help:  ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

setup: $(STAMP)  ## Create .venv (unless an env is active) and install the project with its dev extra (every test)
setup-report: $(REPORT_STAMP)  ## The same with the report extra only (what `make report` needs)

# setuptools tells every editable install of a flat layout, in a 10-line block, that a folder
# named like the package may shadow it: here that folder is the package itself, so the
# warning filter drops that notice (and only it: the filter matches its first words).
#
# Python writes bytecode here (PYTHONDONTWRITEBYTECODE, set on this project's machines, is
# cleared for everything make runs): each module is compiled once, by the first process that
# imports it, and the suite's many processes (workers, kernels, report runs) load it after.
# The installs write none: byte-compiling every installed file took pip ~30 of the ~50 s of a
# fresh install, on one core; compileall, on every core, 44 s of CPU for 10,711 files; the
# install and `make test` import 5,923 of them, which compile in 12.7 s of CPU (one process,
# measured on the files a fresh clone's `make test` had written).
export PYTHONDONTWRITEBYTECODE :=

define make_venv
	@if [ ! -x "$(PY)" ]; then \
	  echo "creating $(ENV_PREFIX) with $(BASE_PYTHON)"; \
	  "$(BASE_PYTHON)" -m venv "$(ENV_PREFIX)"; \
	fi
endef
# .ci/install: uv, given pip's configuration (its indexes, find-links and constraints), else
# pip as before (quiet, no bytecode).  pip's dev install took about a minute here, uv's 6.5 s.
PIP_INSTALL = "$(PY)" .ci/install -e

# The installs compile the optimiser's kernels into numba's cache on disk beside the install of
# the extras (python -m analysis.optimize._ahead, in two processes, once the core is in), so that
# the suite's workers, the report and the notebooks' kernels load them instead of each compiling
# them at once.  uv installs the extras in seconds, so the compile is the install's longest part;
# it runs at LLVM's -O1 (NUMBA_OPT=1, for these processes only): 12-13 % less CPU than numba's
# -O3 (the dev install's two processes 45.7 s and 57.1 s against 52.6 s and 63.1 s, from an empty
# cache, and again 47.3 s and 55.9 s against 54.6 s and 66.7 s), for kernels that run as fast
# (K = 6 at batch size 8 0.089 s either way; seven rules, two frontiers, a floor, the greedy rule
# and the grid within the timings' noise; the sweep 3-4 % slower in both rounds, 0.18 s) and give
# the same floats (benchmarks/plans_snapshot.py --bits identical: without fast-math LLVM may not
# reorder them).  -O0 is no option: numba cannot cache some of the kernels it compiles there.  A
# kernel compiled later, on a first call, takes numba's default.  benchmarks/bench_ahead.py
# measures both levels.  The two processes share the cache as it fills, and the order of their
# calls decides how many kernels both compile (analysis/optimize/_ahead.py's _parts): 52.8-59.8 s
# of wall against 57.6-63.7 s in the order before, taking turns (bench_ahead.py --schedule).
AHEAD = NUMBA_OPT=1 "$(PY)" -m analysis.optimize._ahead
#
# A fresh clone's `make test` has taken from 3 min 55.3 s to 6 min 0.6 s on these 2 shared
# cores, much of the spread from day to day rather than from commit to commit (pytest alone
# 159-252 s, `make setup` 78 s to 2 min 7 s): 4 min 50.5 s and 4 min 33.0 s at 75b5048 (pytest
# 207.7 s and 199.5 s), 4 min 41.6 s at 304205a (pytest 203.5 s) and 5 min 7.3 s at 02291e4
# (pytest 213.8 s; 526 s of user time against 486 s), within two hours, and a fresh clone's
# `.ci/run` at f19e1ef 6 min 23.5 s (pytest 209.2 s); 4 min 32.3 s at f75b0bc (pytest
# 194.4 s) and 4 min 36.5 s at 370be00 (pytest 197.9 s), 5 min 11.8 s minutes before at
# a7365c3 (pytest
# 225.4 s; one test failed there), and inside a fresh clone's `.ci/run` at 370be00 (5 min
# 56.6 s in all) pytest 200.0 s; 5 min 16.5 s and 5 min 37.4 s at 3b184ef and 722466e
# (pytest 237.8 s and 239.0 s, the install 79 s and 92 s), and inside a fresh clone's
# `.ci/run` at f1f495a about 4 min 38 s (pytest 194.2 s; the whole run 6 min 8.8 s), within
# the hour; 6 min 0.6 s at 86ad6bb; 4 min 40.8 s and 5 min 39.4 s an hour apart at 79d34c1
# and 00d1ab8 (pytest 201.7 s and 251.8 s; the same work took 484 s and 595 s of user time);
# 3 min 57.6 s, 3 min 59.6 s and 4 min 7.0 s in three runs on one day (the install 73-80 s,
# 45 s without the compile, when pytest took 222 s instead of 159-163 s); 5 min 29.9 s and 5
# min 16.9 s at 5c12e6f and 21eb708, minutes apart, on a slow day; 4 min 48.0 s at 074184c;
# 5 min 13.4 s with pip and 5 min 8.4 s with uv, an afternoon's pair; 4 min 36.1 s at e6e8231
# (pytest 197.8 s, 475 s of user time), then 4 min 11.0 s and 4 min 49.6 s at e68ee9e (pytest
# 177.6 s and 216.2 s; 435 s and 502 s of user time), within two hours; 4 min 10.8 s at dac4f4d
# (pytest 183.6 s, 434 s of user time), then 4 min 39.5 s and 3 min 55.3 s at d2c8153 (pytest
# 197.0 s and 171.5 s; 483 s and 407 s of user time) and a fresh clone's `.ci/run` 5 min
# 19.6 s (pytest 176.0 s), within 70 minutes; 3 min 58.2 s at 1aaa7f1 (pytest 177.2 s, 413 s of
# user time); 4 min 7.2 s and 3 min 57.6 s at a036e69 (pytest 178.3 s and 176.6 s; 428 s and
# 413 s of user time), 20 minutes apart, and a fresh clone's `.ci/run` between them 5 min 31.9 s
# (pytest 194.1 s); 4 min 30.7 s at c5a3859 (pytest 198.9 s, 462 s of user time) and a fresh
# clone's `.ci/run` after it 5 min 59.5 s (pytest 204.6 s), on a day whose benchmarks ran 10-20 %
# slower than the day before's, and 25 minutes later 3 min 53.3 s at 2a84a78 (pytest 172.4 s,
# 402 s of user time); 4 min 28.3 s and 3 min 58.1 s at 768f1a9 (pytest 194.5 s and 175.6 s;
# 462 s and 410 s of user time), 6 minutes apart.
# A failed compile fails the install with its log.
$(STAMP): pyproject.toml
	$(make_venv)
	$(PIP_INSTALL) .
	@mkdir -p .make
	$(AHEAD) 1,0,2 > .make/ahead0.log 2>&1 & ahead0=$$!; \
	$(AHEAD) 3 > .make/ahead1.log 2>&1 & ahead1=$$!; \
	$(PIP_INSTALL) '.[dev]'; status=$$?; \
	wait $$ahead0 || { cat .make/ahead0.log; exit 1; }; \
	wait $$ahead1 || { cat .make/ahead1.log; exit 1; }; exit $$status
	@touch $(STAMP) $(REPORT_STAMP)

# The report's install compiles, beside the install of its extra, the kernels the report's own
# process would otherwise compile, on one core, before its first notebook (`_ahead 0,1` and `2`:
# batch size 8's exact DP and greedy descent; a floor, the candidate grid, the frontier): the
# report alone took 72.6 s with an empty cache, 28.9 s with it filled, and a fresh clone's `make
# report` 1 min 43.8 s before, 1 min 32.6 s and 1 min 36.7 s with it.  In two processes (with
# pip, which then took the second core, 1 min 32.4 s; uv installs in seconds): 91.4 s and 89.8 s
# against 101.0 s and 97.3 s in one, in fresh clones, taking turns; at -O1 (AHEAD, above) 81.5 s
# and 84.7 s against 92.0 s and 88.8 s at -O3, and `make setup` 81.8 s and 74.9 s against 80.7 s
# and 83.4 s, taking turns again.
$(REPORT_STAMP): pyproject.toml
	$(make_venv)
	$(PIP_INSTALL) .
	@mkdir -p .make
	$(AHEAD) 0,1 > .make/ahead0.log 2>&1 & ahead0=$$!; \
	$(AHEAD) 2 > .make/ahead1.log 2>&1 & ahead1=$$!; \
	$(PIP_INSTALL) '.[report]'; status=$$?; \
	wait $$ahead0 || { cat .make/ahead0.log; exit 1; }; \
	wait $$ahead1 || { cat .make/ahead1.log; exit 1; }; exit $$status
	@touch $(REPORT_STAMP)

report: setup-report  ## Run every notebook on the bundled data into reports/ (executed copies, HTML, figures)
	"$(PY)" -m analysis report "$(DATA)" --out "$(REPORT_DIR)"

# ruff first (a second); then mypy runs beside pytest, which spreads the tests over every core
# (pytest-xdist; pyproject's --dist=loadscope keeps a module or notebook on one worker).  mypy's
# output follows pytest's, and either one failing fails the target.  pytest keeps the test
# modules it rewrites (its assertion messages) as bytecode in their __pycache__ (bytecode is
# written, above): from the second run on, `pytest --collect-only` takes 8.3 s, not 13.1 s.
# The workers already take every core, so the OpenMP and BLAS pools inside each (torch's,
# OpenBLAS's) get one thread: their threads spin between calls on the core the other worker
# needs.  The suite's user CPU 297 s and 310 s against 333 s and 328 s (wall 174 s and 182 s
# against 195 s and 190 s), taking turns on a loaded afternoon.  numba's threads are its own
# (NUMBA_NUM_THREADS), and the tests of its threaded code set them.
test: setup ruff  ## Run every test: ruff, mypy --strict, unit tests, doctests, nbval over notebooks/
	@mkdir -p .make; \
	echo '"$(PY)" -m mypy > .make/mypy.log &   (shown after pytest)'; \
	"$(PY)" -m mypy > .make/mypy.log 2>&1 & mypy_pid=$$!; \
	echo 'OMP_NUM_THREADS=1 "$(PY)" -m pytest -n auto'; \
	OMP_NUM_THREADS=1 "$(PY)" -m pytest -n auto; pytest_status=$$?; \
	wait $$mypy_pid; mypy_status=$$?; \
	echo '"$(PY)" -m mypy (ran beside pytest):'; cat .make/mypy.log; \
	[ $$pytest_status -eq 0 ] && [ $$mypy_status -eq 0 ]

# The fast unit core: the tests under the engine's folders of tests/ (marked `unit` by
# tests/conftest.py), no notebook, no report, no face.
test-fast: setup  ## The fast unit core only (pytest -m unit: the engine's tests, seconds)
	OMP_NUM_THREADS=1 "$(PY)" -m pytest -m unit -n auto tests

# Debian's chromium and chromium-driver (apt, as root or through sudo) when either is missing:
# selenium is pointed at /usr/bin/chromedriver, so selenium-manager never downloads a browser.
# `-m browser` selects tests/browser (pyproject's addopts deselect it from `make test`); a
# missing browser fails those tests, never skips them.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
BROWSER_TEST_ARGS ?=
browser-deps:  ## Install Debian's chromium and chromium-driver where either is missing (apt)
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
	  echo "installing Debian's chromium and chromium-driver"; \
	  $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver || exit 1; \
	fi

browser-test: setup browser-deps  ## Render the report's pages and drive the explorer in JupyterLab, in headless Chromium
	"$(PY)" -m pytest -m browser -s tests/browser $(BROWSER_TEST_ARGS)

lint: ruff  ## ruff (lint and format check) and mypy --strict on the package
	"$(PY)" -m mypy

ruff: setup  ## ruff only: lint and format check
	"$(PY)" -m ruff check analysis tests benchmarks notebooks .ci/install
	"$(PY)" -m ruff format --check analysis tests benchmarks notebooks .ci/install

notebooks: setup  ## Re-execute the stored notebooks in place (outputs kept for nbval) and strip volatile metadata
	cd notebooks && for nb in $(notdir $(NOTEBOOKS)); do "$(PY)" -m jupyter nbconvert --to notebook --execute --inplace "$$nb" || exit 1; done
	"$(PY)" -m nbstripout $(STRIP) $(NOTEBOOKS)
	@# widget views carry a random model id per run (the model itself is not stored): fix it
	sed -i -E 's/"model_id": "[0-9a-f]{32}"/"model_id": "stored-without-widget-state"/' $(NOTEBOOKS)

benchmarks: setup  ## Print the benchmark figures (timings are not tests)
	@for script in benchmarks/bench_*.py; do echo "== $$script"; "$(PY)" "$$script" || exit 1; done

data: setup  ## Regenerate the bundled synthetic data/case_lengths.csv (deterministic)
	"$(PY)" -c "from analysis import save_histogram; from analysis.case.synthetic import case_like_histogram; print(save_histogram(case_like_histogram(), '$(DATA)'))"

clean:  ## Remove the venv, the stamps and generated reports
	rm -rf .venv .make reports .pytest_cache .hypothesis
