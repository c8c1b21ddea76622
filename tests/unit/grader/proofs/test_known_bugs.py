"""`grader.proofs.known_bugs`: one row per known bug (killed, and by which tests; surviving; or
not applying), graded by a stand-in runner that fails the tests a mutated source names."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from types import SimpleNamespace
from typing import Any, cast

from grader.proofs.known_bugs import mutant_lines
from grader.runtime.results import SubmissionResult
from grader.runtime.results import TestResult as Graded
from grader.suites.loading import Edit, Mutant

TESTS = ("t1", "t2", "t3", "t4", "t5")


class Runner:
    """Grades a source by its words: every test named in it fails."""

    def grade_source(self, build: str, source: str, **_: Any) -> SubmissionResult:
        tests = tuple(Graded(t, 0 if t in source else 1, 1) for t in TESTS)
        return SubmissionResult(build, "x", "graded", "", tests)


class Pool:
    def map(self, work: Callable[[Runner, int], Any], items: Sequence[int]) -> Iterator[Any]:
        return iter([work(Runner(), item) for item in items])


def mutant(name: str, old: str, new: str) -> Mutant:
    return Mutant(name, f"the {name} bug", (Edit(old, new),))


def lines_for(*mutants: Mutant, failures: dict[str, set[str]] | None = None) -> list[Any]:
    suite = SimpleNamespace(mutants=list(mutants))
    return mutant_lines(
        cast(Any, suite), "solution", cast(Any, Pool()), "03", cast(Any, None), failures
    )


def test_each_bug_is_killed_by_the_tests_that_fail_on_it() -> None:
    failures: dict[str, set[str]] = {}
    lines = lines_for(
        mutant("one", "solution", "t2"),
        mutant("many", "solution", "t1 t2 t3 t4 t5"),
        failures=failures,
    )
    assert [(x.name, x.ok, x.summary) for x in lines[:2]] == [
        ("mutant one", True, "killed by t2"),
        ("mutant many", True, "killed by t1, t2, t3 (+2)"),
    ]
    assert failures == {"one": {"t2"}, "many": set(TESTS)}
    assert lines[-1].name == "mutants" and lines[-1].ok
    assert lines[-1].summary.startswith("2 of 2 killed (")


def test_a_survivor_and_a_bug_that_does_not_apply_fail_the_table() -> None:
    lines = lines_for(mutant("quiet", "solution", "solved"), mutant("stale", "gone", "x"))
    quiet, stale, total = lines
    assert (quiet.ok, quiet.summary, quiet.details) == (False, "SURVIVES (5/5)", ["the quiet bug"])
    assert (stale.ok, stale.summary) == (False, "does not apply")
    assert stale.details[0] == (
        "mutant stale, edit 1: the text to replace is not found in the solution's export:"
    )
    assert not total.ok and total.summary.startswith("0 of 2 killed")


def test_no_known_bugs_is_not_a_pass() -> None:
    (total,) = lines_for()
    assert (total.name, total.ok) == ("mutants", False)
    assert total.summary.startswith("0 of 0 killed")
