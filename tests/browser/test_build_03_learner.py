"""Build 03 worked the way issue 13 saw a learner work it: steps 3 and 5 first done WRONG, then
right, in JupyterLab, with the self-check cell under each step run after each attempt.

- the sink remembers keys before the inner write succeeds: its self-check must show
  ✗ failed_write_is_retried_in_full;
- with_retry sleeps after the last attempt (raising at t = 3.0 s, not the Predict's 1.4 s): its
  self-check must show ✗ attempts_run_out_after_n_minus_1_waits.

Saved, `make progress` must say the same (not done, naming the sink's check); fixed, both
self-checks show only ✓, and after a save `make progress` says build 03 is done.

The notebook is a copy (in its own folder, with its own `workbook.toml`, so `make progress`
can read exactly that copy) whose other steps hold the solution's answers; the code for steps
3 and 5 is typed here, as a learner would, and never read from the solution.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.browser.actions import run_cell, save, set_source
from tests.browser.harness import ROOT, WORK, OpenNotebook
from tests.browser.test_build_03 import NAME, TRACEBACK, Report, parse_report
from workbook.shared.manifest import copy_manifest

LEARNER = WORK / "learner"
NOTEBOOK = LEARNER / "exercises" / NAME
#: The visible checks that catch the two bugs (builds/build03/visible/answer_checks.py).
SINK_CHECK = "failed_write_is_retried_in_full"
RETRY_CHECK = "attempts_run_out_after_n_minus_1_waits"

SINK = '''# ✎ answer: step 3
class IdempotentSink:
    """Writes each row (by content_key) at most once."""

    def __init__(self, inner: Sink) -> None:
        self.inner = inner
        self._seen: set[str] = set()
        self._lock = asyncio.Lock()

    @classmethod
    def with_seen(cls, inner: Sink, keys: Iterable[str]) -> Self:
        sink = cls(inner)
        sink._seen.update(keys)
        return sink

    async def load(self, rows: Sequence[Any]) -> int:
        async with self._lock:
            fresh: dict[str, Any] = {}
            for row in rows:
                key = content_key(row)
                if key not in self._seen and key not in fresh:
                    fresh[key] = row
            if not fresh:
                return 0
WRITE
'''
#: The seed's order: keys remembered, then the write (which may fail).
SINK_WRONG = SINK.replace(
    "WRITE",
    "            self._seen.update(fresh)\n"
    "            return await self.inner.load(list(fresh.values()))",
)
SINK_RIGHT = SINK.replace(
    "WRITE",
    "            written = await self.inner.load(list(fresh.values()))\n"
    "            self._seen.update(fresh)\n"
    "            return written",
)

RETRY = """# ✎ answer: step 5
async def with_retry(policy: RetryPolicy, op: Callable[[], Awaitable[T]]) -> T:
    attempt = 1
    while True:
        try:
            return await op()
        except EtlError as err:
            if not err.is_transient() GIVE_UP_FIRST:
                raise
            wait = err.retry_after()
            await asyncio.sleep(backoff_delay(policy, attempt) if wait is None else wait)
GIVE_UP_LATE        attempt += 1
"""
#: Sleeps, then finds the attempts used up: one wait too many.
RETRY_WRONG = RETRY.replace(" GIVE_UP_FIRST", "").replace(
    "GIVE_UP_LATE", "            if attempt >= policy.max_attempts:\n                raise\n"
)
RETRY_RIGHT = RETRY.replace(" GIVE_UP_FIRST", " or attempt >= policy.max_attempts").replace(
    "GIVE_UP_LATE", ""
)


def prepared() -> Path:
    """The exercise with the solution's answers in every step but 3 and 5 (left as stubs)."""
    exercise = json.loads((WORK / "exercises" / NAME).read_text(encoding="utf-8"))
    solution = json.loads((WORK / "solutions" / NAME).read_text(encoding="utf-8"))
    for mine, theirs in zip(exercise["cells"], solution["cells"], strict=True):
        source = "".join(theirs["source"])
        if "answer" in mine["metadata"].get("tags", []) and not source.startswith(
            ("# ✎ answer: step 3", "# ✎ answer: step 5")
        ):
            mine["source"] = theirs["source"]
    NOTEBOOK.parent.mkdir(parents=True, exist_ok=True)
    copy_manifest(ROOT, LEARNER)
    NOTEBOOK.write_text(json.dumps(exercise, indent=1, ensure_ascii=False) + "\n", "utf-8")
    return NOTEBOOK


def cell_starting(path: Path, prefix: str) -> int:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith(prefix))


def progress() -> str:
    """`make progress` on the learner's folder (its manifest, its saved notebook)."""
    script = (
        "import sys; from pathlib import Path; from workbook.shared.manifest import load_manifest;"
        " from workbook.commands.progress import main; main(load_manifest(Path(sys.argv[1])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(LEARNER / "workbook.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def build_line(report: str) -> str:
    """Build 03's line of the `make progress` report."""
    lines = [line for line in report.splitlines() if line.startswith("03  ")]
    assert len(lines) == 1, report
    return lines[0]


def attempt(nb: OpenNotebook, answer: int, code: str) -> Report:
    """Type `code` over the answer cell, run it, run the self-check under it: its report."""
    set_source(nb, answer, code)
    run_cell(nb, answer)
    text = run_cell(nb, answer + 1)
    assert TRACEBACK not in text, text
    return parse_report(answer + 1, text)


def status(report: Report, name: str) -> str:
    found = [c for c in report.checks if c.name == name]
    assert found, f"no check named {name} in:\n{report.text}"
    return found[0].status


def test_wrong_then_right_in_steps_3_and_5(
    open_notebook: Callable[[Path], OpenNotebook],
) -> None:
    path = prepared()
    sink, retry = (
        cell_starting(path, "# ✎ answer: step 3"),
        cell_starting(path, "# ✎ answer: step 5"),
    )
    nb = open_notebook(path)
    nb.run_all()  # setup, the finished steps, and the stubs' "not done"

    wrong_sink = attempt(nb, sink, SINK_WRONG)
    assert status(wrong_sink, SINK_CHECK) == "failed", wrong_sink.text
    assert f"✗ {SINK_CHECK}" in wrong_sink.text
    wrong_retry = attempt(nb, retry, RETRY_WRONG)
    assert status(wrong_retry, RETRY_CHECK) == "failed", wrong_retry.text
    # The numbers: raised at t = 3.0 s where the Predict says 1.4 s.
    assert "3.0" in wrong_retry.text and "1.4" in wrong_retry.text, wrong_retry.text
    nb.screenshot("03_learner_wrong_with_retry", nb.cells.nth(retry + 1))

    assert save(nb) == 200
    saved = progress()
    assert not build_line(saved).endswith(" done"), saved
    assert f"✗ {SINK_CHECK} [failed]" in saved, saved

    for answer, code in ((sink, SINK_RIGHT), (retry, RETRY_RIGHT)):
        report = attempt(nb, answer, code)
        assert report.passed == report.total > 0, report.text
        assert all(c.status == "passed" for c in report.checks), report.text
    nb.screenshot("03_learner_right_with_retry", nb.cells.nth(retry + 1))

    assert save(nb) == 200
    stored = json.loads(path.read_text(encoding="utf-8"))["cells"]
    # What was typed is what was saved (the editor added no indent and closed no bracket).
    assert "".join(stored[sink]["source"]).rstrip("\n") == SINK_RIGHT.rstrip("\n")
    assert "".join(stored[retry]["source"]).rstrip("\n") == RETRY_RIGHT.rstrip("\n")
    finished = progress()
    # Every answer is right, but the tests the learner writes are not written: not done yet.
    assert build_line(finished).endswith(" 19 of 21"), finished
    assert "test_rerun_writes_zero_new_rows [not done]" in finished, finished
