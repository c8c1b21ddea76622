"""The corpus of learner tests (`tests.grading.learner_corpus`) at its expected points, on both
sides: the grader (walls up, the reference and a second implementation, each bug laid over
both) and the self-check (the solution's cells as the learner's own code, its second wheat).

For every case the grader's points are the expected ones, and the self-check gives the same
points and calls the step done exactly when they are full: "done" never says more than the
grade. Every change detector earns 0 on both sides because it fails a wheat.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

from grader import Runner, load_suite
from grader.learner_tests.wheats import TestCells, grade_learner_tests
from grader.runtime.results import TestResult
from tests.grading.learner_corpus import CASES, REPLAY, Case
from workbook.checking import teststep
from workbook.checking.learnertests import Sources
from workbook.commands.progress import build_report
from workbook.shared.export import TESTS_PREAMBLE
from workbook.shared.manifest import copy_manifest, load_manifest, repo_root

ROOT = repo_root()
MANIFEST = load_manifest()
CHANGE_DETECTORS = ("bytecode", "constants", "source_text")
NOTEBOOK = "03_build_retry_and_sink.ipynb"

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
    own = solution_sources(case.build)
    sources = Sources(own.setup, own.answers, (case.body,))
    # Both sides at once: each mostly waits on its children (a hang costs each 3 s).
    # The advice (generic mutants of the lines the test ran) never changes the points or
    # "done"; `tests/unit/workbook/checking/test_teststep.py` proves it on its own. Without it:
    # 0.4 s a case.
    with ThreadPoolExecutor(1) as pool:
        step = pool.submit(teststep.run_step, case.build, case.test, sources, advice=False)
        result = graded(runner, case)
        report = step.result()
    assert result.points == case.points, (case.why, result.message)
    verdict = teststep.verdict(case.build, case.test, report)
    assert verdict.points == case.points, (case.why, verdict, report)
    assert verdict.done == (case.points == result.max_points)
    if case.label in CHANGE_DETECTORS:
        # It fails a wheat on both sides: the learner's own code or its rewrite, here; the
        # reference or the second implementation there.
        assert not report.passes or report.wheat_failure, report
        assert "correct implementation" in result.message, result.message


AGREEMENT = ("unwritten", "no_key", "misses_replay_count", "good_recorder")


@pytest.mark.parametrize("label", AGREEMENT)
def test_make_progress_and_the_learners_make_check_say_what_the_self_check_says(
    tmp_path: Path, label: str
) -> None:
    """Build 03 with every answer right and one corpus test written, read as saved: `make
    progress` (and the learner's `make check`, which prints the same verdict) counts the test
    done exactly when the self-check and the grader give it full points."""
    case = next(c for c in CASES if c.test == REPLAY and c.label == label)
    copy_manifest(ROOT, tmp_path)
    notebook = json.loads((ROOT / "solutions" / NOTEBOOK).read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        if f"def {REPLAY}" in "".join(cell["source"]) and "test" in cell["metadata"]["tags"]:
            cell["source"] = case.body
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / NOTEBOOK).write_text(json.dumps(notebook), encoding="utf-8")
    manifest = load_manifest(tmp_path / "workbook.toml")
    report = build_report(manifest, manifest.entry("03"), cached=False)
    step = next(r for r in report.results if r.name == REPLAY)
    full = case.points == MANIFEST.entry("03").learner_tests[0].points
    assert step.passed == full, step
    assert report.verdict == ("done" if full else f"failing: {REPLAY}"), report.verdict
    if not full:
        assert f"{case.points} of 3 points" in step.message or "not written" in step.message
