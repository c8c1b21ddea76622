"""Notebook 08's visible test: the *form* of ``ANSWERS`` (``test_<name>`` for its one check).

It says nothing about whether an answer is right: the quiz is graded by hidden judges only.

The notebook is read only through the export path (`workbook.load`), as every grader reads
it. Which copy: ``WORKBOOK_BUILDS=exercises`` or ``solutions``; by default the solutions when
that folder exists (the instructor's repo, where every test must pass), else the exercises
(the learner's copy, where they pass once the build is done). Running them changes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from workbook import load
from workbook.checking import Check, run_check
from workbook.checks.build08 import CHECKS

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "08_concept_check.ipynb"
FOLDERS = ("exercises", "solutions")


def builds_folder() -> str:
    chosen = os.environ.get("WORKBOOK_BUILDS")
    if chosen is None:
        return "solutions" if (ROOT / "solutions").is_dir() else "exercises"
    if chosen not in FOLDERS:
        raise pytest.UsageError(f"WORKBOOK_BUILDS must be one of {FOLDERS}, not {chosen!r}")
    return chosen


@pytest.fixture(scope="module")
def answers() -> ModuleType:
    """The notebook's setup and answer cells as a module (loaded once for all the tests)."""
    return load(ROOT / builds_folder() / NOTEBOOK)


def make_test(check: Check) -> Callable[[ModuleType], None]:
    def test(answers: ModuleType) -> None:
        result = run_check(check, answers)
        if not result.passed:
            pytest.fail(f"[{result.status}] {check.name}\n{result.message}", pytrace=False)

    test.__name__ = test.__qualname__ = f"test_{check.name}"
    test.__doc__ = f"Notebook 08, step {check.step}: {check.name.replace('_', ' ')}."
    return test


for _check in CHECKS:
    globals()[f"test_{_check.name}"] = make_test(_check)
