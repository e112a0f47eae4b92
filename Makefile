# The two commands of the README. Both create .venv (idempotent) before doing their job.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# CPU build of torch; a bare `torch` requirement would pull a multi-GB CUDA build.
TORCH  ?= torch==2.13.0
# On a GPU machine: the index of a CUDA build of torch, e.g.
#   make venv TORCH_INDEX=https://download.pytorch.org/whl/cu128
TORCH_INDEX ?=

.PHONY: demo test test-slow test-all test-flower venv lint bench nightly report standard coverage-standard mutation mutation-named clean

$(STAMP): pyproject.toml
	@# Fashion-MNIST (IDX files) from Debian, where apt is available; skipped elsewhere
	-@if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 || \
		(apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1) || \
		echo "note: could not install dataset-fashion-mnist; Fashion-MNIST runs need --data-dir"; fi
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH)" $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)")
	$(PY) -m pip install --quiet -e ".[learning,sims,flower,dev,mutation]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/fedmarket market --out results/market
	$(VENV)/bin/fedmarket sweep --preset demo --out results/demo --recompute-stale --report

# Test tiers (pyproject.toml's markers). `make test`: ruff, then every test not marked slow, the
# parallel-safe ones under pytest-xdist (WORKERS=auto: one per core), then the `serial` ones
# alone. `make test-slow`: the slow tier (long searches, Flower deployments with --flower-full,
# signals and kill -9, end-to-end CLI runs). `make test-all`: both (what CI runs).
# Exit code 5 ("no tests collected") is not a failure of a tier.
WORKERS   ?= auto
DURATIONS ?= 15
PYTEST    := HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(PY) -m pytest -q --durations=$(DURATIONS)
NONE_OK   := || [ $$? -eq 5 ]

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PYTEST) -m "not slow and not serial" -n $(WORKERS) $(NONE_OK)
	$(PYTEST) -m "serial and not slow" -p no:xdist $(NONE_OK)

test-slow: $(STAMP)
	$(PYTEST) -m "slow and not serial" --flower-full -n $(WORKERS) $(NONE_OK)
	$(PYTEST) -m "slow and serial" --flower-full -p no:xdist $(NONE_OK)

test-all: test test-slow

# The Flower tests alone (most of them are in the slow tier), with the further deployments (--flower-full: CPL's
# kill-and-rejoin on a second loopback federation). The simulation starts Ray, each deployment
# test a SuperLink and four SuperNodes on 127.0.0.1: minutes each; run them one file at a time
# on a small host.
test-flower: $(STAMP)
	$(PY) -m pytest -q --flower-full tests/test_flower.py
	$(PY) -m pytest -q --flower-full tests/test_flower_executor.py
	$(PY) -m pytest -q --flower-full tests/test_flower_loopback.py
	$(PY) -m pytest -q --flower-full tests/test_flower_deploy.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The benchmarks at full size (minutes to hours on 2 cores). Each also runs, every section at a
# tiny size (FEDMARKET_BENCH_TINY=1), in the slow tier: tests/test_benchmarks.py.
bench: $(STAMP)
	$(PY) benchmarks/bench_ipfl.py
	$(PY) benchmarks/bench_cpl.py
	$(PY) benchmarks/bench_learning.py
	$(PY) benchmarks/bench_lia.py
	$(PY) benchmarks/bench_sweep.py
	$(PY) benchmarks/bench_flower.py
	$(PY) benchmarks/bench_checker.py

# The nightly run: the suite under Hypothesis' nightly profile, then the theorem report with
# the batch engine at 10^6 effective examples per declared property (every built-in row is
# evaluated in bulk; the regret searches and CPL rows take a minute or a few each).
# --jobs 2: two rows at a time, one per core (and the rows that mostly wait beside them).
nightly: $(STAMP)
	HYPOTHESIS_PROFILE=nightly $(PY) -m pytest -q
	$(VENV)/bin/fedmarket prove --engine batch --examples 1000000 --exhaustive --jobs 2 --markdown docs/reference-theorems.md

# Regenerate the theorem report in docs/ (batch engine, 10^5 per property, <= 60 s per row).
report: $(STAMP)
	$(VENV)/bin/fedmarket prove --engine batch --examples 100000 --time-limit 60 --exhaustive --markdown docs/reference-theorems.md

# The standard run (proofs/standard.py: batch engine, seed 0, every row to its own budget, the
# exhaustive grid, 2 worker processes plus 2 for the rows that mostly wait): what the mutation
# scores and the coverage of mechanisms/ refer to. Writes the theorem report to
# results/standard.md.
standard: $(STAMP)
	$(VENV)/bin/fedmarket prove --standard --markdown results/standard.md

# The branch coverage of mechanisms/ under the standard run (issue 34, part 2): the run under
# coverage.py (its workers too), written to docs/coverage_standard.json and the block of
# docs/reference-proofs.md. EXAMPLES=N measures the reduced variant (N per row) instead.
coverage-standard: $(STAMP)
	$(PY) benchmarks/coverage_standard.py $(if $(EXAMPLES),--examples $(EXAMPLES))

# The mutation score (issue 34; not part of `make test`): mutants generated over mechanisms/
# by cosmic-ray (the mutation extra, installed here), a uniform sample of 400 (seed 0),
# each scored by the standard run (fedmarket prove --standard, the rows that execute it)
# and the default test tier (the tests that execute it), stopping at the first failure.
# Resumable (results/mutation-generated.jsonl); JOBS=N scores N mutants at a time; the
# score and the survivors are written into docs/reference-proofs.md. Hours: run it in the
# background.
JOBS ?= 1
mutation: $(STAMP)
	$(PY) -m pip install --quiet -e ".[mutation]"
	nice -n 15 $(PY) benchmarks/generated_mutation.py --jobs $(JOBS) --markdown docs/reference-proofs.md

# The named faults of benchmarks/mutation.py (regression cases), scored by the batch and
# Hypothesis engines and the relevant tests; resumable (results/mutation.jsonl).
mutation-named: $(STAMP)
	$(PY) benchmarks/mutation.py --out results/mutation.jsonl --markdown docs/reference-proofs.md

clean:
	rm -rf $(VENV) results .pytest_cache .hypothesis
