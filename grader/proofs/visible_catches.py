"""``python -m grader.proofs.visible_catches [BUILD ...]``: how many known bugs the visible checks
alone catch.

"Done" means done (ARC.md, Grading): the checks a learner runs (self-check cells, ``make
progress``, ``builds/*/visible``) must fail on every known bug of a build, on inputs of their
own. For each build, every mutant of ``builds/buildNN/hidden/mutants.toml`` (and each wrong
answer issue 13 lists that no mutant spells out) is applied to a temporary copy of the
solution notebook, each ``old`` replaced in the one answer cell holding it; the copy is
loaded through the one export path (`workbook.load`) next to copies of its sibling notebooks,
and the build's visible checks run on it in-process (`workbook.checks.run_check`). A bug is
caught when some check does not pass (or the copy no longer loads).

It prints, per build, caught / total and the survivors (with what the manifest says about a
bug left to the graders on purpose, which still counts as not caught), and exits 1 when any
build is below `TARGET` or a listed wrong answer survives. `measure(build)` is the same
measurement for one build, as a `Coverage`. The learners' own `test` cells play no part.
Nothing is written outside a temporary folder; measuring twice gives the same verdicts.
"""

from __future__ import annotations

import argparse
import ast
import json
import multiprocessing
import shutil
import signal
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from grader.suites.loading import Edit, Mutant, SuiteError, load_mutants, suite_dir
from workbook.checks import run_check
from workbook.selfcheck import checks_for
from workbook.shared.errors import WorkbookError
from workbook.shared.export import cell_source, cell_tags, load, read_notebook
from workbook.shared.manifest import Entry, build_tables, load_manifest, repo_root

#: The share of a build's known bugs its visible checks must catch: all of them, so that a
#: self-check saying "done" leaves no known bug behind (a bug added to a hidden suite needs a
#: visible check too, or `make check` fails).
TARGET = 1.0
#: Real seconds one bug's checks may take before it counts as a hang (not caught: a visible
#: test that never ends fails nothing).
HANG_SECONDS = 20

#: Wrong answers issue 13 saw pass the self-checks that no mutant of the hidden suites spells
#: out as such, each caught as well (and reported apart from the ratio): its name, the bug, the
#: mutants of ``mutants.toml`` whose edits it makes one after the other, and edits of its own.
LISTED: dict[str, tuple[tuple[str, str, tuple[str, ...], tuple[Edit, ...]], ...]] = {
    "03": (
        (
            "no_lock_and_no_batch_dedupe",
            "the sink holds no lock and checks rows only against the keys remembered before"
            " the batch (issue 13: the demo prints [3, 3] and 6 rows)",
            ("no_lock", "duplicates_within_batch_written_twice"),
            (),
        ),
        (
            "retries_transient_errors_forever",
            "with_retry ignores max_attempts: a transient error is retried for ever",
            (),
            (
                Edit(
                    "            if not err.is_transient() or attempt >= policy.max_attempts:",
                    "            if not err.is_transient():",
                ),
            ),
        ),
    ),
}


@dataclass(frozen=True)
class Verdict:
    """What the visible checks made of one known bug."""

    mutant: str
    bug: str
    caught_by: str | None
    """The first visible check that did not pass ("(load)" when the copy no longer loads);
    None when every check passed."""
    detail: str = ""
    listed: bool = False
    """True for a wrong answer of issue 13's list, not one of ``mutants.toml``."""

    @property
    def caught(self) -> bool:
        return self.caught_by is not None


@dataclass(frozen=True)
class Coverage:
    """How many of a build's known bugs its visible checks catch."""

    build: str
    verdicts: tuple[Verdict, ...]
    left_to_graders: dict[str, str] = field(default_factory=dict)
    """Bugs the manifest leaves to the graders on purpose, with why (still not caught)."""
    control: str = ""
    """Empty when the unchanged solution passes every visible check; else what failed."""
    seconds: float = 0.0
    clauses: int = 0
    """Clauses of the build's contract table (none measured for a holdout)."""
    contract: tuple[str, ...] = ()
    """What keeps the contract from being proven (`contract_problems`)."""

    @property
    def known(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if not v.listed)

    @property
    def caught(self) -> int:
        return sum(v.caught for v in self.known)

    @property
    def total(self) -> int:
        return len(self.known)

    @property
    def survivors(self) -> list[str]:
        return [v.mutant for v in self.known if not v.caught]

    @property
    def listed_survivors(self) -> list[str]:
        return [v.mutant for v in self.verdicts if v.listed and not v.caught]

    @property
    def ratio(self) -> float:
        return self.caught / self.total if self.total else 1.0

    @property
    def ok(self) -> bool:
        """At or above `TARGET`, every listed wrong answer caught, the solution itself clean."""
        return (
            self.ratio >= TARGET
            and not self.listed_survivors
            and not self.control
            and not self.contract
        )

    def summary(self) -> str:
        """One line, as the validity table shows it."""
        text = f"{self.caught} of {self.total} known bugs caught by the visible checks"
        text += f" ({self.ratio:.0%}, target {TARGET:.0%})"
        listed = [v for v in self.verdicts if v.listed]
        if listed:
            text += f"; issue 13's wrong answers: {sum(v.caught for v in listed)} of {len(listed)}"
        if self.clauses:
            proven = "each with a known bug they catch" if not self.contract else "not all proven"
            text += f"; {self.clauses} contract clauses, {proven}"
        return text + f" ({self.seconds:.1f} s)"

    def details(self) -> list[str]:
        """A line per survivor (and per problem), for the table's detail rows."""
        lines = [f"the solution itself fails a visible check: {self.control}"] * bool(self.control)
        lines += [f"contract: {problem}" for problem in self.contract]
        for v in self.verdicts:
            if v.caught:
                continue
            why = self.left_to_graders.get(v.mutant)
            said = f"left to the graders: {why}" if why else v.bug
            lines.append(f"survives: {v.mutant}{' (issue 13)' if v.listed else ''}: {said}")
            if v.detail:
                lines.append(f"  {v.detail}")
        return lines


# ───────────────────────────────────────────────────────────── the contract, clause by clause


@dataclass(frozen=True)
class Clause:
    """One promise of a seam's contract (``builds/buildNN/hidden/contract.toml``), with where
    the notebook or ARC.md makes it and the known bugs that break it."""

    seam: str
    name: str
    says: str
    cites: str
    bugs: tuple[str, ...]


def load_contract(build: str, builds: Path | None = None) -> tuple[Clause, ...]:
    """The build's clauses, in file order; () when it has no table. Raises `SuiteError` on a
    clause missing a key or named twice."""
    path = suite_dir(build, builds) / "contract.toml"
    if not path.exists():
        return ()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8")).get("clause", [])
        clauses = tuple(
            Clause(
                str(c["seam"]),
                str(c["name"]),
                str(c["says"]),
                str(c["cites"]),
                tuple(str(b) for b in c["bugs"]),
            )
            for c in raw
        )
    except (KeyError, TypeError, tomllib.TOMLDecodeError) as exc:
        raise SuiteError(
            f"{path}: a clause is not [[clause]] seam/name/says/cites/bugs: {exc}"
        ) from None
    names = [f"{c.seam}.{c.name}" for c in clauses]
    if len(set(names)) != len(names):
        raise SuiteError(f"{path}: a clause is named twice")
    return clauses


def answer_names(solution: Path) -> set[str]:
    """The public names the solution's answer cells define (functions, classes, constants):
    every one needs a contract."""
    names: set[str] = set()
    for cell in read_notebook(solution)["cells"]:
        if "answer" not in cell_tags(cell):
            continue
        for node in ast.parse(cell_source(cell)).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {name for name in names if not name.startswith("_")}


def contract_problems(
    clauses: Sequence[Clause], known: Sequence[str], seams: set[str], caught: set[str]
) -> list[str]:
    """What keeps the contract from being proven: a seam without a clause, a clause without a
    known bug, a bug that is not in ``mutants.toml`` (so no hidden judge is proven to catch
    it: validity kills every mutant there), or one the visible checks miss (`caught`)."""
    problems = [f"{seam}: no clause" for seam in sorted(seams - {c.seam for c in clauses})]
    for clause in clauses:
        where = f"{clause.seam}.{clause.name}"
        if not clause.bugs:
            problems.append(f"{where}: no known bug breaks it")
        for bug in clause.bugs:
            if bug not in known:
                problems.append(f"{where}: {bug} is not a known bug of mutants.toml")
            elif bug not in caught:
                problems.append(f"{where}: its bug {bug} survives the visible checks")
    return problems


# ───────────────────────────────────────────────────────────── the temporary copies


def mutate(cells: list[dict[str, Any]], mutant: Mutant) -> list[dict[str, Any]]:
    """The notebook's cells with `mutant`'s edits made, in order, each in the one answer cell
    whose source holds its `old` exactly once. Raises `SuiteError` when an edit does not apply
    that way: a mutant that silently stopped applying would measure nothing."""
    cells = [dict(cell) for cell in cells]
    for number, edit in enumerate(mutant.edits, start=1):
        holders = [
            i
            for i, cell in enumerate(cells)
            if "answer" in cell_tags(cell) and edit.old in cell_source(cell)
        ]
        counts = [cell_source(cells[i]).count(edit.old) for i in holders]
        if counts != [1]:
            where = "in no answer cell" if not holders else f"{sum(counts)} times"
            raise SuiteError(
                f"mutant {mutant.name}, edit {number}: the text to replace is found {where}"
            )
        cell = cells[holders[0]]
        cell["source"] = cell_source(cell).replace(edit.old, edit.new)
    return cells


#: Bugs kept apart from the known ones (never in ``mutants.toml``, so no check was written
#: against them): how well the visible checks generalise. ``--holdout`` measures them.
HOLDOUT = Path(__file__).resolve().parents[2] / "tests" / "grading" / "holdout"


def holdout_file(build: str) -> Path:
    return HOLDOUT / f"build{build}.toml"


def known_bugs(
    build: str, builds: Path | None = None, *, holdout: bool = False
) -> list[tuple[Mutant, bool]]:
    """(mutant, listed) for every known bug of `build`: ``mutants.toml``'s, then issue 13's;
    with `holdout`, the holdout's bugs instead (none listed)."""
    if holdout:
        return [(m, False) for m in load_mutants(holdout_file(build))]
    mutants = load_mutants(suite_dir(build, builds) / "mutants.toml")
    by_name = {m.name: m for m in mutants}
    listed = []
    for name, bug, combined, edits in LISTED.get(build, ()):
        if all(part in by_name for part in combined):  # a suite of a test's own may lack them
            made = tuple(edit for part in combined for edit in by_name[part].edits) + edits
            listed.append(Mutant(name, bug, made))
    return [(m, False) for m in mutants] + [(m, True) for m in listed]


def left_to_graders(build: str, root: Path) -> dict[str, str]:
    """``[[left_to_graders]]`` of `build`'s ``build.toml``: bug name -> why."""
    tables = build_tables(root, build)
    return {str(e["name"]): str(e["why"]) for e in tables.get("left_to_graders", [])}


@dataclass(frozen=True)
class _Job:
    build: str
    notebook: str
    mutant: str
    bug: str
    listed: bool


def _copies(
    entry: Entry, root: Path, scratch: Path, builds: Path | None, holdout: bool = False
) -> Iterator[_Job]:
    """One folder per bug, holding the mutated notebook and copies of its siblings (a later
    build loads an earlier one from the folder next to it), and one for the control."""
    assert entry.solution is not None
    solution = root / entry.solution
    siblings = sorted(p for p in solution.parent.glob("[0-9][0-9]_*.ipynb") if p != solution)
    notebook = read_notebook(solution)
    bugs: list[tuple[Mutant | None, bool]] = [
        (None, False),
        *known_bugs(entry.number, builds, holdout=holdout),
    ]
    for index, (mutant, listed) in enumerate(bugs):
        folder = scratch / entry.number / str(index)
        folder.mkdir(parents=True)
        for sibling in siblings:
            shutil.copyfile(sibling, folder / sibling.name)
        target = folder / solution.name
        name, bug, cells = "", "", notebook["cells"]
        if mutant is not None:
            name, bug = mutant.name, mutant.bug
            try:
                cells = mutate(notebook["cells"], mutant)
            except SuiteError as exc:
                # Not applying is a fault of the suite, not a catch: say so as a survivor.
                yield _Job(entry.number, "", name, f"{bug} [does not apply: {exc}]", listed)
                continue
        _write_notebook(target, {**notebook, "cells": cells})
        yield _Job(entry.number, str(target), name, bug, listed)


def _write_notebook(path: Path, notebook: dict[str, Any]) -> None:
    path.write_text(json.dumps(notebook, ensure_ascii=False), encoding="utf-8")


# ───────────────────────────────────────────────────────────── running the checks


class _Hung(BaseException):
    """Raised by the alarm: not an Exception, so no check's handler can swallow it."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Hung()


def _verdict(job: _Job) -> Verdict:
    """Load the copy and run the build's visible checks in order, up to the first that does
    not pass. Runs in a worker process (or here, with one worker)."""
    if not job.notebook:
        return Verdict(job.mutant, job.bug, None, "its edits do not apply", job.listed)
    # The alarm can only be set from a main thread; a caller's own thread goes without.
    timed = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGALRM, _alarm) if timed else None
    signal.alarm(HANG_SECONDS if timed else 0)
    try:
        try:
            module = load(job.notebook)
        except WorkbookError as exc:
            return Verdict(job.mutant, job.bug, "(load)", str(exc).splitlines()[0], job.listed)
        for check in checks_for(job.build):
            result = run_check(check, module)
            if not result.passed:
                first = (result.message.splitlines() or [result.status])[0]
                return Verdict(job.mutant, job.bug, check.name, first, job.listed)
        return Verdict(job.mutant, job.bug, None, "", job.listed)
    except _Hung:
        return Verdict(
            job.mutant, job.bug, None, f"the checks still ran after {HANG_SECONDS} s", job.listed
        )
    finally:
        if timed:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)


def _run(jobs: Sequence[_Job], workers: int) -> list[Verdict]:
    if workers <= 1 or len(jobs) <= 1:
        return [_verdict(job) for job in jobs]
    # fork: each worker starts with every check module and `etl` already imported. Only from
    # a process with no other thread, though: a forked child inherits locks other threads hold.
    method = "fork" if threading.active_count() == 1 else "spawn"
    with multiprocessing.get_context(method).Pool(workers) as pool:
        return pool.map(_verdict, jobs, chunksize=1)


def _preload(builds: Sequence[str]) -> None:
    """Import every build's checks before forking, so no worker pays for it again."""
    for build in builds:
        checks_for(build)


def measure_many(
    builds: Sequence[str] | None = None,
    *,
    root: Path | None = None,
    builds_dir: Path | None = None,
    workers: int = 2,
    holdout: bool = False,
) -> list[Coverage]:
    """`measure` for several builds (default: every build of the manifest with a solution and
    known bugs), their bugs sharing one pool of `workers` processes; each `Coverage` carries
    the seconds of the whole measurement."""
    root = (root or repo_root()).resolve()
    builds_dir = builds_dir or root / "builds"
    manifest = load_manifest(root / "workbook.toml")
    entries = [
        e
        for e in manifest.builds
        if e.solution
        and (root / e.solution).exists()
        and (
            holdout_file(e.number) if holdout else suite_dir(e.number, builds_dir) / "mutants.toml"
        ).exists()
        and (builds is None or e.number in builds)
    ]
    unknown = set(builds or ()) - {e.number for e in entries}
    if unknown:
        raise SuiteError(f"no build with a solution and known bugs: {', '.join(sorted(unknown))}")
    _preload([e.number for e in entries])
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="coverage-") as scratch:
        jobs = [
            job for e in entries for job in _copies(e, root, Path(scratch), builds_dir, holdout)
        ]
        verdicts = _run(jobs, workers)
    seconds = time.perf_counter() - start
    out = []
    for entry in entries:
        mine = [v for job, v in zip(jobs, verdicts, strict=True) if job.build == entry.number]
        control, bugs = mine[0], mine[1:]
        clauses: tuple[Clause, ...] = ()
        problems: list[str] = []
        if not holdout:
            assert entry.solution is not None
            clauses = load_contract(entry.number, builds_dir)
            problems = contract_problems(
                clauses,
                [v.mutant for v in bugs if not v.listed],
                answer_names(root / entry.solution),
                {v.mutant for v in bugs if v.caught},
            )
        out.append(
            Coverage(
                build=entry.number,
                verdicts=tuple(bugs),
                left_to_graders=left_to_graders(entry.number, root),
                control=f"{control.caught_by}: {control.detail}" if control.caught else "",
                seconds=seconds,
                clauses=len(clauses),
                contract=tuple(problems),
            )
        )
    return out


def measure(build: str, *, root: Path | None = None, workers: int = 2) -> Coverage:
    """How many of `build`'s known bugs its visible checks catch (see the module docstring)."""
    return measure_many([build], root=root, workers=workers)[0]


def report(coverage: Coverage, *, verbose: bool = False) -> str:
    """The build's line, its survivors, and with `verbose` what caught each bug."""
    mark = "✓" if coverage.ok else "✗"
    lines = [f"build {coverage.build}  {mark} {coverage.summary()}"]
    lines += [f"    {line}" for line in coverage.details()]
    if verbose:
        lines += [f"    {v.mutant}: {v.caught_by}" for v in coverage.verdicts if v.caught]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.proofs.visible_catches", description=__doc__
    )
    parser.add_argument("builds", nargs="*", help="only these builds (default: all)")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument(
        "--builds-dir", type=Path, default=None, help="the build folders' folder (builds/)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="say what caught each bug")
    parser.add_argument(
        "--holdout",
        action="store_true",
        help="measure tests/grading/holdout/buildNN.toml instead (a rate, never a failure)",
    )
    args = parser.parse_args(argv)
    try:
        results = measure_many(
            args.builds or None,
            builds_dir=args.builds_dir,
            workers=args.workers,
            holdout=args.holdout,
        )
    except SuiteError as exc:
        print(f"coverage: {exc}", file=sys.stderr)
        return 2
    if args.holdout:  # a measurement of how the checks generalise, never a failure
        for coverage in results:
            print(
                f"build {coverage.build}  {coverage.caught} of {coverage.total} holdout bugs"
                f" caught by the visible checks ({coverage.ratio:.0%}, {coverage.seconds:.1f} s)"
            )
            if args.verbose:
                print("\n".join(f"    {line}" for line in coverage.details()))
        return 0
    for coverage in results:
        print(report(coverage, verbose=args.verbose))
    failing = [c.build for c in results if not c.ok]
    if failing:
        print(f"coverage FAILED for build(s) {', '.join(failing)}")
        return 1
    print(f"coverage holds for {len(results)} build(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
