"""The self-check cell of a build notebook: ``selfcheck("03", "sink")``.

In a Jupyter kernel it checks a *fresh module* built from the notebook's setup and answer cells
as this kernel last ran them (IPython keeps the source of every cell it ran), never the kernel's
globals, so it says what the grader will say: a helper left in an untagged cell fails here too,
and is named. A tagged cell this kernel has not run is read from the saved notebook, and one
whose last run differs from the saved file gets a warning, because `make progress`, the learner's
`make check` and the grader read the file. Outside a kernel (or with ``ns=``) it checks the names
given. Running it again rebuilds the module and re-runs every check.
"""

from __future__ import annotations

import ast
import contextlib
import io
import itertools
import os
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbook.checking import teststep
from workbook.checking.learnertests import Sources
from workbook.checking.magics import readable
from workbook.checking.notebook_cells import cell_name, untagged_helpers
from workbook.checks import CheckResult, Checks, namespace
from workbook.shared import buildfolder
from workbook.shared.errors import WorkbookError
from workbook.shared.export import Cell, cell_source, cell_tags, exported_cells, read_notebook
from workbook.shared.manifest import load_manifest
from workbook.shared.modules import execute, fresh_module, parse, registered
from workbook.siblings import sibling_path

MARKS = {"passed": "✓", "failed": "✗", "not done": "·", "error": "✗"}
_fresh = itertools.count(1)


def checks_for(build: str) -> Checks:
    """The visible checks of a build (``builds/buildNN/visible/answer_checks.py``)."""
    return buildfolder.answer_checks(build)


def hints_for(build: str) -> dict[str, str]:
    try:
        entry = load_manifest().entry(build)
    except WorkbookError:
        return {}
    hints = {t.name: t.hint for t in entry.tests}
    return hints | {t.name: t.hint for t in entry.learner_tests}


def report_text(
    results: Sequence[CheckResult],
    hints: dict[str, str],
    title: str,
    *,
    whole_build: bool = False,
    done_note: str = "Every step of this build is done.",
) -> str:
    """The self-check report: a line per check (its mark, then its feedback), then how many
    pass and the hint for the first one still failing."""
    lines = [title]
    for r in results:
        lines.append(f"  {MARKS[r.status]} {r.name}" + ("" if r.passed else f"  [{r.status}]"))
        for text in r.message.splitlines():
            lines.append(f"      {text}")
    passed = sum(r.passed for r in results)
    summary = f"{passed} of {len(results)} checks pass."
    todo = next_fix(results, hints)
    if todo is None:
        summary += f" {done_note}" if whole_build else " This step is done: on to the next one."
    elif todo.hint:
        summary += f" Next: {todo.heading}{todo.hint}"
    lines.append(summary)
    return "\n".join(lines)


@dataclass(frozen=True)
class NextFix:
    """What a failing report points to first: a failing `check`, and the `hint` to follow.
    `cause` is the root cause that check declared (a manifest test's name, whose hint this
    is), shared by `shared` failing checks in all; empty when none was declared."""

    check: CheckResult
    hint: str
    cause: str = ""
    shared: int = 0

    @property
    def heading(self) -> str:
        """What goes before the hint: the cause and the failures it explains, if any."""
        if not self.cause:
            return ""
        more = f" and {self.shared - 1} more failing checks" if self.shared > 1 else ""
        return f"{self.cause}, which explains {self.check.name}{more}: "


def next_fix(results: Sequence[CheckResult], hints: Mapping[str, str]) -> NextFix | None:
    """The check to fix first, by one rule: a failure that declares a root cause
    (`CheckFailure.cause`, one the hints know) explains the others failing with it, so the
    first such comes first, with the cause's hint, wherever it stands in the order of the
    checks (a blocking sleep fails every retry check, each for that reason); otherwise the
    first failing check, with its own hint. None when every check passes."""
    failing = [r for r in results if not r.passed]
    if not failing:
        return None
    rooted = next((r for r in failing if r.cause and r.cause in hints), None)
    if rooted is None:
        return NextFix(failing[0], hints.get(failing[0].name, ""))
    shared = sum(r.cause == rooted.cause for r in failing)
    return NextFix(rooted, hints[rooted.cause], rooted.cause, shared)


# ───────────────────────────────────────────────── what the kernel ran

_PRE_RUN: list[str] = []
"""Sources this kernel ran before recording started (IPython's input history)."""
_RAN: list[tuple[str, str | None]] = []
"""(source, JupyterLab cell id) of every cell run since recording started."""
_RECORDING: list[object] = []


def _shell() -> Any:
    """The running IPython shell, or None (IPython is not imported where it is not loaded)."""
    get = getattr(sys.modules.get("IPython"), "get_ipython", None)
    return get() if get is not None else None


def _record(info: Any) -> None:
    _RAN.append((str(getattr(info, "raw_cell", "")), getattr(info, "cell_id", None)))


def start_recording(shell: Any = None) -> bool:
    """From now on, record each cell's source and cell id (IPython's ``pre_run_cell``); what
    ran before is the input history, sources without ids. True when this call started it; a
    repeat changes nothing. Importing `workbook` in a kernel (the tools cell) starts it."""
    shell = shell or _shell()
    if shell is None or any(shell is s for s in _RECORDING):
        return False
    history = getattr(shell.history_manager, "input_hist_raw", None) or shell.user_ns.get("In")
    _PRE_RUN[:] = [str(text) for text in (history or [""])[1:]]
    shell.events.register("pre_run_cell", _record)
    _RECORDING.append(shell)
    return True


def _runs(shell: Any) -> tuple[list[tuple[str, str | None]], tuple[str, str | None]]:
    """Every cell this kernel ran before the current one, oldest first, and the current one
    (source, cell id). Whether recording started in an earlier cell or during this one (the
    current cell is then the last of the input history), the current cell is the last run."""
    start_recording(shell)
    ran: list[tuple[str, str | None]] = [(text, None) for text in _PRE_RUN]
    ran.extend(_RAN)
    current = ran[-1] if ran else ("", None)
    try:  # ipykernel: the request being answered carries JupyterLab's cell id
        cell_id = shell.kernel.get_parent("shell")["metadata"].get("cellId")
    except (AttributeError, KeyError, TypeError):
        cell_id = None
    return ran[:-1], (current[0], current[1] or (cell_id if isinstance(cell_id, str) else None))


@dataclass(frozen=True)
class Tagged:
    """A setup or answer cell of the saved notebook, and what the kernel last ran of it."""

    index: int
    tag: str
    saved: str
    ran: str | None
    """The source of its last run in this kernel; None when it has not run here."""
    cell_id: str | None = None
    position: int = -1
    """Where its last run is in the kernel's runs (-1: not run)."""

    @property
    def source(self) -> str:
        return self.saved if self.ran is None else self.ran

    @property
    def differs(self) -> bool:
        return self.ran is not None and _same(self.ran) != _same(self.saved)


def _same(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def _marker(source: str) -> str:
    first = next((ln.strip() for ln in source.splitlines() if ln.strip()), "")
    return first if first.startswith("#") else ""


def _defines(source: str) -> set[str]:
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return set()
    kinds = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    return {n.name for n in tree.body if isinstance(n, kinds)}


def last_runs(
    exported: Sequence[Cell], cells: Sequence[Any], ran: Sequence[tuple[str, str | None]]
) -> list[Tagged]:
    """Each exported cell (setup and answer) with the latest source of `ran` that is that
    cell: the same cell id where both have one (JupyterLab sends it); else the same text, the
    same first comment line (``# ✎ answer: step 3``), or a source that defines every function
    and class the saved cell defines."""
    tagged = []
    for cell in exported:
        raw_id = cells[cell.index - 1].get("id")
        cell_id = raw_id if isinstance(raw_id, str) else None
        marker, names = _marker(cell.source), _defines(cell.source)
        latest, position = None, -1
        for at, (text, ran_id) in enumerate(ran):
            if ran_id is not None and cell_id is not None:
                hit = ran_id == cell_id
            else:
                hit = (
                    _same(text) == _same(cell.source)
                    or (bool(marker) and _marker(text) == marker)
                    or (bool(names) and names <= _defines(text))
                )
            if hit:
                latest, position = text, at
        tagged.append(Tagged(cell.index, cell.tag, cell.source, latest, cell_id, position))
    return tagged


def redefined(
    tagged: Sequence[Tagged], ran: Sequence[tuple[str, str | None]], cells: Sequence[Any]
) -> list[str]:
    """A line for each function or class of a tagged cell that another cell (known by its id)
    defined again after it: the kernel uses that one, the self-check and the grader do not."""
    lines: list[str] = []
    for cell in tagged:
        names = _defines(cell.saved)
        later: set[str] = set()
        for text, ran_id in ran[cell.position + 1 :]:
            if ran_id is not None and cell.cell_id is not None and ran_id != cell.cell_id:
                later |= names & _defines(text)
        where = cell_name(cells, cell.index)
        lines.extend(
            f"`{name}` in this kernel comes from another cell, run after {where}: the"
            f" self-check and the grader use {where}, so put your code there"
            for name in sorted(later)
        )
    return lines


def build_module(path: Path, tagged: Sequence[Tagged], cells: Sequence[Any]) -> types.ModuleType:
    """A fresh module of `tagged`'s sources, each cell compiled on its own as the export does,
    the cells' prints kept out of the report. Raises `WorkbookError` naming the cell."""
    module = fresh_module(f"selfcheck_{_identifier(path.stem)}_{next(_fresh)}", path)
    module.__dict__["__notebook__"] = str(path)
    out, err = io.StringIO(), io.StringIO()
    with registered(module), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        for cell in tagged:
            try:
                execute(module, _as_exported(cell.source), f"{path} [cell {cell.index}]")
            except Exception as exc:
                how = "as this kernel ran it" if cell.ran is not None else "as saved"
                raise WorkbookError(
                    f"{cell_name(cells, cell.index)} ({how}) raised {type(exc).__name__}: {exc}"
                ) from exc
    return module


def _as_exported(source: str) -> str:
    """The cell as the export reads it (`workbook.checking.magics.readable`), decided before it
    runs, so a cell runs once whatever it raises; one that does not compile is left to raise."""
    try:
        return readable(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source


def _identifier(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text)


def notebook_of(build: str, user_ns: Mapping[str, Any]) -> Path | None:
    """The saved notebook this kernel runs: JupyterLab's session path (``__session__``, or
    VS Code's ``__vsc_ipynb_file__``) when it is build `build`'s, else build `build`'s
    notebook in that folder or in the working folder (a kernel starts in its notebook's)."""
    for value in (
        user_ns.get("__session__"),
        user_ns.get("__vsc_ipynb_file__"),
        os.environ.get("JPY_SESSION_NAME"),
    ):
        if not isinstance(value, str) or not value.endswith(".ipynb"):
            continue
        session = Path(value)
        if session.name.startswith(f"{build}_") and session.is_file():
            return session.resolve()
        with contextlib.suppress(WorkbookError):
            return sibling_path(session.parent, build)
    try:
        return sibling_path(Path.cwd(), build)
    except WorkbookError:
        return None


# ───────────────────────────────────────────────── the self-check


def selfcheck(build: str, *names_or_steps: str, ns: Any = None) -> None:
    """Run checks of `build` and print the report: in a kernel, on the tagged cells as it last
    ran them (see the module docstring); else on the caller's globals, or on `ns`.

    Returns nothing, so a cell ending in ``selfcheck(...)`` shows the report once.
    """
    shell = _shell() if ns is None else None
    caller = sys._getframe(1).f_globals
    if shell is not None and caller is shell.user_ns:
        print(kernel_report(build, names_or_steps, shell))
        return
    if teststep.is_test_step(names_or_steps):  # a test is read from its notebook's test cells
        print(f"Self-check of {', '.join(names_or_steps)}: run it in the build notebook's kernel.")
        return
    results = checks_for(build).run(namespace(caller) if ns is None else ns, *names_or_steps)
    print(_report(build, names_or_steps, results))


def _report(
    build: str,
    names_or_steps: Sequence[str],
    results: Sequence[CheckResult],
    notes: Sequence[str] = (),
) -> str:
    which = ", ".join(names_or_steps) if names_or_steps else "all steps"
    title = f"Self-check, build {build} ({which}):"
    note = "Every step of this build is done."
    try:
        if load_manifest().entry(build).kind == "quiz":
            title = f"Self-check, concept check {build} ({which}):"
            note = "Every answer has a valid form; the grader marks whether it is right."
    except WorkbookError:
        pass  # a notebook outside the manifest still gets its report
    text = report_text(
        results, hints_for(build), title, whole_build=not names_or_steps, done_note=note
    )
    return "\n".join([text, *notes])


def kernel_report(build: str, names_or_steps: Sequence[str], shell: Any) -> str:
    """The report of a self-check cell: the checks on a fresh module of the tagged cells as
    this kernel last ran them, then what it read, and what to do where that is not the file."""
    checks = checks_for(build)
    tests_only = teststep.is_test_step(names_or_steps)
    wanted = teststep.gate_steps(build, names_or_steps) if tests_only else names_or_steps
    chosen = checks.select(*wanted)
    path = notebook_of(build, shell.user_ns)
    if path is None:
        results = checks.run(namespace(shell.user_ns), *wanted)
        note = (
            f"(Checked the names this kernel holds: no saved build {build} notebook was found"
            " next to it, so its tagged cells could not be read.)"
        )
        return _report(build, names_or_steps, results, [note])
    try:
        exported = exported_cells(path)  # one line naming the cell when it cannot be exported
        cells = read_notebook(path)["cells"]
    except WorkbookError as exc:
        failed = [CheckResult(c.name, c.step, "error") for c in chosen]
        return _report(build, names_or_steps, failed, [f"✗ {exc}"])
    before, current = _runs(shell)
    tagged = last_runs(exported, cells, before)
    notes = redefined(tagged, before, cells) + _provenance(path, cells, tagged, current)
    sources = [t.source for t in tagged]
    try:
        module = build_module(path, tagged, cells)
    except WorkbookError as exc:
        failed = [CheckResult(c.name, c.step, "error") for c in chosen]
        helpers = untagged_helpers(cells, sources, shell.user_ns)
        notes += _footnote(path, tagged, helpers)
        return _report(build, names_or_steps, failed, [f"✗ {exc}", *helpers, *notes])
    if teststep.is_test_step(names_or_steps):
        reports = learner_test_reports(build, names_or_steps, module, tagged, cells, before)
        return "\n".join([*reports, *notes, *_footnote(path, tagged, ())])
    results = checks.run(module, *names_or_steps)
    if not names_or_steps:  # "all together": a test-writing step is a step too
        written = kernel_sources(module, tagged, cells, before)
        results = [*results, *teststep.results(build, written, results)]
    passed = all(r.passed for r in results)
    helpers = [] if passed else untagged_helpers(cells, sources, shell.user_ns)
    notes += _footnote(path, tagged, helpers)
    return _report(build, names_or_steps, results, [*helpers, *notes])


def kernel_sources(
    module: Any,
    tagged: Sequence[Tagged],
    cells: Sequence[Any],
    ran: Sequence[tuple[str, str | None]] = (),
) -> Sources:
    """The setup, answer and test cells as this kernel last ran them (the saved text where it
    has not), for `workbook.checking.teststep`."""
    tests = [
        Cell(i, "test", cell_source(c)) for i, c in enumerate(cells, 1) if "test" in cell_tags(c)
    ]
    code = {tag: tuple(t.source for t in tagged if t.tag == tag) for tag in ("setup", "answer")}
    # The child's fresh module gets the notebook's path too: a setup cell loads its sibling
    # build from the notebook's folder, whatever the working folder.
    where = f"__notebook__ = {module.__dict__.get('__notebook__')!r}"
    return Sources(
        (where, *code["setup"]),
        code["answer"],
        tuple(t.source for t in last_runs(tests, cells, ran)),
    )


def learner_test_reports(
    build: str,
    names: Sequence[str],
    module: Any,
    tagged: Sequence[Tagged],
    cells: Sequence[Any],
    ran: Sequence[tuple[str, str | None]] = (),
) -> list[str]:
    """The reports of test-writing steps `names` (`workbook.checking.teststep`): each learner test
    on the tagged cells as last run, once the visible checks of the seams it tests pass."""
    sources = kernel_sources(module, tagged, cells, ran)
    lines = []
    for name in names:
        steps = teststep.gate(checks_for(build), teststep.seams_of(build, name))
        blocked = teststep.gate_note(checks_for(build).run(module, *steps), steps)
        lines.append(
            blocked or teststep.step_report(build, name, teststep.run_step(build, name, sources))
        )
    return lines


def _provenance(
    path: Path, cells: Sequence[Any], tagged: Sequence[Tagged], current: tuple[str, str | None]
) -> list[str]:
    """What the self-check read: runs that differ from the file, the cells above this one
    that this kernel has not run (read from the file), and a line saying so."""
    text, cell_id = current
    here = next((i for i, c in enumerate(cells, 1) if cell_id and c.get("id") == cell_id), None)
    here = here or next(
        (i for i, c in enumerate(cells, 1) if _same(cell_source(c)) == _same(text)), None
    )
    lines = []
    unsaved = [cell_name(cells, c.index) for c in tagged if c.differs]
    if unsaved:
        # One line, whatever their number; re-running them changes nothing the file holds.
        listed = ", ".join(unsaved)
        differ, them = ("differ", "them") if len(unsaved) > 1 else ("differs", "it")
        lines.append(
            f"⚠ Not saved yet: {listed} {differ}, as this kernel last ran {them}, from"
            f" {path.name}, which `make progress` and the grader read. Save the notebook."
        )
    unrun = [c for c in tagged if c.ran is None and here is not None and c.index < here]
    if unrun:
        listed = ", ".join(cell_name(cells, c.index) for c in unrun)
        setup = unrun[0].tag == "setup"
        first = " Run the setup cell first: the demo cells need it." if setup else ""
        lines.append(f"Not run in this kernel yet, so read from the saved file: {listed}.{first}")
    return lines


def _footnote(path: Path, tagged: Sequence[Tagged], helpers: Sequence[str]) -> list[str]:
    """How the report was made, only when it matters: some tagged cell read as saved, or a
    name found in an untagged cell."""
    ran = sum(c.ran is not None for c in tagged)
    if ran == len(tagged) and not helpers:
        return []
    return [
        f"(Checked a fresh module of the setup and answer cells of {path.name}: {ran} of"
        f" {len(tagged)} as this kernel last ran them, the rest as saved. Names defined in"
        " other cells do not count, as at grading.)"
    ]


start_recording()
