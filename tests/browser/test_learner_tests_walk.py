"""Build 03's test-writing step as a learner walks it in JupyterLab (issues 14 and 24): with
every answer right and the replay test unwritten, the "All together" cell says the build is not
done and names the test; a weak replay test (it checks the write, not the replay) is told, in
words, the behaviour it misses and its points; the strong one is told the step is done, and the
"All together" cell then counts it.

The notebook is a copy of the exercise (in its own folder) whose answer cells hold the
solution's answers, so every seam passes its visible checks and the step runs; the two tests
are typed here, as a learner would, and never read from the solution.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.browser.actions import run_cell, set_source
from tests.browser.harness import WORK, OpenNotebook
from tests.browser.test_build_03 import NAME, TRACEBACK

LEARNER = WORK / "learner-tests"
NOTEBOOK = LEARNER / "exercises" / NAME
REPLAY = "test_rerun_writes_zero_new_rows"
SABOTAGE = "the sink forgets the keys it wrote"

#: Loads once and asserts on that load: it passes whatever a replay would do.
WEAK = f"""# ✎ test: the replay test
from etl import MemorySink


async def {REPLAY}():
    destination = MemorySink()
    sink = IdempotentSink(destination)
    assert await sink.load([Row("Alpha", 1.0), Row("Beta", 2.0)]) == 2
    assert len(destination.rows) == 2
"""
#: The same, then the replay: it writes nothing, and a new row still gets in.
STRONG = f"""# ✎ test: the replay test
from etl import MemorySink


async def {REPLAY}():
    destination = MemorySink()
    sink = IdempotentSink(destination)
    rows = [Row("Alpha", 1.0), Row("Beta", 2.0)]
    assert await sink.load(rows) == 2
    assert await sink.load(rows) == 0
    assert destination.rows == rows
    assert await sink.load([rows[0], Row("Gamma", 3.0)]) == 1
    assert len(destination.rows) == 3
"""


def prepared() -> Path:
    """The exercise with the solution's answers in every answer cell, its test cells stubs."""
    exercise = json.loads((WORK / "exercises" / NAME).read_text(encoding="utf-8"))
    solution = json.loads((WORK / "solutions" / NAME).read_text(encoding="utf-8"))
    for mine, theirs in zip(exercise["cells"], solution["cells"], strict=True):
        if "answer" in mine["metadata"].get("tags", []):
            mine["source"] = theirs["source"]
    NOTEBOOK.parent.mkdir(parents=True, exist_ok=True)
    NOTEBOOK.write_text(json.dumps(exercise, indent=1, ensure_ascii=False) + "\n", "utf-8")
    return NOTEBOOK


def replay_cell(path: Path) -> int:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return next(
        i
        for i, c in enumerate(cells)
        if "test" in c["metadata"].get("tags", []) and f"def {REPLAY}" in "".join(c["source"])
    )


def together_cell(path: Path) -> int:
    """The "All together" cell: the self-check of the whole build."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return next(i for i, c in enumerate(cells) if 'selfcheck("03")' in "".join(c["source"]))


def attempt(nb: OpenNotebook, cell: int, code: str) -> str:
    """Type `code` over the test cell, run it, run the self-check cell under it: its report."""
    set_source(nb, cell, code)
    run_cell(nb, cell)
    text = run_cell(nb, cell + 1, timeout_ms=60_000)
    assert TRACEBACK not in text, text
    assert f"Self-check, build 03 (your {REPLAY}):" in text, text
    return text


def test_weak_replay_test_then_strong(open_notebook: Callable[[Path], OpenNotebook]) -> None:
    path = prepared()
    cell, together = replay_cell(path), together_cell(path)
    nb = open_notebook(path)
    nb.run_all()  # setup, every answer, and the stubs' "not written yet"
    assert f"{REPLAY} is not written yet" in nb.output_text(cell + 1)
    unwritten = nb.output_text(together)
    assert f"· {REPLAY}  [not done]" in unwritten, unwritten
    assert "Every step of this build is done" not in unwritten, unwritten

    weak = attempt(nb, cell, WEAK)
    assert "✓ passes on your code" in weak, weak
    assert f"✗ still passes when {SABOTAGE}" in weak, weak
    assert "it shows when you load the same rows twice into one sink" in weak, weak
    assert "Not done (0 of 3 points)" in weak, weak
    nb.screenshot("learner_tests_weak_replay_test", nb.cells.nth(cell + 1))

    strong = attempt(nb, cell, STRONG)
    assert f"✓ fails, as it should, when {SABOTAGE}" in strong, strong
    assert "✗" not in strong and "This step is done (3 of 3 points)" in strong, strong
    nb.screenshot("learner_tests_strong_replay_test", nb.cells.nth(cell + 1))
    counted = run_cell(nb, together, timeout_ms=60_000)
    assert f"✓ {REPLAY}" in counted, counted
