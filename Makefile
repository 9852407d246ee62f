# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# pip extras installed with the package: CI adds the trackers and the docs tools
# (make test EXTRAS=dev,tracking,docs) so that their tests run rather than skip;
# `make install EXTRAS=dev,mlflow` adds an extra to an existing .venv (one stamp per set)
EXTRAS ?= dev
STAMP  := $(VENV)/.installed-$(EXTRAS)

.PHONY: install run lint test test-fast test-deployment test-faults test-edge edge-image bench docs clean
ARCH ?= arm64

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

run: install
	$(BIN)/fedimb $(ARGS)

# style and types: ruff (lint and format) on the whole tree, mypy on the fedimb package
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# pytest-xdist workers for test and test-fast; a test module stays on one worker
# (--dist loadscope), so its module-scoped fixtures are built once
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadscope

test: install
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: install
	$(BIN)/python -m pytest $(XDIST) -m "not slow and not deployment_all and not fault_matrix and not edge" $(PYTEST_ARGS)

# every method against real SuperLink + SuperNode processes (~45 min on 2 cores)
test-deployment: install
	$(BIN)/python -m pytest -m deployment_all $(PYTEST_ARGS)

# the fault matrix's simulation and deployment cells (~17 min on 2 cores; its in-process
# cells run in `make test`), a deployed run with a node 90 s slow per round (~4 min), a
# deployed FedBuff run beside its synchronous twin with a node 30 s slow (~5 min) and
# every cell of the attack matrix (benchmarks/attacks.py)
test-faults: install
	$(BIN)/python -m pytest -m fault_matrix tests/integration/test_fault_matrix.py tests/deployment/test_slow_rounds.py tests/deployment/test_asynchronous_deployment.py tests/integration/test_attack_matrix.py $(PYTEST_ARGS)

# fedimb-edge:$(ARCH) (arm64 or amd64) from a Debian root and PyPI wheels, with the container
# engine present; sets up QEMU/binfmt and the engine as needed (first build ~10 min, then ~1 min)
edge-image: install
	$(BIN)/python -m edge image --arch $(ARCH)

# an emulated arm64 SuperNode from the image beside a native one, TLS and SuperNode
# authentication, against an all-native run (not part of `make test`; prints its time)
test-edge: edge-image
	@start=$$(date +%s); $(BIN)/python -m pytest -m edge tests/edge $(PYTEST_ARGS); code=$$?; \
	echo "test-edge: $$(( $$(date +%s) - start )) s"; exit $$code

# performance tables in results/perf (about 1.75 h on 2 cores); the accuracy tables are
# bash benchmarks/accuracy/run.sh (about a day)
bench: install
	$(BIN)/python benchmarks/perf/fedavg_loop.py
	$(BIN)/python benchmarks/perf/methods.py
	$(BIN)/python benchmarks/perf/scale.py
	$(BIN)/python benchmarks/perf/deployment.py --nodes 3,10
	$(BIN)/python benchmarks/perf/asynchronous_deployed.py
	$(BIN)/python benchmarks/perf/process_start.py
	$(BIN)/python benchmarks/perf/startup.py --repeats 3
	$(BIN)/python benchmarks/perf/breakdown.py --runtimes in_process,simulation,deployment --clients 3
	$(BIN)/python benchmarks/perf/breakdown.py --runtimes deployment --clients 10 --out results/perf/breakdown10

# the documentation site in site/ (MkDocs, strict: a broken link or a missing page fails)
docs:
	$(MAKE) install EXTRAS=dev,docs
	$(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf .flwr outputs multirun results site
