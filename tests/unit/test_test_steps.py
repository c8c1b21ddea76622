"""The self-check of a test-writing step, on the real notebooks' cells and a real child run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from workbook import teststep
from workbook.export import cell_source, cell_tags, exported_cells, read_notebook
from workbook.selfcheck import build_module, last_runs, learner_test_reports

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solutions" / "03_build_retry_and_sink.ipynb"
EXERCISE = ROOT / "exercises" / "03_build_retry_and_sink.ipynb"
REPLAY = "test_rerun_writes_zero_new_rows"

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


def report(answers_from: Path, test: str | None, name: str = REPLAY) -> str:
    """The step's report on `answers_from`'s saved cells, with `test` as the only test cell
    (None: the notebook's own test cells), as a kernel that ran nothing would give it."""
    cells = read_notebook(answers_from)["cells"]
    if test is not None:
        cells = [c for c in cells if "test" not in cell_tags(c)]
        cells.append({"cell_type": "code", "metadata": {"tags": ["test"]}, "source": test})
    tagged = last_runs(exported_cells(answers_from), cells, [])
    module = build_module(answers_from, tagged, cells)
    return "\n".join(learner_test_reports("03", [name], module, tagged, cells))


@pytest.mark.slow
@pytest.mark.parametrize("name", [REPLAY, "test_honors_retry_after"])
def test_the_solutions_tests_pass_and_catch_the_sabotage(name: str) -> None:
    start = time.perf_counter()
    text = report(SOLUTION, None, name)
    assert time.perf_counter() - start < 10  # measured ~2 s on an idle machine
    assert "✓ passes on your code" in text and "✓ fails, as it should" in text, text
    assert "This step is done" in text and "Mutation score:" in text


@pytest.mark.slow
def test_a_stub_reads_not_written_yet() -> None:
    stub = next(cell_source(c) for c in read_notebook(EXERCISE)["cells"] if "test" in cell_tags(c))
    text = report(SOLUTION, stub)
    assert f"{REPLAY} is not written yet" in text, text


@pytest.mark.slow
def test_a_weak_replay_test_misses_the_forgetful_sink_and_names_survivors() -> None:
    text = report(SOLUTION, WEAK)
    assert "✗ still passes when the sink forgets the keys it wrote" in text, text
    assert "Mutants your test lets through" in text and "Not done" in text


@pytest.mark.slow
def test_a_test_that_rejects_correct_code_says_so() -> None:
    text = report(SOLUTION, REJECTS)
    assert "fails on your own code" in text and "AssertionError" in text, text


def test_it_waits_for_the_seams_own_checks() -> None:
    text = report(EXERCISE, WEAK)
    assert "Not run yet: the visible checks of step sink" in text, text


def test_steps_gates_and_sabotage_are_per_seam() -> None:
    checks = teststep._buildchecks("03").CHECKS
    assert teststep.gate(checks, teststep.seams_of("03", REPLAY)) == ["sink"]
    assert teststep.gate(checks, ["with_retry"]) == ["with_retry"]
    names = [s.name for s in teststep.sabotage_for("03", ["with_retry"])]
    assert names == ["retry_ignores_retry_after"]
    with pytest.raises(KeyError):
        teststep.seams_of("03", "test_nothing")
