"""Grading the learner's own tests by wheats and chaffs (Examplar's idea, for notebooks).

Each ``[[learner_test]]`` of a build's ``build.toml`` names a test the learner writes in a cell
tagged ``test``, and the bugs it must catch (``catches``; one of them its *gate*, the "remove the
key" bug of its seam), each defined once as a bug laid over the seam's public interface
(`workbook.checking.layover`, the build's ``builds/buildNN/visible/written_tests.py``): the
self-check lays the same definitions over the learner's code. Its grade, decided here in the parent:

1. not written (no ``def`` of that name in the test cells, or it raises NotImplementedError
   on the reference): 0, *not done*;
2. run against each *wheat*, a correct implementation: the reference (the solution
   notebook's export, with the reference seams of the earlier builds) and a second one written
   differently (`second_wheat`) under the contract's free variants. It must pass on both, else
   0: a test that rejects correct code, or pins the reference's code instead of behaviour,
   earns nothing;
3. run against each *chaff*, a wheat with one bug laid over: a bug is caught only when the
   test fails over every wheat. Points come from `workbook.checking.layover.score`, as in the
   self-check: 0 without the gate, else ``points * caught // len(catches)``.

Every run is a worker of its own (`grader.runtime.runner.Runner.run_probes` with the probe of
`grader.learner_tests.wheatprobe`): the parent decides which variant a worker gets, and each worker
runs one test on one variant, so a test can neither tell the wheat from a chaff by what ran before
it nor carry anything from one run to the next. A worker's word is only "passed" or not; anything
else (a crash, a hang, a forged result line) counts as *not passed*, which on a wheat costs the test
and on a chaff earns nothing a failing run would not. Feedback names missed bugs in their words
(`workbook.checking.layover.LaidOver.words`), never their code, and shows nothing the test printed
or raised beyond the class of a builtin exception and a line number of the learner's own cells.
Grading the same test cells twice gives the same points and messages.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.runtime.results import Outcome, ProbeRecord, TestResult, fault_sentence
from grader.suites.judging import Judges
from grader.suites.loading import Suite
from workbook.checking import teststep
from workbook.checking.feedback import cut
from workbook.checking.layover import NO_FIXTURES, RUN_SECONDS, score
from workbook.shared.errors import WorkbookError
from workbook.shared.export import export_source, export_tests, test_cells
from workbook.shared.manifest import Entry, LearnerTestSpec
from workbook.shared.modules import parse

if TYPE_CHECKING:
    from grader.runtime.runner import Runner

#: The first line of an export names the notebook file: only a comment, so the same cells
#: under another file name are the same submission (one cache entry).
HEADER = re.compile(r"\A# Exported from .*")
#: Real seconds one learner test may take on one variant (hypothesis included): the
#: self-check's own limit, so both sides judge a slow test alike.
TEST_SECONDS = RUN_SECONDS
WHEAT = "the reference"
SECOND_WHEAT = "a second one, written differently"


@dataclass(frozen=True)
class TestCells:
    """A submission's test cells as `workbook.shared.export.export_tests` wrote them (`text`), or
    why there are none to run (`problem`: no test cell, a cell that does not compile)."""

    text: str | None
    problem: str = ""


def defined_tests(text: str | None) -> dict[str, ast.AST]:
    """The top-level functions of the test cells, by name (no run needed to find them)."""
    if text is None:
        return {}
    try:
        tree = parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


def can_fail(text: str, name: str) -> bool:
    """Whether test `name`, or a helper of the test cells it names (transitively), holds an
    assertion that can fail: an ``assert`` of something other than a constant, a ``raise``,
    or a call of something called ``assert…``/``raises``/``fail`` (pytest's, unittest's)."""
    defs = defined_tests(text)
    todo, seen = [name], set()
    while todo:
        current = todo.pop()
        if current in seen or current not in defs:
            continue
        seen.add(current)
        for node in ast.walk(defs[current]):
            if isinstance(node, ast.Assert) and not isinstance(node.test, ast.Constant):
                return True
            if isinstance(node, ast.Raise):
                return True
            if isinstance(node, ast.Call) and _checks(node.func):
                return True
            if isinstance(node, ast.Name) and node.id in defs:
                todo.append(node.id)
    return False


def _checks(func: ast.expr) -> bool:
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return called.startswith("assert") or called in ("raises", "fail")


def without_assertions(text: str, name: str) -> str:
    """Test cells with every ``assert`` of test `name` turned into its bare expression (its
    side effects kept): the mutant of a learner test that validity requires to lose points."""
    tree = parse(text)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            _Unassert().visit(node)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


class _Unassert(ast.NodeTransformer):
    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        return ast.copy_location(ast.Expr(node.test), node)


@cache
def second_wheat(root: Path, build: str) -> str:
    """A second correct implementation of the build's tested seams, written differently
    (``builds/buildNN/hidden/wheat.py``, never shipped): appended after the reference's export, it
    redefines them, so a test that pins the reference's code rather than its behaviour fails."""
    return (root / "builds" / f"build{build}" / "hidden" / "wheat.py").read_text(encoding="utf-8")


@cache
def reference_source(solution: Path) -> str:
    """The reference of a build: its solution notebook's export (never shipped; read here)."""
    return export_source(solution)


def probe_suite(build: str) -> Suite:
    """The suite of one learner test's worker for build `build`
    (`grader.learner_tests.wheatprobe`)."""
    from grader.learner_tests import (
        wheatprobe,  # Hypothesis comes with it: imported only when needed
    )

    path = Path(wheatprobe.__file__)
    return Suite(build, path.parent, path, wheatprobe.PROBES, Judges(), ())


def grade_learner_tests(
    runner: Runner,
    entry: Entry,
    suite: Suite,
    cells: TestCells,
    *,
    root: Path,
) -> list[TestResult]:
    """One `TestResult` per learner test of `entry`, in manifest order (see the module)."""
    if not entry.learner_tests:
        return []
    try:
        if entry.solution is None:
            raise WorkbookError(f"notebook {entry.number} names no solution to test against")
        reference = reference_source(root / entry.solution)
    except WorkbookError as exc:
        return [
            _result(s, 0, fault_sentence(f"the reference: {exc}"), Outcome.GRADER_FAULT)
            for s in entry.learner_tests
        ]
    grading = _Grading(
        runner, probe_suite(entry.number), cells, reference, second_wheat(root, entry.number)
    )
    return grading.results(entry.learner_tests)


def _result(spec: LearnerTestSpec, points: int, message: str, kind: Outcome) -> TestResult:
    return TestResult(spec.name, points, spec.points, message, True, kind)


def _bugs(spec: LearnerTestSpec) -> list[str]:
    """The known bugs `spec` must catch, its gate first."""
    return [spec.gate, *[b for b in spec.catches if b != spec.gate]]


class _Grading:
    """The learner tests of one submission on their way to their points. Each run is one
    test on one variant, in a fresh worker of its own: a worker shared by several tests
    would show a test how many ran there (a count kept on `builtins`, the job's length)
    and let one test forge another's result line, and either tells the wheat from a chaff
    without testing anything."""

    def __init__(
        self,
        runner: Runner,
        probes: Suite,
        cells: TestCells,
        reference: str,
        second: str,
    ) -> None:
        self.runner, self.probes, self.cells = runner, probes, cells
        self.build = probes.build
        self.reference, self.second = reference, second

    def results(self, specs: tuple[LearnerTestSpec, ...]) -> list[TestResult]:
        return [self._grade_one(spec) for spec in specs]

    def _grade_one(self, spec: LearnerTestSpec) -> TestResult:
        early = self._unwritten(spec)
        if early is not None:
            return early
        try:
            bugs = {b.name: b for b in teststep.bugs_of(self.build, spec.name)}
            contract = "\n".join(c.source for c in teststep.contract_of(self.build, spec.name))
            neutral = teststep.neutral_of(self.build)
        except (KeyError, ImportError) as exc:
            fault = fault_sentence(f"the laid-over bugs of {spec.name}: {cut(str(exc))}")
            return _result(spec, 0, fault, Outcome.GRADER_FAULT)
        wheats = [
            f"{self.reference}\n{neutral}\n",
            f"{self.reference}\n{self.second}\n{contract}\n{neutral}\n",
        ]
        # Two layers on every seam of every run: a wheat two neutral ones, a chaff one and its
        # bug, so not even how deep the wrappers go tells them apart.
        for label, wheat in zip((WHEAT, SECOND_WHEAT), wheats, strict=True):
            ran = self._run(f"{wheat}{neutral}\n", spec)
            if ran.get("status") == "load failed":
                error = cut(str(ran.get("error")))
                lost = fault_sentence(f"{label} did not load: {error}")
                return _result(spec, 0, lost, Outcome.GRADER_FAULT)
            if ran.get("passed") is not True:
                return self._rejects_correct_code(spec, ran, label)
        caught: dict[str, bool] = {}
        for name in _bugs(spec):
            caught[name] = True
            for wheat in wheats:
                ran = self._run(f"{wheat}\n{bugs[name].source}", spec)
                if ran.get("status") == "load failed":  # a laid-over bug must load: ours to fix
                    fault = fault_sentence(f"the laid-over bug {name} does not load")
                    return _result(spec, 0, fault, Outcome.GRADER_FAULT)
                if ran.get("passed") is True:
                    caught[name] = False
                    break
            if name == spec.gate and not caught[name]:
                break  # nothing else counts: stop here
        return self._scored(spec, caught, {name: bug.words for name, bug in bugs.items()})

    def _scored(
        self, spec: LearnerTestSpec, caught: dict[str, bool], words: dict[str, str]
    ) -> TestResult:
        """The grade of a test that passed on both wheats, from the bugs it `caught`."""
        got = score(
            points=spec.points, catches=spec.catches, gate=spec.gate, caught=caught, words=words
        )
        if got.done:
            return _result(spec, got.points, "", Outcome.PASSED)
        head = "passes on every correct implementation, but"
        if got.points == 0:
            if not can_fail(str(self.cells.text), spec.name):
                head = (
                    f"{spec.name} asserts nothing that can fail, so it passes whatever the code"
                    " does:"
                )
            return _result(spec, 0, f"{head} {got.lines[0]}", Outcome.WRONG)
        lines = [f"{head} catches {sum(caught.values())} of {len(spec.catches)} bugs it must:"]
        lines += [f"- {line}" for line in got.lines]
        return _result(spec, got.points, "\n".join(lines), Outcome.WRONG)

    def _unwritten(self, spec: LearnerTestSpec) -> TestResult | None:
        """The grade of a test that needs no run: not written. (One that asserts nothing is
        run like any other: no rule reads a test's text to grade it; its 0 comes from the
        gate bug it lets through, and the feedback then says why.)"""
        text = self.cells.text
        if text is None or spec.name not in defined_tests(text):
            why = self.cells.problem if self.cells.problem else "no test cell"
            return _result(
                spec,
                0,
                f"not written: no `def {spec.name}` in a cell tagged test ({why})",
                Outcome.NOT_DONE,
            )
        return None

    def _rejects_correct_code(
        self, spec: LearnerTestSpec, wheat: dict[str, Any], label: str = WHEAT
    ) -> TestResult:
        if wheat.get("not_written") is True:
            return _result(spec, 0, f"{spec.name} is not written yet", Outcome.NOT_DONE)
        kind = Outcome.WRONG
        if wheat.get("status") in ("timeout", "crashed", "void", "not run"):
            what = {
                "timeout": f"did not finish within {TEST_SECONDS:g} s",
                "crashed": "ended its process",
                "void": "wrote to the grader's results channel",
                "not run": "was not run (time budget used up)",
            }[str(wheat["status"])]
            why = f"on a correct implementation ({label}) it {what}"
            kind = Outcome.VOID if wheat["status"] == "void" else Outcome.UNFINISHED
        elif wheat.get("loaded") is False:
            why = f"your test cells {_raised(wheat, self.cells.text)} when they ran"
        elif arguments := _arguments(self.cells.text, spec.name):
            why = f"{spec.name} takes {', '.join(arguments)}, but {NO_FIXTURES}"
        else:
            why = (
                f"it fails on a correct implementation ({label}): {_raised(wheat, self.cells.text)}"
            )
        return _result(
            spec,
            0,
            f"{why}. A test that rejects correct code earns nothing: check what it"
            " expects against the step's contract.",
            kind,
        )

    def _run(self, source: str, spec: LearnerTestSpec) -> dict[str, Any]:
        """What one fresh worker says of test `spec` on `source`, run alone: its report, or
        the status of a probe that did not finish (``{"status": ...}``, never passed)."""
        from grader.learner_tests.wheatprobe import JOB

        job = {"name": spec.name, "text": self.cells.text, "max_examples": spec.max_examples}
        variant = f"{source}\n{JOB} = {job!r}\n"
        run = self.runner.run_probes(variant, self.probes, probe_seconds=TEST_SECONDS)
        self.runner.discard(run)
        record: ProbeRecord | None = run.records.get("learner_test")
        if run.load_error is not None:
            return {"status": "load failed", "error": run.load_error}
        if record is None or record.status != "done" or type(record.obs) is not dict:
            return {"status": record.status if record else "not run"}
        report: dict[str, Any] = record.obs
        return report


def _arguments(text: str | None, name: str) -> list[str]:
    """The parameters test `name` requires (none have a default), which nothing supplies."""
    node = defined_tests(text).get(name)
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return []
    positional = [*node.args.posonlyargs, *node.args.args]
    required = positional[: len(positional) - len(node.args.defaults)]
    keyword = [
        a for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d is None
    ]
    return [a.arg for a in (*required, *keyword)]


def _raised(report: dict[str, Any], text: str | None) -> str:
    """What the test raised on the reference, in words that carry nothing the test could have
    learnt there: a built-in exception's name (else "an exception of its own"), and the line
    only when it is one of the test's own ``assert`` statements (a line number the test picked,
    or a class it named, could spell out the reference's code)."""
    kind = report.get("raised")
    builtin = type(kind) is str and isinstance(getattr(builtins, kind, None), type)
    shown = kind if builtin else "an exception of its own"
    line = report.get("line")
    where = f" at line {line} of the exported test cells" if line in _assert_lines(text) else ""
    return cut(f"raised {shown}{where}", 200)


def _assert_lines(text: str | None) -> frozenset[int]:
    """The lines of the test module's ``assert`` statements."""
    try:
        tree = parse(text or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    return frozenset(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert))


def read_test_cells(notebook: str | Path) -> TestCells:
    """The notebook's test cells, exported; a notebook with none, or whose test cells do not
    compile, gives `TestCells` without text and the reason (its answers still count)."""
    try:
        if not test_cells(notebook):
            return TestCells(None, "no cell tagged test")
        return TestCells(HEADER.sub("# Exported", export_tests(notebook), count=1))
    except WorkbookError as exc:
        return TestCells(None, str(exc))
    except Exception as exc:  # a notebook crafted to break the exporter breaks only itself
        return TestCells(None, f"cannot be read: {type(exc).__name__}")
