# tunebench: the two set-up commands are `make install` and `make test`.
PY ?= python3
# optional extras too: make install EXTRAS=test,scale (Ray; docs/USAGE.md §Scale out)
EXTRAS ?= test

.PHONY: install test test-all run bench lint leaderboard server

# make server: an MLflow tracking server on PostgreSQL (pgserver; the scale extra), in the foreground
HOST ?= 127.0.0.1
PORT ?= 5000
DATA ?= tracking

install:            ## install tunebench (editable) with its pinned dependencies and the test tools (+ chromium where apt-get and root)
	$(PY) -m pip install -e '.[$(EXTRAS)]'
	bash scripts/install_browser.sh

test:               ## the test suite (CPU only; GPU tests are skipped where no GPU is found)
	$(PY) -m pytest -q -m "not slow" --durations=15

test-all:           ## the whole suite, slow tests included
	$(PY) -m pytest -q

run:                ## the default experiment (small budget, small model, this CPU)
	$(PY) run.py

lint:               ## ruff (rules in pyproject.toml [tool.ruff]): pyflakes, import order, bugbear, pyupgrade
	$(PY) -m ruff check .

bench:              ## harness overhead and trials per minute on one ResNet-18 layer (llvm)
	$(PY) benchmarks/harness_overhead.py

leaderboard:        ## tables (leaderboard/leaderboard.md, .csv, .html) and best-so-far plots from the FINISHED MLflow runs
	$(PY) -m tunebench leaderboard --html

server:             ## MLflow tracking server on PostgreSQL at http://$(HOST):$(PORT) (data in $(DATA)/; Ctrl-C stops it)
	$(PY) -m tunebench server start --host $(HOST) --port $(PORT) --data $(DATA)
