"""The one recipe behind every ``builds/buildNN/visible/test_visible.py``: ``test_<name>`` for
each visible check of the build.

A notebook is read only through the export path (`workbook.load`), as every grader reads it.
Which copy: ``WORKBOOK_BUILDS=exercises`` or ``solutions`` (those folders of the repository),
or the path of any folder holding the build notebooks (a learner's hand-in, say); by default
the solutions when that folder exists (the instructor's repo, where every test must pass),
else the exercises (the learner's copy, where they pass once the build is done). Running them
changes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from workbook import load
from workbook.checks import Check, run_check
from workbook.selfcheck import checks_for
from workbook.shared.manifest import load_manifest, repo_root

ROOT = repo_root()
FOLDERS = ("exercises", "solutions")


def builds_folder() -> Path:
    """The folder whose build notebooks the tests read (see the module's docstring)."""
    chosen = os.environ.get("WORKBOOK_BUILDS")
    if chosen is None:
        return ROOT / ("solutions" if (ROOT / "solutions").is_dir() else "exercises")
    folder = ROOT / chosen if chosen in FOLDERS else Path(chosen).expanduser()
    if not folder.is_dir():
        raise pytest.UsageError(
            f"WORKBOOK_BUILDS={chosen!r}: no such folder (give {' or '.join(FOLDERS)}, or the"
            " path of a folder holding the build notebooks)"
        )
    return folder


def visible_tests(number: str) -> dict[str, Any]:
    """The `answers` fixture and one ``test_<name>`` per check of notebook `number`, to put
    into a test module's globals."""
    entry = load_manifest().entry(number)
    notebook = Path(entry.path).name

    @pytest.fixture(scope="module")
    def answers() -> ModuleType:
        """The notebook's setup and answer cells as a module (loaded once for all the tests)."""
        path = builds_folder() / notebook
        if not path.exists():  # a hand-in without it fails: never a green run of skips
            pytest.fail(f"{path.parent} holds no {notebook}", pytrace=False)
        return load(path)

    def make_test(check: Check) -> Callable[[ModuleType], None]:
        def test(answers: ModuleType) -> None:
            result = run_check(check, answers)
            if not result.passed:
                pytest.fail(f"[{result.status}] {check.name}\n{result.message}", pytrace=False)

        test.__name__ = test.__qualname__ = f"test_{check.name}"
        test.__doc__ = f"{entry.title}, step {check.step}: {check.name.replace('_', ' ')}."
        return test

    tests: dict[str, Any] = {"answers": answers}
    for check in checks_for(number):
        tests[f"test_{check.name}"] = make_test(check)
    return tests
