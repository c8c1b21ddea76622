"""``python -m grader.validity``: proof that every graded build can be graded, and fairly.

For each graded notebook of the manifest whose exercise or solution is on disk it checks, and
prints as one table:

- export: the solution and the exercise both go through the one export path;
- structure: they differ only in answer cells (same cells, types, tags and other sources);
- suite: every graded test has a judge and a hint, every judge a graded test;
- solution: full marks; stub: zero on every graded test;
- mutants: each known bug fails at least one graded test (the line names which);
- learner tests: the solution's own tests (cells tagged ``test``) pass on the reference and
  catch every bug of their ``catches``; the stubs' earn zero; each with its assertions
  removed loses points (`grader.learner_tests.wheats`);
- pytest: the solutions earn every point through the other path too, the hidden suites run
  as pytest suites (``pytest builds/*/hidden --submission solutions``, one run for every build,
  in a process of its own while the rest is checked).

It exits 1 when any line is wrong. Running it twice prints the same table (times aside).
Nothing here writes to the repository.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from pathlib import Path

from grader import Runner, SubmissionResult, Suite, SuiteError, has_suite, load_suite
from grader.classes import reteach
from grader.learner_tests.wheats import (
    TestCells,
    defined_tests,
    grade_learner_tests,
    read_test_cells,
    without_assertions,
)
from grader.proofs import suitemutants
from grader.proofs.known_bugs import Line, mutant_lines
from grader.proofs.visible_catches import load_contract
from grader.runtime.pool import RunnerPool
from grader.runtime.results import TestResult
from grader.suites.loading import suite_dir
from workbook.shared.buildfolder import written_tests
from workbook.shared.errors import WorkbookError
from workbook.shared.export import cell_source, cell_tags, export_source, read_notebook
from workbook.shared.manifest import Entry, load_manifest, repo_root

MARK = {True: "✓", False: "✗"}


def structure(exercise: Path, solution: Path) -> Line:
    """Same cells in the same order; only the sources of answer and test cells may differ."""
    ex_cells = read_notebook(exercise)["cells"]
    sol_cells = read_notebook(solution)["cells"]
    problems = []
    if len(ex_cells) != len(sol_cells):
        problems.append(f"{len(ex_cells)} cells in the exercise, {len(sol_cells)} in the solution")
    answers = 0
    for number, (ex, sol) in enumerate(zip(ex_cells, sol_cells, strict=False), start=1):
        if ex.get("cell_type") != sol.get("cell_type"):
            problems.append(
                f"cell {number}: {ex.get('cell_type')} in the exercise,"
                f" {sol.get('cell_type')} in the solution"
            )
            continue
        if sorted(cell_tags(ex)) != sorted(cell_tags(sol)):
            problems.append(f"cell {number}: tags {cell_tags(ex)} vs {cell_tags(sol)}")
            continue
        if ex.get("cell_type") == "code" and {"answer", "test"} & set(cell_tags(ex)):
            answers += 1
        elif cell_source(ex) != cell_source(sol):
            first = _first_difference(cell_source(ex), cell_source(sol))
            problems.append(f"cell {number} ({ex.get('cell_type')}) differs: {first}")
    if problems:
        return Line(
            "structure", False, f"{len(problems)} difference(s) outside answer cells", problems
        )
    return Line(
        "structure",
        True,
        f"{len(ex_cells)} cells each; same types, tags and sources outside the {answers}"
        " answer cells",
    )


def _first_difference(a: str, b: str) -> str:
    for number, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False), start=1):
        if x != y:
            return f"line {number}: {x.strip()[:50]!r} vs {y.strip()[:50]!r}"
    return "one has more lines than the other"


def suite_line(entry: Entry, suite: Suite) -> Line:
    names = [t.name for t in entry.tests]
    judges = set(suite.judges.by_name)
    problems = [f"{n}: no judge in the hidden suite" for n in names if n not in judges]
    problems += [f"judge {j}: no graded test of that name" for j in sorted(judges - set(names))]
    problems += [f"{t.name}: no hint" for t in entry.tests if not t.hint.strip()]
    problems += [f"{t.name}: {t.points} points" for t in entry.tests if t.points <= 0]
    visible = sum(t.visible for t in entry.tests)
    twice = sum(p.interpreters > 1 for p in suite.probes.by_name.values())
    summary = (
        f"{len(names)} graded tests ({visible} visible, {len(names) - visible} hidden), each with"
        f" a judge and a hint; {len(suite.probes.names)} probes ({twice} also run under a second"
        f" PYTHONHASHSEED); {len(suite.mutants)} mutants"
    )
    return Line("suite", not problems, summary if not problems else "mismatch", problems)


def solution_line(result: SubmissionResult) -> Line:
    summary = f"{result.score}/{result.max_score} points ({result.seconds:.2f} s)"
    if result.score == result.max_score and result.status == "graded":
        return Line("solution", True, summary)
    details = []
    for test in result.tests:
        if not test.passed:
            details.append(f"{test.name}:")
            details.extend(f"  {text}" for text in test.message.splitlines()[:4])
    if result.status != "graded":
        details.insert(0, f"status {result.status}: {result.reason}")
    return Line("solution", False, summary + ": the solution must earn every point", details)


def stub_line(result: SubmissionResult) -> Line:
    earned = [f"{t.name}: {t.points} point(s)" for t in result.tests if t.points]
    summary = f"{result.score}/{result.max_score} points ({result.seconds:.2f} s)"
    if earned:
        return Line("stub", False, summary + ": the stubs must earn nothing", earned)
    return Line("stub", True, summary + ", every graded test at zero")


def contract_lines(build: str, builds: Path, killed: dict[str, set[str]]) -> list[Line]:
    """The hidden half of the contract's proof: every clause of ``contract.toml`` names a
    known bug a hidden judge fails (`killed`, from `mutant_lines`). The visible half, and the
    table's shape, is `grader.proofs.visible_catches`'s."""
    try:
        clauses = load_contract(build, builds)
    except SuiteError as exc:
        return [Line("contract", False, "does not load", [str(exc)])]
    if not clauses:
        return []
    problems = [
        f"{c.seam}.{c.name}: no known bug a hidden judge fails"
        for c in clauses
        if not any(bug in killed for bug in c.bugs)
    ]
    summary = f"{len(clauses)} clauses, each with a known bug a hidden judge catches"
    return [Line("contract", not problems, summary if not problems else "not proven", problems)]


def learner_tests_line(entry: Entry, root: Path, suite: Suite, pool: RunnerPool) -> Line | None:
    """The learner tests of `entry` (`grader.learner_tests.wheats`): the solution's pass on the
    reference and catch every bug of their `catches`; the stubs' earn zero; each solution test with
    its assertions removed loses points. A test the solution does not hold yet is named, not failed
    (it scores 0, "not written", for everyone)."""
    if not entry.learner_tests or entry.solution is None:
        return None
    start = time.perf_counter()
    solution = read_test_cells(root / entry.solution)
    present = [s.name for s in entry.learner_tests if s.name in defined_tests(solution.text)]
    tasks: list[tuple[str, TestCells]] = [
        ("solution", solution),
        ("stub", read_test_cells(root / entry.path)),
    ]
    assert solution.text is not None or not present
    for name in present:
        unasserted = TestCells(without_assertions(str(solution.text), name))
        tasks.append((name, unasserted))

    def grade(runner: Runner, task: tuple[str, TestCells]) -> list[TestResult]:
        return grade_learner_tests(runner, entry, suite, task[1], root=root)

    graded = pool.map(grade, tasks)
    problems = []
    by_name = {r.name: r for r in graded[0]}
    for name in present:
        result = by_name[name]
        if not result.passed:
            problems.append(f"solution's {name}: {result.points}/{result.max_points}:")
            problems += [f"  {line}" for line in result.message.splitlines()[:4]]
    problems += [f"stub's {r.name}: {r.points} point(s)" for r in graded[1] if r.points]
    for (name, _), results in zip(tasks[2:], graded[2:], strict=True):
        after = next(r for r in results if r.name == name)
        if after.points >= after.max_points:
            problems.append(f"{name} with its assertions removed keeps {after.points} points")
    absent = [s.name for s in entry.learner_tests if s.name not in present]
    caught = sum(len(s.catches) for s in entry.learner_tests if s.name in present)
    summary = (
        f"{len(present)} of {len(entry.learner_tests)} in the solution: they pass on the"
        f" reference and catch all {caught} bugs they list; the stubs' earn 0; without their"
        f" assertions each loses points ({time.perf_counter() - start:.1f} s)"
    )
    details = [f"{n}: not in the solution yet (scores 0, not written)" for n in absent]
    if problems:
        return Line("learner tests", False, "wrong", problems + details)
    return Line("learner tests", True, summary, details)


def laid_over_lines(
    entry: Entry,
    root: Path,
    suite: Suite,
    reference: str,
    pool: RunnerPool,
    twins: dict[str, set[str]],
) -> list[Line]:
    """The wheats and the laid-over bugs of the learner tests (`workbook.checking.layover`): the
    second wheat, under the contract's free variants, earns every hidden point; each bug of a
    ``catches`` is laid over the reference and fails exactly the hidden judges its twin of
    ``mutants.toml`` fails (`twins`, from `mutant_lines`)."""
    if not entry.learner_tests:
        return []
    from grader.learner_tests.wheats import second_wheat
    from workbook.checking import teststep

    graded = {t.name for t in entry.tests}
    names = list(dict.fromkeys(b for spec in entry.learner_tests for b in spec.catches))
    contract = "\n".join(
        dict.fromkeys(
            c.source
            for s in entry.learner_tests
            for c in teststep.contract_of(entry.number, s.name)
        )
    )
    try:
        laid = written_tests(entry.number).LAID_OVER
        neutral = teststep.neutral_of(entry.number)
        second = (
            f"{reference}\n{second_wheat(root, entry.number)}\n{contract}\n{neutral}\n{neutral}\n"
        )
    except (ImportError, OSError) as exc:
        return [Line("wheats", False, f"cannot be read: {exc}")]
    lines = []
    unknown = [n for n in names if n not in laid or n not in twins]
    if unknown:
        why = [f"{n}: no laid-over bug, or no twin in mutants.toml that applies" for n in unknown]
        return [Line("laid-over bugs", False, "missing", why)]
    # As graded: the neutral layers under each bug.
    tasks = [("wheat", second)] + [(n, f"{reference}\n{neutral}\n{laid[n].source}") for n in names]

    def grade(runner: Runner, task: tuple[str, str]) -> SubmissionResult:
        label, text = task
        return runner.grade_source(entry.number, text, label=label, suite=suite, entry=entry)

    start = time.perf_counter()
    results = pool.map(grade, tasks)
    wheat = results[0]
    failing = sorted(set(wheat.failed) & graded)
    lines.append(
        Line(
            "second wheat",
            not failing,
            "written differently, under the contract's free variants: every hidden test passes"
            if not failing
            else "a correct implementation must pass every hidden test",
            failing,
        )
    )
    problems = []
    for name, result in zip(names, results[1:], strict=True):
        laid_fails, twin_fails = set(result.failed) & graded, twins[name] & graded
        if laid_fails != twin_fails:
            only = sorted(laid_fails - twin_fails), sorted(twin_fails - laid_fails)
            problems.append(f"{name}: laid over fails also {only[0]}; its twin also {only[1]}")
    summary = (
        f"{len(names)} bugs, each failing the same hidden judges as its twin"
        f" ({time.perf_counter() - start:.1f} s)"
    )
    lines.append(
        Line("laid-over bugs", not problems, summary if not problems else "differ", problems)
    )
    return lines


def check_build(entry: Entry, root: Path, builds: Path, pool: RunnerPool) -> list[Line]:
    exercise = root / entry.path
    solution = root / entry.solution if entry.solution else None
    if solution is None:
        return [Line("solution", False, "the manifest names no solution notebook")]
    missing = [str(p.relative_to(root)) for p in (exercise, solution) if not p.exists()]
    if missing:
        return [Line("export", False, f"missing: {', '.join(missing)}")]
    lines: list[Line] = []
    sources = {}
    for label, path in (("solution", solution), ("exercise", exercise)):
        try:
            sources[label] = export_source(path)
        except WorkbookError as exc:
            lines.append(Line("export", False, f"the {label} does not export", [str(exc)]))
    if lines:
        return lines
    counts = {label: text.count("\n# %% cell ") for label, text in sources.items()}
    lines.append(
        Line(
            "export",
            True,
            f"solution and exercise export ({counts['solution']} setup and answer cells each)",
        )
    )
    try:
        lines.append(structure(exercise, solution))
    except WorkbookError as exc:
        lines.append(Line("structure", False, str(exc)))
    if not has_suite(entry.number, builds):
        lines.append(Line("suite", False, f"no hidden suite in {suite_dir(entry.number, builds)}"))
        return lines
    try:
        suite = load_suite(entry.number, builds)
    except SuiteError as exc:
        lines.append(Line("suite", False, "does not load", str(exc).splitlines()))
        return lines
    lines.append(suite_line(entry, suite))

    def grade(runner: Runner, label: str) -> SubmissionResult:
        return runner.grade_source(
            entry.number, sources[label], label=label, suite=suite, entry=entry
        )

    solution_result, stub_result = pool.map(grade, ["solution", "exercise"])
    lines.append(solution_line(solution_result))
    lines.append(stub_line(stub_result))
    twins: dict[str, set[str]] = {}
    # As class grading hands it to the grader (the header without its file name): the probes'
    # inputs are drawn from the text, so a learner with exactly this bug fails exactly these.
    graded_as = reteach.as_graded(sources["solution"])
    lines.extend(mutant_lines(suite, graded_as, pool, entry.number, entry, twins))
    if len(twins) == len(suite.mutants):  # every bug killed: class grading's signatures
        reteach.store(root, entry, builds, twins)
    lines.extend(contract_lines(entry.number, builds, twins))
    lines.extend(laid_over_lines(entry, root, suite, sources["solution"], pool, twins))
    learner = learner_tests_line(entry, root, suite, pool)
    if learner is not None:
        lines.append(learner)
    return lines


class PytestRun:
    """``pytest builds/buildNN/hidden ... --submission solutions`` for the given builds, started
    at once in a process of its own; `lines` waits for it and says, per build, whether every
    graded test passed there."""

    def __init__(self, root: Path, entries: Sequence[Entry]) -> None:
        self.entries = list(entries)
        self.folder = Path(tempfile.mkdtemp(prefix="rit-validity-"))
        self.report = self.folder / "report.xml"
        self.started = time.perf_counter()
        suites = [str(root / "builds" / f"build{e.number}" / "hidden") for e in self.entries]
        solutions = ["--submission", str(root / "solutions"), f"--junitxml={self.report}"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *suites, *solutions],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def lines(self) -> dict[str, Line]:
        output, _ = self.process.communicate()
        seconds = time.perf_counter() - self.started
        outcomes: dict[tuple[str, str], bool] = {}
        try:
            for case in ElementTree.parse(self.report).iter("testcase"):
                # builds.build03.hidden.test_ids_and_keys -> 03
                build = case.get("classname", "").split(".")[1].removeprefix("build")
                failed = any(c.tag in ("failure", "error", "skipped") for c in case)
                outcomes[(build, case.get("name", "").removeprefix("test_"))] = not failed
        except (OSError, ElementTree.ParseError, IndexError):
            pass
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
        lines = {}
        for entry in self.entries:
            names = [t.name for t in entry.tests]
            passed = [n for n in names if outcomes.get((entry.number, n))]
            problems = [f"{n}: failed or not run under pytest" for n in names if n not in passed]
            summary = f"{len(passed)} of {len(names)} graded tests pass ({seconds:.1f} s)"
            if not outcomes:
                problems = output.decode("utf-8", "replace").splitlines()[-12:]
            lines[entry.number] = Line(f"build {entry.number}", not problems, summary, problems)
        return lines


def build_table(entry: Entry | None, lines: Sequence[Line]) -> str:
    width = max(len(line.name) for line in lines)
    out = [f"build {entry.number}  {entry.title}" if entry else ""]
    for line in lines:
        out.append(f"  {MARK[line.ok]} {line.name:<{width}}  {line.summary}")
        for detail in line.details[:12]:
            out.append(f"      {detail}")
        if len(line.details) > 12:
            out.append(f"      ... and {len(line.details) - 12} more")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.validity", description=__doc__)
    parser.add_argument("--root", type=Path, default=None, help="repository root (default: this)")
    parser.add_argument("--build", action="append", help="only this build (repeatable)")
    parser.add_argument("--workers", type=int, default=2, help="runners in parallel (default 2)")
    parser.add_argument(
        "--mutate",
        action="append",
        metavar="BUILD",
        help="instead: grade every generic mutant of BUILD's solution with its hidden suite"
        " and list the survivors (grader.proofs.suitemutants; repeatable)",
    )
    args = parser.parse_args(argv)
    if args.mutate:
        return suitemutants.main([*args.mutate, "--workers", str(args.workers)])
    start = time.perf_counter()
    root = (args.root or repo_root()).resolve()
    manifest = load_manifest(root / "workbook.toml")
    builds = root / "builds"
    entries = [
        e
        for e in manifest.graded
        if (root / e.path).exists() or (e.solution and (root / e.solution).exists())
    ]
    if args.build:
        entries = [e for e in entries if e.number in args.build]
    if not entries:
        print("validity: no graded notebook is on disk yet; nothing to check.")
        return 0
    judged = [e for e in entries if e.solution and (root / e.solution).exists()]
    through_pytest = PytestRun(root, [e for e in judged if has_suite(e.number, builds)])
    with RunnerPool(args.workers) as pool:
        isolation = pool.isolation()
        print("Validity of the graded builds")
        print(f"  {isolation.summary}")
        print(f"  processes: {isolation.pids_text}\n  network:   {isolation.network_text}\n")
        failures = 0
        for entry in entries:
            lines = check_build(entry, root, builds, pool)
            print(build_table(entry, lines) + "\n", flush=True)
            failures += sum(not line.ok for line in lines)
    pytest_lines = list(through_pytest.lines().values())
    if pytest_lines:
        print("The solutions through pytest: pytest builds/buildNN/hidden --submission solutions")
        print(build_table(None, pytest_lines).split("\n", 1)[1] + "\n")
        failures += sum(not line.ok for line in pytest_lines)
    seconds = time.perf_counter() - start
    if failures:
        print(f"validity FAILED: {failures} line(s) wrong ({seconds:.1f} s)")
        return 1
    print(f"validity holds for {len(entries)} build(s) ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
