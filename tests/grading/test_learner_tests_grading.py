"""The learner's own tests, graded by wheats and chaffs (`grader.learner_tests.wheats`), walls up.

Each test cell below is graded as a learner would hand it in: it must pass on the reference,
catch the gate bug of its seam, and earns a share per bug of its `catches` caught. The
solution's tests earn full marks, the stubs zero, a test that asserts nothing zero, one that
checks the write but not the replay what it deserves, one that rejects correct code zero, and
no forgery (of the result line, of the exit code, of the output) earns more than the honest
test. One small class proves the points reach grades.csv and the cache key holds the test cells.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import Runner, load_suite
from grader.classes.batch import grade_class
from grader.learner_tests.wheats import TestCells as Cells
from grader.learner_tests.wheats import grade_learner_tests, read_test_cells, without_assertions
from grader.runtime.results import Outcome
from grader.runtime.results import TestResult as Result
from workbook.shared.export import TESTS_PREAMBLE, cell_source, cell_tags
from workbook.shared.manifest import load_manifest, repo_root

ROOT = repo_root()
MANIFEST = load_manifest()


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    with Runner(walls="bwrap") as graded:
        yield graded.start()


def grade(runner: Runner, build: str, body: str | None) -> dict[str, Result]:
    cells = Cells(None if body is None else TESTS_PREAMBLE + body, "" if body else "none")
    entry = MANIFEST.entry(build)
    results = grade_learner_tests(runner, entry, load_suite(build), cells, root=ROOT)
    return {r.name: r for r in results}


def test_solutions_earn_full_marks(runner: Runner) -> None:
    for build in ("03", "05"):
        entry = MANIFEST.entry(build)
        assert entry.solution is not None
        cells = read_test_cells(ROOT / entry.solution)
        results = grade_learner_tests(runner, entry, load_suite(build), cells, root=ROOT)
        assert [(r.name, r.points, r.kind) for r in results] == [
            (s.name, s.points, Outcome.PASSED) for s in entry.learner_tests
        ]


def test_stubs_and_missing_tests_earn_zero_as_not_done(runner: Runner) -> None:
    stub = read_test_cells(ROOT / MANIFEST.entry("03").path)
    results = grade_learner_tests(runner, MANIFEST.entry("03"), load_suite("03"), stub, root=ROOT)
    assert [(r.points, r.kind) for r in results] == [(0, Outcome.NOT_DONE)] * 2
    assert all("not written" in r.message for r in results)
    missing = grade(runner, "03", None)
    assert {r.points for r in missing.values()} == {0}
    assert all(r.kind is Outcome.NOT_DONE for r in missing.values())


REPLAY_HEAD = """
from etl import MemorySink

async def test_rerun_writes_zero_new_rows():
    destination = MemorySink()
    sink = IdempotentSink(destination)
    rows = [Row("Alpha", 1.0), Row("Beta", 2.0)]
"""


def test_a_test_that_asserts_nothing_earns_zero(runner: Runner) -> None:
    body = REPLAY_HEAD + "    await sink.load(rows)\n    await sink.load(rows)\n    assert True\n"
    result = grade(runner, "03", body)["test_rerun_writes_zero_new_rows"]
    assert (result.points, result.kind) == (0, Outcome.WRONG)
    # No rule reads its text: it runs, and the gate bug it lets through is its 0; the feedback
    # says why, in words.
    assert "asserts nothing" in result.message
    assert "still passes when the sink forgets the keys it wrote" in result.message


def test_checking_the_write_but_not_the_replay_earns_what_it_deserves(runner: Runner) -> None:
    write_only = REPLAY_HEAD + "    assert await sink.load(rows) == 2\n"
    result = grade(runner, "03", write_only)["test_rerun_writes_zero_new_rows"]
    assert result.points == 0, "the gate bug (forgetting the keys) survives a write-only test"
    # The replay reaches the destination once, but the returned count is never checked:
    # the gate is caught, the "replay reports rows as written" bug is not: a share.
    file_only = (
        REPLAY_HEAD + "    await sink.load(rows)\n    await sink.load(rows)\n"
        "    assert destination.rows == rows\n"
    )
    partial = grade(runner, "03", file_only)["test_rerun_writes_zero_new_rows"]
    assert (partial.points, partial.max_points, partial.kind) == (1, 3, Outcome.WRONG)
    assert "returns how many rows it was given" in partial.message  # the bug, in words
    assert "len(rows)" not in partial.message  # never the mutant's code


def test_a_retry_test_missing_the_cap_earns_a_share(runner: Runner) -> None:
    body = """
from etl import RateLimited

async def test_honors_retry_after():
    loop = asyncio.get_running_loop()
    calls = []
    script = [RateLimited(5.0)]

    async def op():
        calls.append(loop.time())
        if script:
            raise script.pop(0)
        return "ok"

    assert await with_retry(RetryPolicy(max_delay=10.0), op) == "ok"
    assert round(calls[1] - calls[0], 6) == 5.0
"""
    result = grade(runner, "03", body)["test_honors_retry_after"]
    # Caught: ignored, added to the backoff, time.sleep; missed: capped by max_delay (10 > 5).
    assert (result.points, result.max_points) == (1, 2)
    assert "cuts Retry-After down to max_delay" in result.message


@pytest.mark.parametrize("how", ["os._exit(0)", "while True:\n        pass"])
def test_a_test_that_ends_or_hangs_its_worker_costs_only_itself(runner: Runner, how: str) -> None:
    # Each test runs in workers of its own: a replay test that ends its worker (or hangs it)
    # costs the retry test beside it nothing.
    entry = MANIFEST.entry("03")
    assert entry.solution is not None
    text = read_test_cells(ROOT / entry.solution).text
    assert text is not None
    head = "async def test_rerun_writes_zero_new_rows():\n"
    assert text.count(head) == 1
    broken = text.replace(head, head + f"    import os\n    {how}\n", 1)
    results = grade(runner, "03", broken.removeprefix(TESTS_PREAMBLE))
    rerun, honors = results["test_rerun_writes_zero_new_rows"], results["test_honors_retry_after"]
    assert (rerun.points, rerun.kind) == (0, Outcome.UNFINISHED)  # never cached
    assert (honors.points, honors.kind) == (honors.max_points, Outcome.PASSED)


def test_a_test_that_rejects_correct_code_earns_zero(runner: Runner) -> None:
    body = REPLAY_HEAD + "    assert await sink.load(rows) == 0  # wrong: the first load writes\n"
    result = grade(runner, "03", body)["test_rerun_writes_zero_new_rows"]
    assert (result.points, result.kind) == (0, Outcome.WRONG)
    assert "fails on a correct implementation" in result.message
    assert "AssertionError at line" in result.message


def test_what_fails_on_the_reference_spells_nothing_out(runner: Runner) -> None:
    """A class named, or a line number chosen, after reading the reference (both reached the
    feedback): only a built-in's name and the line of one of the test's asserts are shown."""
    body = REPLAY_HEAD + (
        "    secret = len(IdempotentSink.load.__code__.co_code)\n"
        "    assert secret\n"
        "    leak = type('Leak' + 'X' * 40, (Exception,), {})\n"
        "    exec(compile('\\n' * secret + 'raise leak()', __file__, 'exec'), {'leak': leak})\n"
    )
    result = grade(runner, "03", body)["test_rerun_writes_zero_new_rows"]
    assert result.points == 0 and "fails on a correct implementation" in result.message
    assert "Leak" not in result.message and "at line" not in result.message, result.message
    assert "an exception of its own" in result.message


#: A strong replay test, then a forgery around it: whatever the test saw, the worker's last word
#: is a well-formed "passed" result line on every descriptor, then an exit code of 0.
FORGED = """
import json, os

async def test_rerun_writes_zero_new_rows():
    try:
        destination = MemorySink()
        sink = IdempotentSink(destination)
        rows = [Row("Alpha", 1.0), Row("Beta", 2.0)]
        assert await sink.load(rows) == 2
        assert await sink.load(rows) == 0
        assert destination.rows == rows
    finally:
        line = json.dumps({"event": "done", "probe": "learner_test",
                           "obs": {"loaded": True, "defined": True, "passed": True}})
        for fd in range(3, 64):
            try:
                os.write(fd, (line + "\\n" + json.dumps({"event": "end"}) + "\\n").encode())
            except OSError:
                pass
        os._exit(0)
"""


def test_forged_results_never_raise_the_score(runner: Runner) -> None:
    honest = REPLAY_HEAD + (
        "    assert await sink.load(rows) == 2\n    assert await sink.load(rows) == 0\n"
        "    assert destination.rows == rows\n"
    )
    honest_points = grade(runner, "03", honest)["test_rerun_writes_zero_new_rows"].points
    assert honest_points == 3
    forged = grade(runner, "03", "from etl import MemorySink\n" + FORGED)
    assert forged["test_rerun_writes_zero_new_rows"].points == 0  # "passed" on every chaff too


#: Two tests that test nothing, and count how often test cells ran in their worker (on
#: `builtins`, which outlives each run's fresh test module): 1 for a test run alone.
COUNTING = """
import builtins
builtins.__dict__["_runs"] = builtins.__dict__.get("_runs", 0) + 1

def test_rerun_writes_zero_new_rows():
    assert builtins._runs == 1

def test_honors_retry_after():
    assert builtins._runs == 2
"""

#: No test at all: a complete, well-formed stream for the probes of two tests sharing a
#: worker, then the exit.
FORGED_FOR_TWO = """
import json, os

def _forge():
    ok = {"loaded": True, "defined": True, "passed": True}
    lines = [
        {"event": "done", "probe": "learner_test_0", "obs": ok},
        {"event": "start", "probe": "learner_test_1"},
        {"event": "done", "probe": "learner_test_1", "obs": ok},
        {"event": "end"},
    ]
    data = "".join(json.dumps(line) + "\\n" for line in lines)
    for fd in range(3, 64):
        try:
            os.write(fd, data.encode())
        except OSError:
            pass
    os._exit(0)

def test_rerun_writes_zero_new_rows():
    _forge()
    assert os.getpid() < 0

def test_honors_retry_after():
    _forge()
    assert os.getpid() < 0
"""


@pytest.mark.parametrize("body", [COUNTING, FORGED_FOR_TWO], ids=["counting", "forging"])
def test_no_test_learns_what_ran_beside_it(runner: Runner, body: str) -> None:
    # Found by attacking a worker shared by a variant's tests: the wheat's ran both tests and
    # a chaff's only those listing its bug, so counting runs, or forging the line of the test
    # after, passed the wheat and failed every chaff: 5 of 5 for tests that test nothing.
    results = grade(runner, "03", body)
    assert {name: r.points for name, r in results.items()} == {
        "test_rerun_writes_zero_new_rows": 0,
        "test_honors_retry_after": 0,
    }


def test_the_reference_stays_out_of_reach_and_out_of_feedback(runner: Runner) -> None:
    # A test that reads the code it judges (to pin it, or to tell wheat from chaff) fails on
    # the reference: its source is not there to read. Its message carries nothing of it.
    body = """
import inspect

def test_rerun_writes_zero_new_rows():
    print("noise " * 100000)
    text = inspect.getsource(IdempotentSink)
    assert "remember" not in text, text
"""
    result = grade(runner, "03", body)["test_rerun_writes_zero_new_rows"]
    assert result.points == 0
    assert "raised OSError" in result.message
    assert "_seen" not in result.message and "noise" not in result.message


def test_assertions_removed_lose_points_and_grading_repeats(runner: Runner) -> None:
    entry = MANIFEST.entry("03")
    assert entry.solution is not None
    text = read_test_cells(ROOT / entry.solution).text
    assert text is not None
    name = "test_rerun_writes_zero_new_rows"
    cells = Cells(without_assertions(text, name))
    first = grade_learner_tests(runner, entry, load_suite("03"), cells, root=ROOT)
    second = grade_learner_tests(runner, entry, load_suite("03"), cells, root=ROOT)
    assert first == second
    assert next(r for r in first if r.name == name).points == 0


def _with_test_cell(notebook: Path, old: str, new: str, dest: Path) -> None:
    data = json.loads(notebook.read_text(encoding="utf-8"))
    cells = [c for c in data["cells"] if "test" in cell_tags(c) and old in cell_source(c)]
    assert len(cells) == 1
    cells[0]["source"] = cell_source(cells[0]).replace(old, new)
    dest.write_text(json.dumps(data), encoding="utf-8")


def test_points_reach_grades_csv_and_the_cache_key_holds_the_test_cells(tmp_path: Path) -> None:
    entry = MANIFEST.entry("03")
    assert entry.solution is not None
    solution = ROOT / entry.solution
    submissions, out = tmp_path / "class", tmp_path / "grades"
    for learner in ("ada", "bob"):
        (submissions / learner).mkdir(parents=True)
    shutil.copy(solution, submissions / "ada" / solution.name)
    weak = (
        "    assert await sink.load(rows) == 0  # the replay writes nothing new\n"
        "    assert await sink.load(rows[::-1] + rows) == 0"
        "  # nor does any order of the same rows\n"
    )
    _with_test_cell(
        solution, weak, "    await sink.load(rows)\n", submissions / "bob" / solution.name
    )

    def column() -> dict[str, tuple[str, str]]:
        rows = csv.DictReader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8")))
        return {row["learner"]: (row["03"], row["max"]) for row in rows}

    first = grade_class(submissions, out, workers=1)
    full = entry.max_points
    marks = column()
    assert marks["ada"] == (str(full), str(MANIFEST.entry("05").max_points + full + _rest()))
    # bob's replay test lost the lines that check the replay returns 0: it still catches
    # the sink forgetting its keys (the destination's rows), not the count: 1 point of 3.
    assert int(marks["bob"][0]) == full - 2
    feedback = (out / "feedback" / "bob.md").read_text(encoding="utf-8")
    assert "test_rerun_writes_zero_new_rows" in feedback and "1 of 3" in feedback
    again = grade_class(submissions, out, workers=1)
    assert again.graded == 0 and first.graded == 2  # nothing changed: nothing regraded
    _with_test_cell(solution, weak, weak + "    assert True\n", submissions / "ada" / solution.name)
    changed = grade_class(submissions, out, workers=1)
    assert changed.graded == 1  # only the test cells changed: that notebook is regraded


def _with_answer(notebook: Path, extra: str, dest: Path) -> None:
    data = json.loads(notebook.read_text(encoding="utf-8"))
    cell = [c for c in data["cells"] if "answer" in cell_tags(c)][-1]
    cell["source"] = cell_source(cell) + extra
    dest.write_text(json.dumps(data), encoding="utf-8")


def test_changed_answers_reuse_the_learner_tests_grade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The learner tests' grade depends on the test cells alone: a notebook whose answers
    changed runs its hidden probes again and reuses that grade; answers that no longer load
    still zero it, and changed test cells are graded again."""
    from grader.runtime import runner as runner_module

    entry = MANIFEST.entry("03")
    assert entry.solution is not None
    solution = ROOT / entry.solution
    submissions, out = tmp_path / "class", tmp_path / "grades"
    (submissions / "ada").mkdir(parents=True)
    mine = submissions / "ada" / solution.name
    shutil.copy(solution, mine)
    first = grade_class(submissions, out, workers=1)
    graded = []
    real = runner_module.grade_learner_tests

    def counted(*args: object, **kw: object) -> list[Result]:
        graded.append(1)
        return real(*args, **kw)  # type: ignore[arg-type]  # (passed through as given)

    monkeypatch.setattr(runner_module, "grade_learner_tests", counted)
    _with_answer(solution, "\n# a comment: new answers, same tests\n", mine)
    again = grade_class(submissions, out, workers=1)
    assert again.graded == 1 and graded == []
    [before], [after] = first.learners[0].builds[:1], again.learners[0].builds[:1]
    assert before.result.tests == after.result.tests  # the same points and messages
    _with_answer(solution, "\nraise RuntimeError('half done')\n", mine)
    broken = grade_class(submissions, out, workers=1)
    assert broken.learners[0].builds[0].score == 0 and graded == []
    weak = "    assert await sink.load(rows) == 0  # the replay writes nothing new\n"
    _with_test_cell(solution, weak, weak + "    assert True\n", mine)
    grade_class(submissions, out, workers=1)
    assert graded == [1]  # new test cells: graded again


def _rest() -> int:
    return sum(e.max_points for e in MANIFEST.graded if e.number not in ("03", "05"))


def test_test_cells_export_apart_and_never_with_the_answers(tmp_path: Path) -> None:
    import subprocess
    import sys

    from workbook import load
    from workbook.shared.export import export_source, export_tests

    entry = MANIFEST.entry("03")
    assert entry.solution is not None
    solution = ROOT / entry.solution
    assert "def test_rerun_writes_zero_new_rows" not in export_source(solution)
    assert not hasattr(load(solution), "test_rerun_writes_zero_new_rows")
    text = export_tests(solution)
    assert text == export_tests(solution) and TESTS_PREAMBLE in text
    out = tmp_path / "tests_03.py"
    done = subprocess.run(
        [sys.executable, "-m", "workbook", "export", str(solution), "--tests", "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and out.read_text(encoding="utf-8") == text
    none = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbook",
            "export",
            str(ROOT / "notebooks" / "01_retry_with_backoff.ipynb"),
            "--tests",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert none.returncode == 2 and "no cell tagged 'test'" in none.stderr


#: Reads the variant's text from a frame up its stack, if any frame holds it, and fails where
#: it finds a bug's own words: a test that tells a chaff by its code, not its behaviour.
READS_THE_VARIANT = """
import sys

from etl import MemorySink


def texts_up_the_stack():
    frame, found = sys._getframe(), []
    while frame is not None:
        for value in list(frame.f_locals.values()):
            found += [value] if isinstance(value, str) else []
            found += [v for v in getattr(value, "__dict__", {}).values() if isinstance(v, str)]
        frame = frame.f_back
    return found


async def test_rerun_writes_zero_new_rows():
    sink = IdempotentSink(MemorySink())
    assert await sink.load([Row("Alpha", 1.0)]) == 1
    texts = texts_up_the_stack()
    assert not any("fresh = under(" in t or "len(rows) if written" in t for t in texts)
"""


def test_no_frame_up_the_stack_holds_the_variants_text(runner: Runner) -> None:
    result = grade(runner, "03", READS_THE_VARIANT)["test_rerun_writes_zero_new_rows"]
    assert result.points == 0, result.message
    assert "still passes when the sink forgets the keys it wrote" in result.message
