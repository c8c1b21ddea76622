"""The self-check of a test-writing step, on the real notebooks' cells and a real child run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from workbook.checking import teststep
from workbook.selfcheck import build_module, last_runs, learner_test_reports
from workbook.shared.buildfolder import answer_checks, written_tests
from workbook.shared.export import cell_source, cell_tags, exported_cells, read_notebook

SOLUTION = ROOT / "solutions" / "03_build_retry_and_sink.ipynb"
EXERCISE = ROOT / "exercises" / "03_build_retry_and_sink.ipynb"
REPLAY = "test_rerun_writes_zero_new_rows"
SOLUTION_07 = ROOT / "solutions" / "07_build_replay_safe_batch.ipynb"
EXERCISE_07 = ROOT / "exercises" / "07_build_replay_safe_batch.ipynb"
FIXED_POINT = "test_replay_reaches_a_fixed_point"
STATE_MACHINE = "test_state_machine_equals_one_clean_run"

WEAK = f"""
from etl import MemorySink
async def {REPLAY}():
    destination = MemorySink()
    assert await IdempotentSink(destination).load([Row("a", 1.0)]) == 1
"""
REJECTS = f"""
from etl import MemorySink
async def {REPLAY}():
    sink = IdempotentSink(MemorySink())
    await sink.load([Row("a", 1.0)])
    assert await sink.load([Row("a", 1.0)]) == 1
"""


def report(answers_from: Path, test: str | None, name: str = REPLAY, build: str = "03") -> str:
    """The step's report on `answers_from`'s saved cells, with `test` as the only test cell
    (None: the notebook's own test cells), as a kernel that ran nothing would give it."""
    cells = read_notebook(answers_from)["cells"]
    if test is not None:
        cells = [c for c in cells if "test" not in cell_tags(c)]
        cells.append({"cell_type": "code", "metadata": {"tags": ["test"]}, "source": test})
    tagged = last_runs(exported_cells(answers_from), cells, [])
    module = build_module(answers_from, tagged, cells)
    return "\n".join(learner_test_reports(build, [name], module, tagged, cells))


@pytest.mark.slow
@pytest.mark.parametrize("name", [REPLAY, "test_honors_retry_after"])
def test_the_solutions_tests_pass_and_catch_the_sabotage(name: str) -> None:
    start = time.perf_counter()
    text = report(SOLUTION, None, name)
    assert time.perf_counter() - start < 10  # measured ~2 s on an idle machine
    assert "✓ passes on your code" in text and "✓ fails, as it should" in text, text
    assert "This step is done" in text and "points" in text


@pytest.mark.slow
def test_a_stub_reads_not_written_yet() -> None:
    stub = next(cell_source(c) for c in read_notebook(EXERCISE)["cells"] if "test" in cell_tags(c))
    text = report(SOLUTION, stub)
    assert f"{REPLAY} is not written yet" in text, text


@pytest.mark.slow
def test_a_weak_replay_test_misses_the_forgetful_sink_and_names_survivors() -> None:
    text = report(SOLUTION, WEAK)
    assert "✗ still passes when the sink forgets the keys it wrote" in text, text
    assert "Not done (0 of 3 points)" in text


@pytest.mark.slow
def test_a_test_that_rejects_correct_code_says_so() -> None:
    text = report(SOLUTION, REJECTS)
    assert "fails on your own code" in text and "AssertionError" in text, text


def test_it_waits_for_the_seams_own_checks() -> None:
    text = report(EXERCISE, WEAK)
    assert "Not run yet: the visible checks of step sink" in text, text


def test_steps_gates_and_sabotage_are_per_seam() -> None:
    checks = answer_checks("03")
    assert teststep.gate(checks, teststep.seams_of("03", REPLAY)) == ["sink"]
    assert teststep.gate(checks, ["with_retry"]) == ["with_retry"]
    names = [b.name for b in teststep.bugs_of("03", "test_honors_retry_after")]
    assert names[0] == "retry_after_ignored"
    assert teststep.contract_of("03", REPLAY) == []
    assert [c.name for c in teststep.contract_of("07", FIXED_POINT)] == [
        "unordered_selects_reversed"
    ]
    with pytest.raises(KeyError):
        teststep.seams_of("03", "test_nothing")


# ───────────────────────────────────────────────── build 07: a replay test and a state machine

#: Checks the first delivery only: it says nothing about what a replay does.
WEAK_07 = f"""
def {FIXED_POINT}():
    conn = open_store(":memory:")
    items = [{{"id": "a", "version": 1, "payload": {{}}}}]
    outcome = ingest_page(
        conn, tenant="t", source="s", items=items, expected_cursor=None, next_cursor="p1"
    )
    assert outcome == PageOutcome(1, 0, 0, True, "p1")
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", [FIXED_POINT, STATE_MACHINE])
def test_the_07_solutions_tests_pass_and_catch_their_sabotage(name: str) -> None:
    start = time.perf_counter()
    text = report(SOLUTION_07, None, name, "07")
    assert time.perf_counter() - start < 10  # measured 1.3-1.6 s on an idle machine
    assert "✓ passes on your code" in text and "✗" not in text, text
    assert "This step is done (3 of 3 points)" in text


@pytest.mark.slow
def test_a_07_test_of_the_write_alone_misses_the_missing_compare() -> None:
    text = report(SOLUTION_07, WEAK_07, FIXED_POINT, "07")
    assert "✗ still passes when the checkpoint moves wherever it stood" in text, text
    assert "Not done" in text


@pytest.mark.slow
def test_the_07_stubs_read_not_written_yet() -> None:
    cells = read_notebook(EXERCISE_07)["cells"]
    stubs = "\n\n".join(cell_source(c) for c in cells if "test" in cell_tags(c))
    for name in (FIXED_POINT, STATE_MACHINE):
        assert f"{name} is not written yet" in report(SOLUTION_07, stubs, name, "07")


def test_07_keeps_its_test_steps_beside_its_checks() -> None:
    from builds.build07.visible import written_tests as build07_tests

    assert written_tests("07") is build07_tests
    assert teststep.seams_of("07", STATE_MACHINE) == ("ingest_page",)
    assert teststep.gate(answer_checks("07"), ("ingest_page",)) == ["ingest_page"]
    every = [b.name for b in teststep.bugs_of("07", STATE_MACHINE)]
    assert every == [
        "cas_dropped",
        "version_check_dropped",
        "accumulate_instead_of_replace",
        "loser_keeps_its_items",
    ]


@pytest.mark.slow
def test_advice_is_only_lines_the_test_ran_and_says_what_the_checks_think() -> None:
    # Build 05's own test lets one mutant through, `path = Path(path)` deleted, which
    # behaves like the solution (`open` takes a str): it is advice, never the verdict.
    solution_05 = SOLUTION.parent / "05_build_paginated_source.ipynb"
    text = report(solution_05, None, name="test_second_run_writes_nothing", build="05")
    assert "Advice, not graded" in text and "deleted `path = Path(path)`" in text, text
    assert "This step is done" in text
    # A weak test gets no advice: the bugs it misses come first.
    assert "Advice" not in report(SOLUTION, WEAK)
