"""`grader.runtime.pool`: a few runners graded on in parallel, one submission per runner at a
time. The pool's own bookkeeping (`map`, `runner`) is tested on runners that never start; one
walls-off pool of one runner (started once for the file, well under a second) grades for real."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import Limits, Runner, Suite, load_suite
from grader.runtime.pool import RunnerPool
from grader.runtime.results import Outcome
from grader.runtime.runner import HASHSEEDS
from workbook.shared.manifest import Entry
from workbook.shared.manifest import TestSpec as Spec

BUILD = "96"

PROBES = """
from grader.suites.observe import Probes, attempt, need

PROBES = Probes()
PROBES.add("answer")(lambda ns: attempt(lambda: need(ns, "answer")()))
"""

JUDGES = """
from grader.suites.judging import Judges, Fail, ok

JUDGES = Judges()


@JUDGES.add("answer")
def _answer(obs):
    got = ok(obs("answer"), "answer()")
    if got != 42:
        raise Fail(f"answer() gave {got!r}")
"""

ENTRY = Entry(BUILD, "build", "toy", "toy.ipynb", "", tests=(Spec("answer", 1, "h"),))


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    builds = tmp_path_factory.mktemp("pool-builds")
    hidden = builds / f"build{BUILD}" / "hidden"
    hidden.mkdir(parents=True)
    (hidden / "probes.py").write_text(PROBES)
    (hidden / "test_judges.py").write_text(JUDGES)
    return load_suite(BUILD, builds)


@pytest.fixture(scope="module")
def pool() -> Iterator[RunnerPool]:
    """One started pool of one walls-off runner, shared by the file's tests that grade."""
    limits = Limits(probe_seconds=2.0, grace_seconds=0.5, load_seconds=2.0)
    with RunnerPool(1, limits, walls="off", learner_tests=False) as started:
        yield started


# ── bookkeeping, on runners that never start ────────────────────────────────────────────


def test_a_pool_has_at_least_one_runner_all_with_the_same_settings(tmp_path: Path) -> None:
    limits = Limits(probe_seconds=1.5)
    assert len(RunnerPool(0, walls="off").runners) == 1
    pool = RunnerPool(3, limits, hide=(tmp_path,), walls="off", learner_tests=False)
    assert len(pool.runners) == 3
    assert len({id(r) for r in pool.runners}) == 3
    for runner in pool.runners:
        assert runner.limits == limits
        assert runner.walls == "off"
        assert runner.learner_tests is False
        assert str(tmp_path) in runner.secrets  # a hidden folder, as text


def test_map_keeps_the_order_of_the_items_and_uses_no_more_runners_than_items() -> None:
    pool = RunnerPool(3, walls="off")
    used: list[Runner] = []
    lock = threading.Lock()

    def square(runner: Runner, n: int) -> int:
        with lock:
            used.append(runner)
        return n * n

    assert pool.map(square, [3, 1, 2]) == [9, 1, 4]
    assert pool.map(square, []) == []
    assert len(used) == 3
    pool_two = RunnerPool(4, walls="off")
    used.clear()
    assert pool_two.map(square, [5, 6]) == [25, 36]
    assert {id(r) for r in used} <= {id(r) for r in pool_two.runners[:2]}


def test_map_raises_the_first_exception_of_a_job() -> None:
    pool = RunnerPool(2, walls="off")

    def picky(runner: Runner, n: int) -> int:
        if n < 0:
            raise ValueError(f"negative: {n}")
        return n

    with pytest.raises(ValueError, match="negative: -1"):
        pool.map(picky, [1, -1, 2, -2])
    # Every runner is free again: a second map runs on all of them.
    assert pool.map(picky, [1, 2, 3]) == [1, 2, 3]


def test_a_runner_taken_from_the_pool_is_given_back_even_when_the_block_raises() -> None:
    pool = RunnerPool(1, walls="off")
    with pool.runner() as first:
        assert first is pool.runners[0]
    with pytest.raises(RuntimeError), pool.runner():
        raise RuntimeError("the job failed")
    with pool.runner() as again:  # would block forever had it not come back
        assert again is first


def test_closing_a_pool_that_never_started_does_nothing() -> None:
    pool = RunnerPool(2, walls="off")
    pool.close()
    pool.close()
    pool.wait_ready()  # nothing spawned: nothing to wait for


# ── a started pool, grading for real ────────────────────────────────────────────────────


def test_map_grades_each_submission_on_a_runner_of_the_pool(pool: RunnerPool, suite: Suite) -> None:
    sources = ["def answer():\n    return 42\n", "def answer():\n    return 41\n"]

    def grade(runner: Runner, source: str) -> tuple[int, Outcome, str]:
        result = runner.grade_source(BUILD, source, suite=suite, entry=ENTRY)
        test = result.test("answer")
        return test.points, test.kind, test.message

    right, wrong = pool.map(grade, sources)
    assert right == (1, Outcome.PASSED, "")
    assert wrong[:2] == (0, Outcome.WRONG)
    assert "answer() gave 41" in wrong[2]


def test_a_walls_off_pool_says_no_walls_are_up(pool: RunnerPool) -> None:
    isolation = pool.isolation()
    assert isolation.mode == "off"
    assert not isolation.filesystem and not isolation.network


def test_spawn_starts_servers_that_close_stops_and_closing_twice_is_harmless() -> None:
    pool = RunnerPool(1, walls="off", learner_tests=False)
    try:
        pool.spawn()
        runner = pool.runners[0]
        servers = [runner.server(h) for h in HASHSEEDS]  # the spawned ones, not new ones
        assert all(s.alive() for s in servers)
        pool.wait_ready()
        assert all(s.ready is not None for s in servers)
    finally:
        pool.close()
    assert not any(s.alive() for s in servers)
    pool.close()
