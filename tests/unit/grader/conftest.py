"""Hand-built class grades for the tests of `grader.classes` and `grader.exports`: a build of
three tests (two visible checks, one hidden test) and learners graded on it, no grading run."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from grader.classes.discovery import NOT_SUBMITTED, Found
from grader.classes.grades import BuildGrade, ClassReport, LearnerGrade
from grader.runtime.results import Outcome, SubmissionResult
from grader.runtime.results import TestResult as Graded
from workbook.shared.manifest import Entry, TestSpec

ENTRY = Entry(
    number="03",
    kind="build",
    title="Build: three tests",
    path="exercises/03_three.ipynb",
    outcome="",
    tests=(
        TestSpec(name="adds", points=2, hint="add the two", visible=True),
        TestSpec(name="keeps", points=1, hint="keep the rows", visible=True),
        TestSpec(name="hidden_edge", points=3, hint="mind the edge", visible=False),
    ),
)

#: A test's outcome by a short word: ``ok``, ``wrong``, ``stub``, ``broken``.
Outcomes = tuple[str, str, str]
BuildOf = Callable[..., BuildGrade]


def build_of(
    outcomes: Outcomes | None = ("ok", "ok", "ok"),
    *,
    got: str = "5",
    source_id: str | None = None,
    reason: str = "",
) -> BuildGrade:
    """One learner's grade for `ENTRY`: None for not submitted, else one word per test."""
    if outcomes is None:
        zeros = tuple(Graded(t.name, 0, t.points, NOT_SUBMITTED, t.visible) for t in ENTRY.tests)
        result = SubmissionResult("03", "x", "error", NOT_SUBMITTED, zeros)
        return BuildGrade(ENTRY, Found(None, NOT_SUBMITTED), result)
    tests: list[Graded] = []
    for spec, word in zip(ENTRY.tests, outcomes, strict=True):
        if word == "ok":
            tests.append(Graded(spec.name, spec.points, spec.points, "", spec.visible))
        elif word == "wrong":
            message = f"called {spec.name}(1, 2)\ngot: {got}\nexpected: 3"
            tests.append(
                Graded(spec.name, 0, spec.points, message, spec.visible, Outcome.WRONG, got)
            )
        elif word == "stub":
            tests.append(
                Graded(spec.name, 0, spec.points, "not done", spec.visible, Outcome.NOT_DONE)
            )
        else:
            why = reason or "SyntaxError: invalid syntax"
            tests.append(Graded(spec.name, 0, spec.points, why, spec.visible, Outcome.NOT_LOADED))
    graded = all(w in ("ok", "wrong", "stub") for w in outcomes)
    result = SubmissionResult("03", "x", "graded" if graded else "error", reason, tuple(tests))
    return BuildGrade(ENTRY, Found(None, None, "exercises/03_three.ipynb"), result, source_id)


@pytest.fixture
def make_build() -> BuildOf:
    return build_of


@pytest.fixture
def make_report() -> Callable[..., ClassReport]:
    """A `ClassReport` of `ENTRY` for ``name=outcomes`` pairs (see `build_of`)."""

    def make(**learners: Outcomes | BuildGrade | None) -> ClassReport:
        graded = []
        for name, outcomes in learners.items():
            build = outcomes if isinstance(outcomes, BuildGrade) else build_of(outcomes)
            graded.append(LearnerGrade(name, [build]))
        return ClassReport([ENTRY], graded, walls="off")

    return make
