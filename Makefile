# Run It Twice: every command a learner or an instructor needs. `make` alone lists them.
# The first `make lab` or `make check` builds .venv from requirements.txt (Python 3.11+).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
OUT    ?= grades
# What `make check` runs: the learner's own check here; the instructor part below swaps in
# the proof of the whole workbook (the learner copy has no such part).
CHECKER := workbook.commands.learner_check

.DEFAULT_GOAL := help
.PHONY: help lab check progress reset clean

help: ## List the commands (this page)
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2} /^# ---- instructor/ {print "\n  for instructors:"}' $(MAKEFILE_LIST)

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Run It Twice needs Python 3.11 or newer; this is " + sys.version.split()[0] + ". Try: make PYTHON=python3.11 ...")'
	@echo "Setting up $(VENV) from requirements.txt (first run only; about a minute)..."
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
# Quiet twice: pip shows a local project's build warnings even under one --quiet, and setuptools'
# "Editable installation" !! box is nothing a learner can act on. Errors still show.
	@$(PY) -m pip install --quiet --quiet --disable-pip-version-check -r requirements.txt
	@touch $(STAMP)

lab: $(STAMP) ## Start JupyterLab (or reuse this repo's running one) and print its URL, on your next notebook
	@$(PY) -m workbook lab

check: $(STAMP) ## Prove the workbook sound (BUILD=03: one build; SUBMISSIONS=dir grades a class into OUT=grades/)
	@$(PY) -m $(CHECKER) $(if $(SUBMISSIONS),--submissions "$(SUBMISSIONS)" --out "$(OUT)" $(GRADING)) $(if $(BUILD),--build "$(BUILD)") $(if $(FRESH),--fresh)

progress: $(STAMP) ## Per build, how many checks pass in your saved notebooks, and what to do next
	@$(PY) -m workbook progress

reset: $(STAMP) ## Restore one build's stubs, keeping a backup of yours (BUILD=03)
	@$(PY) -m workbook reset $(BUILD)

clean: ## Remove the venv, caches and generated outputs
	rm -rf $(VENV) build grades artifacts release *.egg-info .pytest_cache .ruff_cache .mypy_cache .progress .check-cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -name .ipynb_checkpoints -type d -prune -exec rm -rf {} +

# ---- instructor only: `make release` drops everything from this line on ----
CHECKER := grader.proofs.soundness
# WALLS=off (or container) grades a class without bubblewrap's walls; every grade says so.
GRADING = $(if $(WALLS),--walls "$(WALLS)") $(if $(LAYOUT),--layout "$(LAYOUT)") \
          $(if $(ROSTER),--roster "$(ROSTER)") $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") \
          $(if $(FEEDBACK),--feedback "$(FEEDBACK)")
.PHONY: test lint format release

test: $(STAMP) ## The fast loop: ruff, ruff format --check, mypy, unit tests not marked slow
# worksteal: no module fixture here is worth keeping a file on one worker; no:nbval: its
# nbformat import costs 1.3 s a process, and no unit test uses it. Bytecode is kept (under
# .pytest_cache, out of the tree) even where PYTHONDONTWRITEBYTECODE is set: otherwise each
# worker rewrites every test module's asserts again, 8 s of a run on 2 cores.
	@$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(PY) -m mypy
	@PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX="$(CURDIR)/.pytest_cache/pycache" \
	  $(PY) -m pytest -q tests/unit -m "not slow" -n 2 --dist worksteal -p no:nbval

lint: $(STAMP) ## Lint and type-check (ruff, ruff format --check, mypy)
	@$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(PY) -m mypy

format: $(STAMP) ## Reformat code and notebooks with ruff
	@$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

release: $(STAMP) ## Build the learner copy into OUT=release/ and prove nothing leaked
	@$(PY) -m grader.shipping.release --out "$(if $(filter command line,$(origin OUT)),$(OUT),release)"

.PHONY: mutate
# Minutes, not seconds: `make check` runs only the named mutants (validity); this is the rest.
mutate: $(STAMP) ## Mutation-test the hidden suites: grade every generic mutant of each solution (BUILD=03: one)
	@$(PY) -m grader.proofs.suitemutants $(BUILD)

.PHONY: autograder
autograder: $(STAMP) ## Write the Gradescope bundle OUT=autograder/autograder.zip (BUILD=03, FEEDBACK=full)
	@$(PY) -m grader.exports.gradescope bundle --out "$(if $(filter command line,$(origin OUT)),$(OUT),autograder)" \
	  $(if $(BUILD),--build "$(BUILD)") $(if $(FEEDBACK),--feedback "$(FEEDBACK)")

.PHONY: bench
bench: $(STAMP) ## Time class grading on a generated class of 100 learners (LEARNERS=20 for fewer)
	@$(PY) -m grader.bench $(if $(LEARNERS),--learners "$(LEARNERS)")
