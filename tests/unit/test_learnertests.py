"""Learner tests against the learner's own code and its mutants, in a fresh interpreter."""

from __future__ import annotations

from workbook.learnertests import LearnerTestReport, Sabotage, Sources, check

SETUP = """
import asyncio
def content_key(row):
    return "k" + str(row)
"""
SINK = """
class Sink:
    def __init__(self):
        self.written = []
        self.seen = set()
    async def load(self, rows):
        fresh = [r for r in rows if content_key(r) not in self.seen]
        self.written.extend(fresh)
        self.seen.update(content_key(r) for r in fresh)
        return len(fresh)
"""
STRONG = """
async def test_rerun_writes_zero_new_rows():
    sink = Sink()
    assert await sink.load([1, 2]) == 2
    assert await sink.load([1, 2]) == 0
    assert sink.written == [1, 2]
"""
WEAK = """
async def test_writes():
    sink = Sink()
    await sink.load([1, 2])
    assert len(sink.written) >= 1
"""
REJECTS_CORRECT = """
async def test_wrong_expectation():
    sink = Sink()
    assert await sink.load([1]) == 5
"""
HANGS_ON_A_MUTANT = """
def test_loops_when_broken():
    sink = Sink()
    asyncio.run(sink.load([1]))
    while not sink.seen:  # a sink that forgets its keys spins here until the time limit
        pass
"""
FORGETS = Sabotage(
    "forgets_keys",
    "content_key gives a new key every call",
    "import itertools\n_n = itertools.count()\ncontent_key = lambda row: next(_n)",
)


def run(*tests: str, names: list[str]) -> dict[str, LearnerTestReport]:
    reports = check(
        Sources((SETUP,), (SINK,), tests), names, seams=["Sink"], sabotage=[FORGETS], timeout=60
    )
    return {r.name: r for r in reports}


def test_a_strong_replay_test_passes_and_catches_the_sabotage_and_most_mutants() -> None:
    report = run(STRONG, names=["test_rerun_writes_zero_new_rows"])[
        "test_rerun_writes_zero_new_rows"
    ]
    assert report.passes, report.message
    assert report.sabotage_caught == {"forgets_keys": True}
    assert report.total > 5 and report.killed / report.total > 0.6


def test_a_weak_test_misses_the_sabotage_and_its_survivors_are_named() -> None:
    report = run(WEAK, names=["test_writes"])["test_writes"]
    assert report.passes
    assert report.sabotage_caught == {"forgets_keys": False}
    descriptions = [s["description"] for s in report.survivors]
    assert any("self.seen.update" in d for d in descriptions), descriptions


def test_a_test_that_rejects_correct_code_fails_there_and_is_not_mutated() -> None:
    report = run(REJECTS_CORRECT, names=["test_wrong_expectation"])["test_wrong_expectation"]
    assert not report.passes and "AssertionError" in report.message
    assert report.total == 0


def test_a_mutant_that_hangs_the_test_counts_as_caught_and_costs_its_time_limit_only() -> None:
    report = run(HANGS_ON_A_MUTANT, names=["test_loops_when_broken"])["test_loops_when_broken"]
    assert report.passes
    assert report.killed >= 1


def test_a_missing_test_is_reported_by_name() -> None:
    report = run(STRONG, names=["test_absent"])["test_absent"]
    assert not report.passes and "not defined" in report.message
