"""`grader.classes.grades`: a learner's total, status and reason from hand-built builds."""

from __future__ import annotations

from collections.abc import Callable

from grader.classes.grades import BuildGrade, LearnerGrade, one_line

BuildOf = Callable[..., BuildGrade]


def test_one_line_folds_white_space_and_cuts_with_an_ellipsis() -> None:
    assert one_line("a\n  b\tc ", 10) == "a b c"
    assert one_line("abcdefghij", 10) == "abcdefghij"
    assert one_line("abcdefghijk", 10) == "abcdefghi…"


def test_a_build_not_handed_in_says_so_and_scores_zero(make_build: BuildOf) -> None:
    build = make_build(None)
    assert build.status == "not submitted"
    assert (build.score, build.max_score) == (0, 6)


def test_totals_add_over_the_builds(make_build: BuildOf) -> None:
    learner = LearnerGrade("ada", [make_build(("ok", "wrong", "ok")), make_build(None)])
    assert (learner.total, learner.max) == (5, 12)


def test_every_build_graded_is_graded_and_needs_no_look(make_build: BuildOf) -> None:
    learner = LearnerGrade("ada", [make_build(("ok", "wrong", "stub"))])
    assert learner.status == "graded"
    assert learner.reason == "" and not learner.needs_a_look


def test_nothing_graded_is_an_error_with_each_builds_reason(make_build: BuildOf) -> None:
    learner = LearnerGrade("ada", [make_build(None), make_build(("broken",) * 3, reason="boom")])
    assert learner.status == "error" and learner.needs_a_look
    assert learner.reason == "03: not submitted; 03: boom"


def test_some_graded_some_not_is_partial(make_build: BuildOf) -> None:
    learner = LearnerGrade("ada", [make_build(), make_build(None)], notes=["a zip\nbeside"])
    assert learner.status == "partial"
    assert learner.reason == "03: not submitted; a zip beside"
    assert learner.needs_a_look  # the note


def test_a_folder_problem_is_the_whole_reason(make_build: BuildOf) -> None:
    learner = LearnerGrade("ada", [make_build(None)], problem="handed in as a zip")
    assert learner.status == "error"
    assert learner.reason == "handed in as a zip"
