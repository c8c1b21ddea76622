"""Mutation-test the hidden suites themselves: ``python -m grader.proofs.suitemutants BUILD``.

A list of the bugs a suite's authors thought of is not enough: its blind spots show when the
solution is broken systematically. For every answer cell of the solution, every mutant that
`workbook.checking.mutation` makes (the same mutator the learners' self-check uses) is graded by the
build's hidden suite; a mutant that still passes every graded test *survives*. Each survivor must be
killed by a new hidden test, or recorded in the build's ``mutants.toml`` as an
``[[equivalent]]`` table (its `stable_id`, its diff and ``why``: it behaves exactly like the
solution under the spec). The report lists the survivors with their ids and diffs. Also run
as ``python -m grader.validity --mutate BUILD``, and by ``make mutate``.

Grading the same solution twice makes the same mutants and the same verdicts. Nothing here
writes to the repository.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass, field

from grader.runtime.pool import RunnerPool
from grader.runtime.runner import Runner
from grader.suites.digest import content_id
from grader.suites.loading import load_suite
from workbook.checking.mutation import Mutant, mutants
from workbook.shared.export import export_source
from workbook.shared.manifest import load_manifest

#: The export's marker before each cell: ``# %% cell 7 [answer], 12 lines`` (a line count, and
#: maybe hoisted imports, after the tag).
_MARKER = re.compile(r"^# %% cell (\d+) \[(\w+)\][^\n]*$", re.MULTILINE)


@dataclass(frozen=True)
class CellMutant:
    """A generic mutant of one answer cell, placed back into the whole exported source."""

    cell: int
    mutant: Mutant
    source: str
    #: `stable_id`: what a recorded equivalent names.
    id: str = ""

    @property
    def where(self) -> str:
        return f"cell {self.cell}: {self.mutant.id}"


def stable_id(operator: str, diff: str) -> str:
    """A mutant's name that outlives unrelated edits: its operator and a digest of its diff
    (the changed lines only, without line numbers), not its position among the mutants."""
    digest = content_id("generic-mutant", f"{operator}\n{diff}")
    return f"{operator}:{digest[:12]}"


@dataclass
class SuiteScore:
    """How the hidden suite of one build fared against the generic mutants."""

    build: str
    generated: int = 0
    killed: int = 0
    equivalent: int = 0
    survivors: list[CellMutant] = field(default_factory=list)
    #: Recorded equivalents that no generated mutant has any more (the line was edited).
    stale: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def score(self) -> float:
        live = self.generated - self.equivalent
        return self.killed / live if live else 1.0


def cell_sections(source: str) -> list[tuple[int, str, int, int]]:
    """(cell number, tag, start, end) of each cell's text in the exported `source`; the text
    from its marker's start to `start` is the marker line."""
    marks = list(_MARKER.finditer(source))
    sections = []
    for i, mark in enumerate(marks):
        start = mark.end() + 1
        end = marks[i + 1].start() if i + 1 < len(marks) else len(source)
        sections.append((int(mark[1]), mark[2], start, end))
    return sections


def replace_cell(source: str, start: int, end: int, body: str) -> str:
    """`source` with the cell text at [start, end) replaced by `body`, its marker's line count
    made true again (the export runs each cell as the count says: a stale count would run
    the module whole, not cell by cell as the kernel does)."""
    marker_start = source.rfind("\n", 0, start - 1) + 1
    marker = source[marker_start : start - 1]
    body = body.rstrip()
    count = body.count("\n") + 1
    marker = re.sub(r", \d+ lines?", f", {count} line{'s' * (count != 1)}", marker, count=1)
    return source[:marker_start] + marker + "\n" + body + "\n\n" + source[end:].lstrip("\n")


def generate(source: str, *, limit_per_cell: int | None = None) -> list[CellMutant]:
    """Every generic mutant of every answer cell of the exported `source`, each with its
    `stable_id` (a second mutant with the same diff, the same line twice, gets ``#2``)."""
    found = []
    taken: dict[str, int] = {}
    for cell, tag, start, end in cell_sections(source):
        if tag != "answer":
            continue
        for mutant in mutants(source[start:end], limit=limit_per_cell):
            text = replace_cell(source, start, end, mutant.source)
            name = stable_id(mutant.operator, mutant.diff)
            taken[name] = taken.get(name, 0) + 1
            if taken[name] > 1:
                name = f"{name}#{taken[name]}"
            found.append(CellMutant(cell, mutant, text, name))
    return found


def score_build(build: str, pool: RunnerPool, *, limit_per_cell: int | None = None) -> SuiteScore:
    """Grade every generic mutant of build `build`'s solution with its hidden suite. A mutant
    recorded as equivalent is still graded: one that a test now kills counts as killed."""
    started = time.perf_counter()
    manifest = load_manifest()
    entry = manifest.entry(build)
    assert entry.solution, f"build {build} has no solution"
    source = export_source(manifest.root / entry.solution)
    suite = load_suite(build)
    made = generate(source, limit_per_cell=limit_per_cell)
    recorded = {e.id: e for e in suite.equivalents}
    report = SuiteScore(build=build, generated=len(made))
    report.stale = sorted(set(recorded) - {item.id for item in made})

    # Killed means a graded test failed: not a score below the entry's maximum, which also
    # counts the points of the learners' own tests (no mutant of the answers earns those).
    def grade(runner: Runner, item: CellMutant) -> bool:
        result = runner.grade_source(build, item.source, label=item.where, suite=suite)
        return bool(result.failed)

    verdicts = pool.map(grade, made)
    for item, killed in zip(made, verdicts, strict=True):
        if killed:
            report.killed += 1
        elif item.id in recorded:
            report.equivalent += 1
        else:
            report.survivors.append(item)
    report.seconds = time.perf_counter() - started
    return report


def render_report(report: SuiteScore) -> str:
    """The report a suite author reads: the figures, then each survivor's id, words and diff
    (the id and diff are what an ``[[equivalent]]`` table records)."""
    lines = [
        f"build {report.build}: {report.generated} mutants generated, {report.killed} killed,"
        f" {report.equivalent} equivalent, {len(report.survivors)} survived"
        f" ({report.score:.1%} of non-equivalent killed; {report.seconds:.1f} s)"
    ]
    for item in report.survivors:
        lines.append(f"  survivor {item.id} ({item.where}): {item.mutant.description}")
        lines.extend(f"      {ln}" for ln in item.mutant.diff.splitlines()[:8])
    for name in report.stale:
        lines.append(f"  recorded equivalent {name} matches no mutant now: remove it")
    return "\n".join(lines)


_TABLE = """[[equivalent]]
id = "{id}"
diff = '''
{diff}
'''
why = ""
"""


def equivalent_tables(report: SuiteScore) -> str:
    """The survivors as ``[[equivalent]]`` tables for ``mutants.toml``, each ``why`` left
    blank: the suite refuses to load until someone who checked it writes the reason."""
    return "\n".join(_TABLE.format(id=item.id, diff=item.mutant.diff) for item in report.survivors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.proofs.suitemutants", description=__doc__
    )
    parser.add_argument("builds", nargs="*", help="build numbers (default: every graded build)")
    parser.add_argument("--threshold", type=float, default=0.95)
    parser.add_argument("--limit-per-cell", type=int, default=None)
    parser.add_argument("--workers", type=int, default=2, help="runners in parallel (default 2)")
    parser.add_argument(
        "--tables", action="store_true", help="also print the survivors as [[equivalent]] tables"
    )
    args = parser.parse_args(argv)
    manifest = load_manifest()
    builds = args.builds or [e.number for e in manifest.graded if e.kind == "build" and e.solution]
    failed = False
    with RunnerPool(args.workers) as pool:
        for build in builds:
            report = score_build(build, pool, limit_per_cell=args.limit_per_cell)
            print(render_report(report), flush=True)
            if args.tables and report.survivors:
                print("\n" + equivalent_tables(report), flush=True)
            failed |= report.score < args.threshold
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
