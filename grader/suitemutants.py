"""Mutation-test the hidden suites themselves: ``python -m grader.suitemutants BUILD``.

A list of the bugs a suite's authors thought of is not enough: its blind spots show when the
solution is broken systematically. For every answer cell of the solution, every mutant that
`workbook.mutation` makes (the same mutator the learners' self-check uses) is graded by the
build's hidden suite; a mutant that still earns full marks *survives*. Each survivor must be
killed by a new hidden test, or recorded in the build's ``mutants.toml`` as a ``[[mutant]]``
with ``equivalent = "why"`` and an edit that reproduces it on the solution text (it behaves
exactly like the solution under the spec). The report lists the survivors with their diffs.

Grading the same solution twice makes the same mutants and the same verdicts. Nothing here
writes to the repository.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
import time
from dataclasses import dataclass, field

from grader.pool import RunnerPool
from grader.runner import Runner
from grader.suites import Mutant as KnownBug
from grader.suites import load_suite
from workbook.export import export_source
from workbook.manifest import load_manifest
from workbook.mutation import Mutant, mutants

#: The export's marker before each cell: ``# %% cell 7 [answer]``.
_MARKER = re.compile(r"^# %% cell (\d+) \[(\w+)\]$", re.MULTILINE)


@dataclass(frozen=True)
class CellMutant:
    """A generic mutant of one answer cell, placed back into the whole exported source."""

    cell: int
    mutant: Mutant
    source: str

    @property
    def id(self) -> str:
        return f"cell {self.cell}: {self.mutant.id}"


@dataclass
class SuiteScore:
    """How the hidden suite of one build fared against the generic mutants."""

    build: str
    generated: int = 0
    killed: int = 0
    equivalent: int = 0
    survivors: list[CellMutant] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def score(self) -> float:
        live = self.generated - self.equivalent
        return self.killed / live if live else 1.0


def cell_sections(source: str) -> list[tuple[int, str, int, int]]:
    """(cell number, tag, start, end) of each cell's text in the exported `source`."""
    marks = list(_MARKER.finditer(source))
    sections = []
    for i, mark in enumerate(marks):
        start = mark.end() + 1
        end = marks[i + 1].start() if i + 1 < len(marks) else len(source)
        sections.append((int(mark[1]), mark[2], start, end))
    return sections


def generate(source: str, *, limit_per_cell: int | None = None) -> list[CellMutant]:
    """Every generic mutant of every answer cell of the exported `source`."""
    found = []
    for cell, tag, start, end in cell_sections(source):
        if tag != "answer":
            continue
        for mutant in mutants(source[start:end], limit=limit_per_cell):
            text = source[:start] + mutant.source.rstrip() + "\n\n" + source[end:]
            found.append(CellMutant(cell, mutant, text))
    return found


def equivalent_sources(source: str, known: tuple[KnownBug, ...]) -> set[str]:
    """The unparsed answer cells of every known bug marked equivalent: a generic mutant whose
    cell unparses to one of these is the same program and not counted against the suite."""
    found = set()
    for bug in known:
        if not getattr(bug, "equivalent", ""):
            continue
        mutated = bug.apply(source)
        for _cell, tag, start, end in cell_sections(mutated):
            if tag == "answer":
                try:
                    found.add(ast.unparse(ast.parse(mutated[start:end])))
                except SyntaxError:
                    continue
    return found


def score_build(build: str, pool: RunnerPool, *, limit_per_cell: int | None = None) -> SuiteScore:
    """Grade every generic mutant of build `build`'s solution with its hidden suite."""
    started = time.perf_counter()
    entry = load_manifest().entry(build)
    root = load_manifest().root
    assert entry.solution, f"build {build} has no solution"
    source = export_source(root / entry.solution)
    suite = load_suite(build)
    full = entry.max_points
    made = generate(source, limit_per_cell=limit_per_cell)
    same = equivalent_sources(source, suite.mutants)
    report = SuiteScore(build=build, generated=len(made))

    def grade(runner: Runner, item: CellMutant) -> int:
        return runner.grade_source(build, item.source, label=item.id, suite=suite).score

    scores = pool.map(grade, made)
    for item, score in zip(made, scores, strict=True):
        if score < full:
            report.killed += 1
        elif item.mutant.source in same:
            report.equivalent += 1
        else:
            report.survivors.append(item)
    report.seconds = time.perf_counter() - started
    return report


def render_report(report: SuiteScore) -> str:
    """The report a suite author reads: the figures, then each survivor's words and diff."""
    lines = [
        f"build {report.build}: {report.generated} mutants generated, {report.killed} killed,"
        f" {report.equivalent} equivalent, {len(report.survivors)} survived"
        f" ({report.score:.1%} of non-equivalent; {report.seconds:.1f} s)"
    ]
    for item in report.survivors:
        lines.append(f"  survivor {item.id}: {item.mutant.description}")
        lines.extend(f"      {ln}" for ln in item.mutant.diff.splitlines()[:8])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.suitemutants", description=__doc__)
    parser.add_argument("builds", nargs="*", help="build numbers (default: every graded build)")
    parser.add_argument("--threshold", type=float, default=0.95)
    parser.add_argument("--limit-per-cell", type=int, default=None)
    args = parser.parse_args(argv)
    manifest = load_manifest()
    builds = args.builds or [e.number for e in manifest.graded if e.kind == "build" and e.solution]
    failed = False
    with RunnerPool(os.cpu_count() or 2) as pool:
        for build in builds:
            report = score_build(build, pool, limit_per_cell=args.limit_per_cell)
            print(render_report(report), flush=True)
            failed |= report.score < args.threshold
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
