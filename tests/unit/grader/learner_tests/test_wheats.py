"""`grader.learner_tests.wheats`: grading the learner's own tests by wheats and chaffs.

The pure parts (reading test cells, finding tests, the mutant without assertions) on small
inputs; `grade_learner_tests` on build 03's real learner tests, its real bugs and wheats, with a
stand-in runner that answers as a worker would from which bugs are laid over the variant (the
real workers, walls up, are in ``tests/grading/test_learner_tests_grading.py``)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any, cast

import pytest

from grader.learner_tests.wheatprobe import JOB
from grader.learner_tests.wheats import (
    SECOND_WHEAT,
    TEST_SECONDS,
    WHEAT,
    can_fail,
    defined_tests,
    grade_learner_tests,
    probe_suite,
    read_test_cells,
    reference_source,
    second_wheat,
    without_assertions,
)
from grader.learner_tests.wheats import TestCells as Cells
from grader.runtime.results import GRADER_FAULT, Outcome, ProbeRecord, ProbeRun
from grader.runtime.results import TestResult as Result
from grader.runtime.runner import Runner
from grader.suites.loading import Suite
from tests.conftest import ROOT, NotebookFactory
from workbook.checking import teststep
from workbook.shared.export import TESTS_PREAMBLE, export_source
from workbook.shared.manifest import load_manifest

ENTRY = load_manifest().entry("03")
REPLAY = ENTRY.learner_tests[0]  # test_rerun_writes_zero_new_rows: gate + one more bug
BUGS = {b.name: b.source for b in teststep.bugs_of("03", REPLAY.name)}

#: Test cells holding the replay test (what it does does not matter to the stand-in runner).
REPLAY_CELLS = Cells(
    TESTS_PREAMBLE
    + f"\n\nasync def {REPLAY.name}():\n"
    + "    sink = IdempotentSink(MemorySink())\n"
    + "    await sink.load([])\n"
    + "    assert await sink.load([]) == 0\n"
)


# ── reading and reading into test cells ─────────────────────────────────────────────────


def test_test_cells_are_exported_with_a_header_that_does_not_name_the_notebook(
    make_notebook: NotebookFactory,
) -> None:
    cells = (("answer", "x = 1\n"), ("test", "def test_one():\n    assert x == 1\n"))
    first = read_test_cells(make_notebook(*cells, name="alice.ipynb"))
    second = read_test_cells(make_notebook(*cells, name="bob.ipynb"))
    assert first.problem == "" and first.text is not None
    assert first.text.startswith("# Exported\n# Only the cells tagged `test`")
    assert TESTS_PREAMBLE in first.text and "def test_one():" in first.text
    assert "alice" not in first.text
    assert first == second  # the same cells under another name: the same submission


def test_a_notebook_without_test_cells_gives_no_text_and_says_why(
    make_notebook: NotebookFactory,
) -> None:
    assert read_test_cells(make_notebook(("answer", "x = 1\n"))) == Cells(
        None, "no cell tagged test"
    )


def test_a_test_cell_that_does_not_compile_gives_no_text_and_names_the_cell(
    make_notebook: NotebookFactory,
) -> None:
    cells = read_test_cells(make_notebook(("test", "def test_one(:\n    pass\n")))
    assert cells.text is None
    assert "SyntaxError" in cells.problem and "nb.ipynb" in cells.problem


def test_a_file_that_is_no_notebook_gives_no_text(tmp_path: Path) -> None:
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{ not json")
    cells = read_test_cells(broken)
    assert cells.text is None and cells.problem


def test_defined_tests_are_the_top_level_functions_and_classes() -> None:
    text = (
        "import math\n\n\ndef helper():\n    def inner():\n        pass\n\n\n"
        "async def test_a():\n    pass\n\n\nclass TestB:\n    pass\n\n\nx = 1\n"
    )
    found = defined_tests(text)
    assert sorted(found) == ["TestB", "helper", "test_a"]
    assert isinstance(found["test_a"], ast.AsyncFunctionDef)


def test_defined_tests_of_nothing_or_of_text_that_does_not_parse_are_none() -> None:
    assert defined_tests(None) == {}
    assert defined_tests("def test_a(:\n") == {}
    assert defined_tests("x = 1\0\n") == {}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("assert f() == 1", True),
        ("assert True", False),
        ("f()", False),
        ("raise AssertionError('no')", True),
        ("self.assertEqual(f(), 1)", True),
        ("with pytest.raises(ValueError):\n        f()", True),
        ("check()", True),  # the helper it calls asserts
    ],
)
def test_can_fail_looks_for_an_assertion_in_the_test_and_the_helpers_it_names(
    body: str, expected: bool
) -> None:
    text = f"def check():\n    assert f() == 1\n\n\ndef test_a():\n    {body}\n"
    assert can_fail(text, "test_a") is expected


def test_can_fail_follows_helpers_that_call_each_other_without_looping() -> None:
    text = "def a():\n    b()\n\n\ndef b():\n    a()\n\n\ndef test_x():\n    a()\n"
    assert can_fail(text, "test_x") is False
    assert can_fail(text, "test_missing") is False


def test_without_assertions_keeps_the_asserted_expressions_of_that_test_only() -> None:
    text = (
        "def test_a():\n    assert f(1) == 2, 'why'\n    g()\n\n\ndef test_b():\n    assert h()\n"
    )
    mutant = without_assertions(text, "test_a")
    tree = ast.parse(mutant)
    test_a, test_b = tree.body
    assert not any(isinstance(n, ast.Assert) for n in ast.walk(test_a))
    assert "f(1) == 2" in mutant and "g()" in mutant  # side effects kept
    assert isinstance(cast(ast.FunctionDef, test_b).body[0], ast.Assert)
    assert not can_fail(mutant, "test_a") and can_fail(mutant, "test_b")


def test_without_assertions_of_a_name_not_there_changes_nothing_but_layout() -> None:
    text = "def test_a():\n    assert f()\n"
    assert without_assertions(text, "test_z") == ast.unparse(ast.parse(text)) + "\n"


# ── the wheats ──────────────────────────────────────────────────────────────────────────


def test_the_second_wheat_is_the_builds_hidden_wheat_file(tmp_path: Path) -> None:
    hidden = tmp_path / "builds" / "build42" / "hidden"
    hidden.mkdir(parents=True)
    (hidden / "wheat.py").write_text("def seam():\n    return 'another way'\n")
    assert second_wheat(tmp_path, "42") == "def seam():\n    return 'another way'\n"
    with pytest.raises(FileNotFoundError):
        second_wheat(tmp_path, "41")


def test_the_reference_is_the_solution_notebooks_export() -> None:
    assert ENTRY.solution is not None
    solution = ROOT / ENTRY.solution
    assert reference_source(solution) == export_source(solution)


def test_the_probe_suite_runs_the_wheatprobe_for_the_build() -> None:
    suite = probe_suite("03")
    assert suite.build == "03"
    assert suite.probes_path.name == "wheatprobe.py"
    assert suite.probes.names == ["learner_test"]
    assert len(suite.judges) == 0


# ── grading, with a stand-in runner ─────────────────────────────────────────────────────


@dataclasses.dataclass
class StandIn:
    """Answers `run_probes` as a worker would: the test passes unless the variant holds a bug
    it catches (`catches`); `wheat` overrides the report on the correct variants."""

    catches: set[str]
    wheat: dict[str, Any] | None = None
    load_error: str | None = None
    variants: list[str] = dataclasses.field(default_factory=list)
    seconds: list[float | None] = dataclasses.field(default_factory=list)

    def run_probes(
        self, source: str, suite: Suite, *, probe_seconds: float | None = None
    ) -> ProbeRun:
        assert suite.probes.names == ["learner_test"]
        self.variants.append(source)
        self.seconds.append(probe_seconds)
        laid = {name for name, text in BUGS.items() if text in source}
        if laid & self.catches:
            report: dict[str, Any] = {"loaded": True, "defined": True, "passed": False}
        elif not laid and self.wheat is not None:
            report = self.wheat
        else:
            report = {"loaded": True, "defined": True, "passed": True}
        run = ProbeRun(load_error=self.load_error)
        if "status" in report:
            run.records["learner_test"] = ProbeRecord("learner_test", report["status"])
        elif self.load_error is None:
            run.records["learner_test"] = ProbeRecord("learner_test", "done", report)
        return run

    def discard(self, run: ProbeRun) -> None:
        pass


def grade(stand_in: StandIn, cells: Cells = REPLAY_CELLS) -> Result:
    """The replay test's result (build 03's first learner test) under `stand_in`."""
    entry = dataclasses.replace(ENTRY, learner_tests=(REPLAY,))
    results = grade_learner_tests(
        cast(Runner, stand_in), entry, probe_suite("03"), cells, root=ROOT
    )
    assert [r.name for r in results] == [REPLAY.name]
    return results[0]


def test_a_build_without_learner_tests_grades_none_and_runs_nothing() -> None:
    stand_in = StandIn(catches=set())
    entry = dataclasses.replace(ENTRY, learner_tests=())
    got = grade_learner_tests(
        cast(Runner, stand_in), entry, probe_suite("03"), REPLAY_CELLS, root=ROOT
    )
    assert got == [] and stand_in.variants == []


def test_a_build_that_names_no_solution_is_the_graders_fault_for_every_learner_test() -> None:
    entry = dataclasses.replace(ENTRY, solution=None)
    results = grade_learner_tests(
        cast(Runner, StandIn(set())), entry, probe_suite("03"), REPLAY_CELLS, root=ROOT
    )
    assert [(r.name, r.points, r.kind) for r in results] == [
        (s.name, 0, Outcome.GRADER_FAULT) for s in ENTRY.learner_tests
    ]
    assert all(r.message.startswith(GRADER_FAULT) for r in results)
    assert all("names no solution" in r.message for r in results)


def test_a_test_not_in_the_cells_is_not_done_and_never_runs() -> None:
    stand_in = StandIn(catches=set(BUGS))
    result = grade(stand_in, Cells(None, "no cell tagged test"))
    assert (result.points, result.kind) == (0, Outcome.NOT_DONE)
    assert result.message == (
        f"not written: no `def {REPLAY.name}` in a cell tagged test (no cell tagged test)"
    )
    other = grade(stand_in, Cells(TESTS_PREAMBLE + "def test_other():\n    pass\n"))
    assert other.kind is Outcome.NOT_DONE and "(no test cell)" in other.message
    assert stand_in.variants == []


def test_a_test_passing_on_both_wheats_and_catching_every_bug_earns_full_marks() -> None:
    stand_in = StandIn(catches=set(BUGS))
    result = grade(stand_in)
    assert (result.points, result.max_points, result.kind, result.message) == (
        REPLAY.points,
        REPLAY.points,
        Outcome.PASSED,
        "",
    )
    # Two wheats, then each bug over each wheat: every run a worker of its own.
    assert len(stand_in.variants) == 2 + 2 * len(BUGS)
    assert set(stand_in.seconds) == {TEST_SECONDS}
    job = {"name": REPLAY.name, "text": REPLAY_CELLS.text, "max_examples": REPLAY.max_examples}
    assert all(v.endswith(f"\n{JOB} = {job!r}\n") for v in stand_in.variants)
    assert grade(StandIn(catches=set(BUGS))) == result  # the same grade twice


def test_a_test_catching_the_gate_only_earns_its_share_and_names_the_missed_bug() -> None:
    result = grade(StandIn(catches={REPLAY.gate}))
    missed = next(b for b in teststep.bugs_of("03", REPLAY.name) if b.name != REPLAY.gate)
    assert result.points == REPLAY.points * 1 // len(REPLAY.catches)
    assert result.kind is Outcome.WRONG
    assert result.message.startswith("passes on every correct implementation, but catches 1 of")
    assert missed.words in result.message and missed.source not in result.message


def test_a_test_missing_the_gate_earns_nothing_and_nothing_else_is_tried() -> None:
    others = set(BUGS) - {REPLAY.gate}
    stand_in = StandIn(catches=others)
    result = grade(stand_in)
    assert (result.points, result.kind) == (0, Outcome.WRONG)
    assert result.message.startswith("passes on every correct implementation, but")
    assert len(stand_in.variants) == 3  # two wheats, the gate bug on the first: it passed


def test_a_test_that_asserts_nothing_is_told_so() -> None:
    cells = Cells(TESTS_PREAMBLE + f"def {REPLAY.name}():\n    assert True\n")
    result = grade(StandIn(catches=set()), cells)
    assert (result.points, result.kind) == (0, Outcome.WRONG)
    assert result.message.startswith(f"{REPLAY.name} asserts nothing that can fail")


def test_a_test_failing_on_a_wheat_earns_nothing_and_shows_only_a_builtin_and_its_assert_line() -> (
    None
):
    assert REPLAY_CELLS.text is not None
    line = REPLAY_CELLS.text.splitlines().index("    assert await sink.load([]) == 0") + 1
    report = {"loaded": True, "defined": True, "passed": False, "raised": "AssertionError"}
    result = grade(StandIn(catches=set(BUGS), wheat={**report, "line": line}))
    assert (result.points, result.kind) == (0, Outcome.WRONG)
    assert result.message.startswith(
        f"it fails on a correct implementation ({WHEAT}): raised AssertionError at line {line}"
    )
    assert "A test that rejects correct code earns nothing" in result.message
    own = grade(StandIn(catches=set(BUGS), wheat={**report, "raised": "Secret", "line": 1}))
    assert "raised an exception of its own." in own.message  # line 1 is no assert: not shown


def test_a_test_that_only_the_second_wheat_rejects_is_told_which_wheat() -> None:
    class SecondOnly(StandIn):
        def run_probes(
            self, source: str, suite: Suite, *, probe_seconds: float | None = None
        ) -> ProbeRun:
            self.wheat = {"passed": False} if self.variants else None
            return super().run_probes(source, suite, probe_seconds=probe_seconds)

    result = grade(SecondOnly(catches=set(BUGS)))
    assert result.points == 0 and f"({SECOND_WHEAT})" in result.message


@pytest.mark.parametrize(
    ("status", "kind", "words"),
    [
        ("timeout", Outcome.UNFINISHED, f"did not finish within {TEST_SECONDS:g} s"),
        ("crashed", Outcome.UNFINISHED, "ended its process"),
        ("void", Outcome.VOID, "wrote to the grader's results channel"),
    ],
)
def test_a_test_whose_run_on_a_wheat_did_not_finish_earns_nothing(
    status: str, kind: Outcome, words: str
) -> None:
    result = grade(StandIn(catches=set(BUGS), wheat={"status": status}))
    assert (result.points, result.kind) == (0, kind)
    assert words in result.message


def test_a_test_raising_not_implemented_on_a_wheat_is_not_done() -> None:
    wheat = {"loaded": True, "defined": True, "passed": False, "not_written": True}
    result = grade(StandIn(catches=set(BUGS), wheat=wheat))
    assert (result.points, result.kind) == (0, Outcome.NOT_DONE)
    assert result.message == f"{REPLAY.name} is not written yet"


def test_a_test_asking_for_arguments_is_told_nothing_supplies_them() -> None:
    cells = Cells(TESTS_PREAMBLE + f"def {REPLAY.name}(tmp_path, *, seed=1):\n    assert 1\n")
    result = grade(StandIn(catches=set(BUGS), wheat={"loaded": True, "passed": False}), cells)
    assert result.message.startswith(f"{REPLAY.name} takes tmp_path, but a test here is called")


def test_a_wheat_that_does_not_load_is_the_graders_fault() -> None:
    result = grade(StandIn(catches=set(BUGS), load_error="NameError: seam"))
    assert (result.points, result.kind) == (0, Outcome.GRADER_FAULT)
    assert result.message.startswith(GRADER_FAULT)
    assert f"{WHEAT} did not load: NameError: seam" in result.message
