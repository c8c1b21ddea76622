"""The recipe of every build's visible tests: which notebooks they read, one test per check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import ROOT
from workbook import load
from workbook.checking.visible_suite import builds_folder, visible_tests
from workbook.selfcheck import checks_for
from workbook.shared.errors import ManifestError

NOTEBOOK = "03_build_retry_and_sink.ipynb"


def test_by_default_the_tests_read_the_solutions_when_the_repo_has_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WORKBOOK_BUILDS", raising=False)
    assert builds_folder() == ROOT / "solutions"


@pytest.mark.parametrize("name", ["exercises", "solutions"])
def test_a_folder_of_the_repo_is_chosen_by_name(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBOOK_BUILDS", name)
    assert builds_folder() == ROOT / name


def test_any_folder_is_chosen_by_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBOOK_BUILDS", str(tmp_path))
    assert builds_folder() == tmp_path


def test_a_folder_that_does_not_exist_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "hand-in"
    monkeypatch.setenv("WORKBOOK_BUILDS", str(missing))
    with pytest.raises(pytest.UsageError) as raised:
        builds_folder()
    assert str(raised.value) == (
        f"WORKBOOK_BUILDS={str(missing)!r}: no such folder (give exercises or solutions, or the"
        " path of a folder holding the build notebooks)"
    )


def test_one_named_and_described_test_per_visible_check() -> None:
    tests = visible_tests("03")
    checks = list(checks_for("03"))
    assert list(tests) == ["answers"] + [f"test_{c.name}" for c in checks]
    first = tests[f"test_{checks[0].name}"]
    assert first.__name__ == f"test_{checks[0].name}"
    assert first.__doc__ == (
        f"Build: retry and the idempotent sink, step {checks[0].step}:"
        f" {checks[0].name.replace('_', ' ')}."
    )


def test_every_test_passes_on_the_solution() -> None:
    answers = load(ROOT / "solutions" / NOTEBOOK)
    for name, test in visible_tests("03").items():
        if name.startswith("test_"):
            test(answers)


def test_a_check_not_done_fails_with_its_status_and_name() -> None:
    tests = visible_tests("03")
    check = next(iter(checks_for("03")))
    with pytest.raises(pytest.fail.Exception) as failed:
        tests[f"test_{check.name}"](SimpleNamespace())  # nothing defined yet
    assert str(failed.value).startswith(f"[not done] {check.name}\n")
    assert "is not defined yet" in str(failed.value)


def test_an_unknown_build_is_a_manifest_error() -> None:
    with pytest.raises(ManifestError, match=r"^no notebook '99' in the manifest \(it has 01, "):
        visible_tests("99")


@pytest.mark.slow
def test_a_folder_without_the_notebook_fails_every_test(tmp_path: Path) -> None:
    """Run as pytest runs ``builds/build03/visible``, on an empty hand-in folder: every test
    fails, saying why (a run of skips would exit 0, green, on nothing)."""
    suite = tmp_path / "test_visible_03.py"
    suite.write_text(
        "from workbook.checking.visible_suite import visible_tests\n"
        'globals().update(visible_tests("03"))\n',
        encoding="utf-8",
    )
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    env = {**os.environ, "WORKBOOK_BUILDS": str(hand_in)}
    pytest_args = ["-q", "-p", "no:cacheprovider", "-p", "no:nbval", "-rs", "--rootdir"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *pytest_args, str(tmp_path), str(suite)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{len(checks_for('03'))} errors" in done.stdout, done.stdout
    assert f"{hand_in} holds no {NOTEBOOK}" in done.stdout
