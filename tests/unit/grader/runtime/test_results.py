"""`grader.runtime.results`: what a probe's status comes to, a submission's totals, and
results at zero for one reason."""

from __future__ import annotations

import json

import pytest

from grader.runtime.results import (
    Outcome,
    ProbeRecord,
    SubmissionResult,
    all_zero,
    zero_results,
)
from grader.runtime.results import TestResult as Result
from workbook.shared.manifest import Entry, LearnerTestSpec
from workbook.shared.manifest import TestSpec as Spec

ENTRY = Entry(
    number="99",
    kind="build",
    title="toy",
    path="toy.ipynb",
    outcome="",
    tests=(Spec("a", 2, "hint a", visible=True), Spec("b", 3, "hint b")),
    learner_tests=(LearnerTestSpec("test_mine", 4, "hint", ("bug",), "bug"),),
)


@pytest.mark.parametrize(
    ("status", "fault", "kind"),
    [
        ("done", False, Outcome.PASSED),
        ("done", True, Outcome.PASSED),  # a finished probe is the learner's, whatever else
        ("crashed", True, Outcome.GRADER_FAULT),
        ("void", False, Outcome.VOID),
        ("load failed", False, Outcome.NOT_LOADED),
        ("timeout", False, Outcome.UNFINISHED),
        ("crashed", False, Outcome.UNFINISHED),
        ("not run", False, Outcome.UNFINISHED),
    ],
)
def test_a_probe_record_says_what_its_tests_come_to(
    status: str, fault: bool, kind: Outcome
) -> None:
    assert ProbeRecord("p", status, grader_fault=fault).kind is kind  # type: ignore[arg-type]


def result(*tests: Result) -> SubmissionResult:
    return SubmissionResult("99", "ada", "partial", "", tests)


def test_a_submission_adds_up_its_tests_and_names_the_failed_ones() -> None:
    graded = result(Result("a", 2, 2), Result("b", 0, 3, "got: 1", kind=Outcome.WRONG))
    assert (graded.score, graded.max_score) == (2, 5)
    assert (graded.passed, graded.failed) == (["a"], ["b"])
    assert graded.test("b").message == "got: 1" and not graded.grader_fault


def test_asking_for_a_test_it_does_not_have_raises_key_error() -> None:
    with pytest.raises(KeyError, match="'c'"):
        result(Result("a", 2, 2)).test("c")


def test_one_grader_fault_marks_the_whole_result() -> None:
    faulty = result(Result("a", 2, 2), Result("b", 0, 3, kind=Outcome.GRADER_FAULT))
    assert faulty.grader_fault


def test_as_json_is_json_ready_with_its_totals() -> None:
    data = result(Result("a", 1, 2, kind=Outcome.WRONG)).as_json()
    assert (data["score"], data["max_score"]) == (1, 2)
    assert data["tests"][0]["kind"] == "wrong"
    assert json.loads(json.dumps(data))["tests"][0]["points"] == 1  # plain JSON values


def test_zero_results_covers_every_learner_test_with_the_reason() -> None:
    zeros = zero_results(ENTRY, "not a notebook", Outcome.NOT_LOADED)
    assert zeros == (Result("test_mine", 0, 4, "not a notebook", True, Outcome.NOT_LOADED),)


def test_all_zero_is_an_error_result_of_every_test_then_the_learner_tests() -> None:
    zeroed = all_zero("99", ENTRY, "ada", "no answer cells", Outcome.NOT_LOADED, seconds=1.5)
    assert (zeroed.status, zeroed.reason, zeroed.seconds) == ("error", "no answer cells", 1.5)
    assert [(t.name, t.points, t.max_points, t.visible) for t in zeroed.tests] == [
        ("a", 0, 2, True),
        ("b", 0, 3, False),
        ("test_mine", 0, 4, True),
    ]
    assert {t.kind for t in zeroed.tests} == {Outcome.NOT_LOADED}
    assert (zeroed.score, zeroed.max_score) == (0, 9)
