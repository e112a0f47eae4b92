# The two commands of the README. Both create .venv (idempotent) before doing their job.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# CPU build of torch; a bare `torch` requirement would pull a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: demo test test-flower venv lint bench nightly report clean

$(STAMP): pyproject.toml
	@# Fashion-MNIST (IDX files) from Debian, where apt is available; skipped elsewhere
	-@if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 || \
		(apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1) || \
		echo "note: could not install dataset-fashion-mnist; Fashion-MNIST runs need --data-dir"; fi
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e ".[learning,sims,flower,dev]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/fedmarket market --out results/market
	$(VENV)/bin/fedmarket sweep --preset demo --out results/demo --report

test: $(STAMP)
	$(VENV)/bin/ruff check .
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(PY) -m pytest -q

# The Flower tests alone (the end-to-end simulation starts Ray: about a minute).
test-flower: $(STAMP)
	$(PY) -m pytest -q tests/test_flower.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(PY) benchmarks/bench_ipfl.py
	$(PY) benchmarks/bench_cpl.py
	$(PY) benchmarks/bench_learning.py
	$(PY) benchmarks/bench_lia.py
	$(PY) benchmarks/bench_sweep.py
	$(PY) benchmarks/bench_flower.py

# The nightly profile: Hypothesis' nightly settings, and 100,000 examples per declared
# property in the contract suite (hours on two cores).
nightly: $(STAMP)
	HYPOTHESIS_PROFILE=nightly $(PY) -m pytest -q

# Regenerate the theorem report in docs/ (a few minutes).
report: $(STAMP)
	$(VENV)/bin/fedmarket prove --examples 500 --exhaustive --markdown docs/reference-theorems.md

clean:
	rm -rf $(VENV) results .pytest_cache .hypothesis
