# Two commands do all the set-up: `make run` and `make test`. Both build .venv on their own.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
RUNTIME_VENV := .venv-runtime
RUNTIME_STAMP := $(RUNTIME_VENV)/.installed
# jsii (under aws-cdk-lib) prints a large banner on Node 20; it is noise here.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_VERSION_CHECK := 1
# Material for MkDocs prints a banner about its successor on every build; it is noise here.
export NO_MKDOCS_2_WARNING := 1

.PHONY: install run test lint typecheck docs unit runtime synth bench bench-reconcile cost capacity clean histories burst

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

# Only what the Lambdas get at run time: pyproject's [project.dependencies], nothing else.
$(RUNTIME_STAMP): pyproject.toml
	$(PYTHON) -m venv $(RUNTIME_VENV)
	$(RUNTIME_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		$$($(PYTHON) -c "import tomllib; print(' '.join(tomllib.load(open('pyproject.toml','rb'))['project']['dependencies']))")
	touch $(RUNTIME_STAMP)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

install: $(STAMP) $(NODE_STAMP)

# Style, then the architecture: the import contracts in pyproject.toml (packages by product,
# one door from the operator's tool to the local stack, no cycles).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-logo --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

# Two workers per core: about a third of the suite's time is tests waiting on the embedded
# stack's real timeouts (a message's visibility, a drain's quiet checks), which the other
# worker of the core fills (2 cores: 290 s with one worker each, 210 s with two); at most 12,
# each able to start a local stack. A worker that runs out of tests takes some of another's
# (worksteal), so the longest tests do not end up queued on one worker. Random order, the
# seed printed last.
PYTEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(2 * (os.cpu_count() or 1), 12))")
unit: $(STAMP) $(NODE_STAMP)
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist worksteal

runtime: $(STAMP) $(RUNTIME_STAMP)
	$(BIN)/python scripts/check_lambda_runtime.py $(RUNTIME_VENV)/bin/python

# The documentation site (mkdocs.yml, docs/), built strictly: a broken link or anchor fails.
# Not --quiet: it hides the warnings --strict counts, and the build then passes.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir .local/site

test: lint typecheck docs runtime unit

synth: $(STAMP) $(NODE_STAMP)
	npx --no-install cdk synth --quiet -c allowNoAlarmSubscription=true

run: $(STAMP)
	$(BIN)/umavez firedrill

# A provider's backlog: BURST deliveries (default 20,000) queued while process is down, then
# drained and checked; the report sets the drain beside the capacity model's prediction.
burst: $(STAMP)
	$(BIN)/umavez firedrill --burst $(or $(BURST),20000)

# Ingest's cold import and warm latency next to a bare handler; process throughput next to its
# raw transactions (about 3 minutes on 2 busy cores).
bench: $(STAMP)
	$(BIN)/python benchmarks/ingest_latency.py
	$(BIN)/python benchmarks/process_throughput.py

# Reconciliation's memory and time at 10^4 and 10^5 orders on the local server (minutes).
bench-reconcile: $(STAMP)
	$(BIN)/python benchmarks/reconcile_scale.py

# The cost per million events, measured on the embedded stack (minutes): prints it and
# rewrites docs/cost.md's cost section; the raw counters go to costmodel/measured.json, committed:
# the capacity model (`make capacity`) reads its per-event requests and durations from there.
cost: $(STAMP)
	$(BIN)/umavez cost --readme docs/cost.md --json costmodel/measured.json

# The capacity at 10, 100 and 1,000 payments a second from the measurement `make cost` saved
# (seconds, no stack): rewrites the capacity sections of docs/performance.md and README.md.
capacity: $(STAMP)
	$(BIN)/umavez capacity --docs docs/performance.md --readme README.md

clean:
	rm -rf $(VENV) $(RUNTIME_VENV) node_modules cdk.out .local .mypy_cache .pytest_cache .ruff_cache .hypothesis

# Mangled provider payloads through the process Lambda, 10,000 seeded cases
# (tests/functional/test_money_fuzz.py; UMAVEZ_FUZZ_SEED=N replays another seed).
.PHONY: fuzz-money
fuzz-money: $(STAMP)
	UMAVEZ_FUZZ_CASES=10000 $(BIN)/pytest -q tests/functional/test_money_fuzz.py

# The books against the provider simulators at scale: HISTORIES lifecycles (default 10,000),
# one worker per core, each on its own hypothesis seed; prints the count, the seeds and the time.
histories: $(STAMP)
	$(BIN)/python scripts/histories.py --histories $(or $(HISTORIES),10000) --seed $(or $(SEED),22)
