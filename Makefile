# Two commands do everything: `make repro` (install + default pipeline) and `make test`.
# Both install into .venv on first use and are no-ops for the install step afterwards.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Stage commands call `python`/`dvc`; make sure they resolve to the project environment.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: install lock repro push pull grid test test-unit test-slow test-cuda ui exps learning-check bench clean-scratch

install: $(STAMP)

# Packages' test folders, packages nothing here imports (pyopengl is imported only by MuJoCo's
# off-screen rendering, a few modules), Ray's libraries beyond its core, and the 3.12-only file.
COMPILE_SKIP := /tests?/|site-packages/(OpenGL|sklearn|networkx|pip|setuptools)/|site-packages/ray/(rllib|data|train|tune|llm|serve|air)/|torch/testing/_internal/py312_intrinsics\.py

$(STAMP): requirements.txt $(wildcard requirements/*.txt) pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	# uv installs the same packages as pip (every version fixed by requirements/lock.txt) in about
	# half of pip's time: it fetches and unpacks in parallel. uv does not read pip's settings; it is
	# given pip's find-links folders (from pip's config files or PIP_FIND_LINKS: where a machine
	# keeps torch's CPU wheel) and trusts the system's certificates, as pip's cert setting does
	# where a proxy re-signs HTTPS (uv's own list would refuse it); a slow link gets pip's 3 minutes.
	$(PY) -m pip install --disable-pip-version-check -q $$(grep '^uv==' requirements/lock.txt)
	UV_HTTP_TIMEOUT=$${UV_HTTP_TIMEOUT:-180} $(VENV)/bin/uv pip install -q --system-certs \
	  --python $(PY) -r requirements.txt -c requirements/lock.txt \
	  $$($(PY) -m pip config list | sed -n "s/^[^=]*find-links='\(.*\)'$$/\1/p" | tr ' ' '\n' | sort -u | sed 's/^/--find-links /')
	# uv does not byte-compile; compileall does, on every core. Ahead of time,
	# because a process run with PYTHONDONTWRITEBYTECODE=1 (as on CI) never caches what it
	# compiles. Left out: what no process of the project imports (COMPILE_SKIP, about half the
	# compile time: docs/speed.md#where-the-test-suites-time-goes), and a file of Python 3.12
	# syntax, which 3.11 cannot compile. A module left out still runs, compiled in memory when imported.
	$(PY) -m compileall -q -j 0 -x '$(COMPILE_SKIP)' \
	  "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
	$(PY) -m pip install --disable-pip-version-check -q --no-build-isolation --no-deps -e .
	touch $(STAMP)

# Fix every installed version anew (after editing a pin): pip resolves requirements.txt in a
# scratch environment, and what it installed becomes requirements/lock.txt.
lock:
	rm -rf .lock-venv && python3 -m venv .lock-venv
	.lock-venv/bin/pip install --disable-pip-version-check -q -r requirements.txt uv
	{ printf '%s\n' "# Every package make install puts in .venv, at the version pip resolves requirements.txt to" \
	    "# (a constraints file for uv; made by make lock, the torch wheel's local label dropped)."; \
	  .lock-venv/bin/pip freeze --all --exclude pip | sed 's/+cpu$$//'; } > requirements/lock.txt.new
	mv requirements/lock.txt.new requirements/lock.txt && rm -rf .lock-venv

# The validate stage runs first inside `dvc repro` too; running it before DVC reads params.yaml
# also turns a value that breaks dvc.yaml's templating (say `seeds: 5`) into one clear line.
# Training stages go out on every core (the grid, below); where its workers cannot run what is
# checked out (uncommitted params or code, no git), `dvc repro` runs everything here instead.
# The stages DVC restored instead of running log nothing; ptsl.ops.restored puts them in the
# MLflow store (docs/reproducibility.md#restored-runs-in-mlflow).
repro: install
	python pipeline/validate.py
	python -m ptsl.ops.grid --else-here
	python -m ptsl.ops.restored
	python -m ptsl.report.readme

# Trained agents, curves and evaluations to the DVC remote (by default ../ptsl-dvc-remote, a
# folder beside the checkout; .dvc/config) and back: `make pull` in a fresh clone, then
# `dvc repro` re-trains nothing (docs/reproducibility.md); what it pulled shows in MLflow.
push: install
	dvc push

pull: install
	dvc pull
	python -m ptsl.ops.restored --all --from remote

# Every stale training stage in parallel on Ray, then `dvc repro` (docs/scaling.md).
# Flags pass through GRID_ARGS, e.g. make grid GRID_ARGS="--workers 8 --cpus-per-run 2".
grid: install
	python -m ptsl.ops.grid $(GRID_ARGS)

# A study (docs/studies.md): `make study-mt10-cpu` trains the stale stages of studies/mt10-cpu/
# on every core (the grid, one run per core), then evaluates and aggregates into its reports/.
# GRID_ARGS as for `make grid`.
study-%: install
	python -m ptsl.ops.grid --study $* $(GRID_ARGS)
	python -m ptsl.ops.restored --study $*
	python -m ptsl.report.readme

# Switch the active budget (small | paper) in params.yaml; then `make repro` or `dvc exp run`.
budget-%: install
	python -m ptsl.ops.budget $*

# Switch the active protocol (reference | metaworld-plus) in params.yaml.
protocol-%: install
	python -m ptsl.ops.protocol $*

# Everything CI checks, on every core (pytest-xdist; its time:
# docs/speed.md#where-the-test-suites-time-goes). Under xdist a file's tests
# stay on one worker (--dist loadfile), so the project a module fixture builds (a DVC pipeline
# run) is built once; files go out in the order tests/conftest.py gives (slowest first), since
# xdist's own reorder (most tests first) would leave the long pipelines for the end.
XDIST := -n auto --dist loadfile --no-loadscope-reorder

test: install
	pytest -q $(XDIST) tests

test-unit: install
	pytest -q $(XDIST) tests/unit

# The GPU path on a GPU (skipped on CPU-only machines; also part of `make test` there). Plain
# pytest, no xdist needed: `pytest -m cuda tests/unit/test_cuda.py` does the same.
test-cuda: install
	pytest -q -m cuda tests/unit/test_cuda.py

# Long checks outside CI (for example the learning check on reach-v3).
test-slow: install
	pytest -q -m slow tests

learning-check: install
	python -m ptsl.tools.learning_check

# Speed benchmark (prints a table, writes reports/bench/<device>.json); installs the optional
# Stable-Baselines3 comparison first. PTSL_DEVICE=cpu|cuda picks the device (default: auto).
bench: install
	$(PY) -m pip install --disable-pip-version-check -q stable-baselines3==2.9.2
	python -m ptsl.tools.bench

# Logs the runs whose outputs DVC restored (every pipeline's: outputs that `dvc pull` or
# `dvc checkout` brought), prints the links to the runs lists in the saved "Compare runs" view,
# then serves the UI (mlflow ui, MLflow's usage reporting off) on UI_PORT and, once it answers,
# prints the link that opens the newest training runs (docs/views.md#mlflow-ui).
UI_PORT ?= 5000
ui: install
	python -m ptsl.ops.restored --all
	python -m ptsl.ops.mlflow_ui --serve --port $(UI_PORT)

# DVC experiments side by side: a column per experiment, a line per changed param and per table
# row (python -m ptsl.ops.exps; EXPS_ARGS="--only-changed" keeps the rows an experiment moved).
exps: install
	python -m ptsl.ops.exps $(EXPS_ARGS)

clean-scratch:
	rm -rf .scratch
