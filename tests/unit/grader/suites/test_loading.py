"""`grader.suites.loading`: mutants that apply exactly once or fail loudly, and the suites
and mutants files read with errors that name them."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import Mutant, SuiteError
from grader.suites.loading import Edit, load_mutants


def test_a_mutant_edits_exactly_once() -> None:
    mutant = Mutant("m", "bug", (Edit("return 1", "return 2"), Edit("a = 0", "a = 1")))
    assert mutant.apply("a = 0\ndef f():\n    return 1\n") == "a = 1\ndef f():\n    return 2\n"


@pytest.mark.parametrize(
    ("source", "words"),
    [("def f():\n    return 3\n", "not found"), ("return 1\nreturn 1", "2 times")],
)
def test_a_mutant_that_no_longer_applies_fails_loudly(source: str, words: str) -> None:
    with pytest.raises(SuiteError, match=words):
        Mutant("m", "bug", (Edit("return 1", "return 2"),)).apply(source)


def test_mutants_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mutants.toml"
    path.write_text('[[mutant]]\nname = "x"\nbug = "y"\n')
    with pytest.raises(SuiteError, match="mutant #1: missing 'edit'"):
        load_mutants(path)
    twice = '[[mutant]]\nname = "x"\nbug = "y"\n[[mutant.edit]]\nold = "a"\nnew = "b"\n'
    path.write_text(twice * 2)
    with pytest.raises(SuiteError, match="appears twice"):
        load_mutants(path)
    assert load_mutants(tmp_path / "absent.toml") == ()
