"""The corpus of learner tests (`tests.grading.learner_corpus`) at its expected points, on both
sides: the grader (walls up, the reference and a second implementation, each bug laid over
both) and the self-check (the solution's cells as the learner's own code, its second wheat).

For every case the grader's points are the expected ones, and the self-check gives the same
points and calls the step done exactly when they are full: "done" never says more than the
grade. Every change detector earns 0 on both sides because it fails a wheat.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import pytest

from grader import Runner, load_suite
from grader.results import TestResult
from grader.wheats import TestCells, grade_learner_tests
from tests.grading.learner_corpus import CASES, Case
from workbook import teststep
from workbook.export import TESTS_PREAMBLE
from workbook.learnertests import Sources
from workbook.manifest import load_manifest, repo_root

ROOT = repo_root()
MANIFEST = load_manifest()
CHANGE_DETECTORS = ("bytecode", "constants", "source_text")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    with Runner(walls="bwrap") as graded:
        yield graded.start()


@cache
def solution_sources(build: str) -> Sources:
    """The solution's setup and answer cells: the learner's own code in the self-check."""
    solution = MANIFEST.entry(build).solution
    assert solution is not None
    return teststep.saved_sources(ROOT / solution)


def graded(runner: Runner, case: Case) -> TestResult:
    entry = MANIFEST.entry(case.build)
    cells = TestCells(TESTS_PREAMBLE + case.body)
    results = grade_learner_tests(runner, entry, load_suite(case.build), cells, root=ROOT)
    return next(r for r in results if r.name == case.test)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.build}-{c.test}-{c.label}" for c in CASES])
def test_the_grader_and_the_self_check_agree_on_the_expected_points(
    runner: Runner, case: Case
) -> None:
    result = graded(runner, case)
    assert result.points == case.points, (case.why, result.message)
    own = solution_sources(case.build)
    sources = Sources(own.setup, own.answers, (case.body,))
    report = teststep.run_step(case.build, case.test, sources)
    verdict = teststep.verdict(case.build, case.test, report)
    assert verdict.points == case.points, (case.why, verdict, report)
    assert verdict.done == (case.points == result.max_points)
    if case.label in CHANGE_DETECTORS:
        # It fails a wheat on both sides: the learner's own code or its rewrite, here; the
        # reference or the second implementation there.
        assert not report.passes or report.wheat_failure, report
        assert "correct implementation" in result.message, result.message
