"""Learner tests against the learner's own code and its mutants, in a fresh interpreter."""

from __future__ import annotations

from workbook.checking.layover import LaidOver, over
from workbook.checking.learnertests import LearnerTestReport, Sources, check

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
FORGETS = LaidOver(
    "forgets_keys",
    "content_key gives a new key every call",
    "import itertools\n_n = itertools.count()\ncontent_key = lambda row: next(_n)",
)


def run(*tests: str, names: list[str]) -> dict[str, LearnerTestReport]:
    reports = check(
        Sources((SETUP,), (SINK,), tests), names, seams=["Sink"], bugs=[FORGETS], timeout=60
    )
    return {r.name: r for r in reports}


def test_a_strong_replay_test_passes_and_catches_the_sabotage_and_most_mutants() -> None:
    report = run(STRONG, names=["test_rerun_writes_zero_new_rows"])[
        "test_rerun_writes_zero_new_rows"
    ]
    assert report.passes, report.message
    assert report.caught == {"forgets_keys": True}
    assert report.total > 5 and report.killed / report.total > 0.6


def test_a_weak_test_misses_the_sabotage_and_its_survivors_are_named() -> None:
    report = run(WEAK, names=["test_writes"])["test_writes"]
    assert report.passes
    assert report.caught == {"forgets_keys": False}
    descriptions = [s["description"] for s in report.survivors]
    assert any("self.seen.update" in d for d in descriptions), descriptions
    # Advice comes only from lines the test ran: `load`'s, never another function's.
    assert all("__init__" not in s["diff"] or "seen" in s["diff"] for s in report.survivors)


BYTECODE = """
class _MySink:
    def __init__(self):
        self.written = []
        self.seen = set()
    async def load(self, rows):
        fresh = [r for r in rows if content_key(r) not in self.seen]
        self.written.extend(fresh)
        self.seen.update(content_key(r) for r in fresh)
        return len(fresh)

def test_pins_code():
    mine, theirs = _MySink.load.__code__, Sink.load.__code__
    assert mine.co_code == theirs.co_code and mine.co_consts == theirs.co_consts
"""


def test_a_change_detector_fails_the_second_wheat() -> None:
    report = run(BYTECODE, names=["test_pins_code"])["test_pins_code"]
    assert report.passes, report.message  # on the learner's own code it holds
    assert "AssertionError" in report.wheat_failure
    assert report.caught == {}  # failing a wheat, it is tried on no bug


def test_a_test_pinning_a_free_behaviour_fails_under_the_contract_variant() -> None:
    pins = "def test_pins():\n    assert Sink().written == []\n"
    free = LaidOver("starts_full", "a sink starts with a marker", over("Sink", FULL))
    reports = check(
        Sources((SETUP,), (SINK,), (pins,)), ["test_pins"], seams=["Sink"], contract=[free]
    )
    assert reports[0].passes and "AssertionError" in reports[0].wheat_failure


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


FULL = """
class Sink:
    def __init__(self):
        self._under = under()
        self.written = ["marker"]
    async def load(self, rows):
        return await self._under.load(rows)
"""
