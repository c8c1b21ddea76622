"""`grader.proofs.suite_validity`: the claims of validity's table (structure, solution, stubs)
judged on small notebooks and hand-made results, and the table they print."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from grader.proofs.known_bugs import Line
from grader.proofs.suite_validity import build_table, solution_line, structure, stub_line
from grader.runtime.results import SubmissionResult
from grader.runtime.results import TestResult as Graded
from workbook.shared.manifest import load_manifest

MakeNotebook = Callable[..., Path]


def result(*points: int, status: str = "graded", reason: str = "") -> SubmissionResult:
    tests = tuple(
        Graded(f"t{i}", p, 2, "" if p == 2 else "got: 1\nexpected: 2") for i, p in enumerate(points)
    )
    return SubmissionResult("03", "x", status, reason, tests, 0.25)  # type: ignore[arg-type]


def test_only_answer_and_test_cells_may_differ(make_notebook: MakeNotebook) -> None:
    exercise = make_notebook(("md", "# Title"), ("answer", "raise NotImplementedError"), name="e")
    solution = make_notebook(("md", "# Title"), ("answer", "x = 1"), name="s")
    line = structure(exercise, solution)
    assert (line.name, line.ok) == ("structure", True)
    assert line.summary == "2 cells each; same types, tags and sources outside the 1 answer cells"


def test_a_difference_outside_the_answers_is_named(make_notebook: MakeNotebook) -> None:
    exercise = make_notebook(("md", "# Title"), ("", "a = 1"), ("answer", "x"), name="e")
    solution = make_notebook(("md", "# Other"), ("test", "a = 1"), name="s")
    line = structure(exercise, solution)
    assert not line.ok and line.summary == "3 difference(s) outside answer cells"
    assert line.details == [
        "3 cells in the exercise, 2 in the solution",
        "cell 1 (markdown) differs: line 1: '# Title' vs '# Other'",
        "cell 2: tags [] vs ['test']",
    ]


def test_the_solution_must_earn_every_point() -> None:
    assert solution_line(result(2, 2)) == Line("solution", True, "4/4 points (0.25 s)")
    failed = solution_line(result(2, 0, status="partial", reason="a probe hung"))
    assert not failed.ok
    assert failed.summary == "2/4 points (0.25 s): the solution must earn every point"
    assert failed.details == ["status partial: a probe hung", "t1:", "  got: 1", "  expected: 2"]


def test_the_stubs_must_earn_nothing() -> None:
    assert stub_line(result(0, 0)).summary == "0/4 points (0.25 s), every graded test at zero"
    earned = stub_line(result(0, 2))
    assert not earned.ok and earned.details == ["t1: 2 point(s)"]


def test_the_table_marks_each_claim_and_cuts_long_details() -> None:
    entry = load_manifest().entry("03")
    table = build_table(
        entry,
        [Line("suite", True, "fine"), Line("mutants", False, "bad", [str(i) for i in range(14)])],
    )
    lines = table.splitlines()
    assert lines[0] == f"build 03  {entry.title}"
    assert lines[1] == "  ✓ suite    fine"
    assert lines[2] == "  ✗ mutants  bad"
    assert lines[-1] == "      ... and 2 more" and len(lines) == 3 + 12 + 1


def test_notebooks_that_differ_only_in_answers_have_the_same_structure(
    make_notebook: MakeNotebook,
) -> None:
    exercise = make_notebook(
        ("md", "# Step"), ("answer", "raise NotImplementedError"), ("", "check()"), name="ex.ipynb"
    )
    solution = make_notebook(
        ("md", "# Step"), ("answer", "x = 1"), ("", "check()"), name="sol.ipynb"
    )
    line = structure(exercise, solution)
    assert line.ok, line.details
    assert "1 answer cells" in line.summary


@pytest.mark.parametrize(
    ("solution_cells", "words"),
    [
        ((("md", "# Step!"), ("answer", "x = 1"), ("", "check()")), "cell 1 (markdown) differs"),
        ((("md", "# Step"), ("setup", "x = 1"), ("", "check()")), "cell 2: tags"),
        ((("md", "# Step"), ("answer", "x = 1")), "3 cells in the exercise, 2 in the solution"),
        ((("md", "# Step"), ("answer", "x = 1"), ("", "check(1)")), "cell 3 (code) differs"),
    ],
)
def test_structure_drift_is_reported(
    make_notebook: MakeNotebook, solution_cells: tuple[tuple[str, str], ...], words: str
) -> None:
    exercise = make_notebook(("md", "# Step"), ("answer", "pass"), ("", "check()"), name="ex.ipynb")
    solution = make_notebook(*solution_cells, name="sol.ipynb")
    line = structure(exercise, solution)
    assert not line.ok
    assert any(words in detail for detail in line.details), line.details
