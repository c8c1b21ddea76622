"""Grade every known bug of a hidden suite and say which graded tests fail on each: the
``mutant …`` rows of validity's table (`mutant_lines`), and the failures "what to reteach"
matches a class against (`grader.classes.reteach`). Grading the same bugs twice gives the same rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from grader.runtime.pool import RunnerPool
from grader.runtime.results import SubmissionResult
from grader.runtime.runner import Runner
from grader.suites.loading import Suite, SuiteError
from workbook.shared.manifest import Entry


@dataclass
class Line:
    """One row of the table: a claim, whether it holds, and what backs it up."""

    name: str
    ok: bool
    summary: str
    details: list[str] = field(default_factory=list)


def mutant_lines(
    suite: Suite,
    source: str,
    pool: RunnerPool,
    build: str,
    entry: Entry,
    failures: dict[str, set[str]] | None = None,
) -> list[Line]:
    """One line per known bug (killed, or by whom not); `failures` receives, by bug, the
    graded tests that fail on it."""

    def grade(runner: Runner, index: int) -> tuple[int, SubmissionResult | str]:
        mutant = suite.mutants[index]
        try:
            mutated = mutant.apply(source)
        except SuiteError as exc:
            return index, str(exc)
        result = runner.grade_source(
            build, mutated, label=f"mutant {mutant.name}", suite=suite, entry=entry
        )
        return index, result

    lines = []
    start = time.perf_counter()
    for index, outcome in pool.map(grade, list(range(len(suite.mutants)))):
        mutant = suite.mutants[index]
        name = f"mutant {mutant.name}"
        if isinstance(outcome, str):
            lines.append(Line(name, False, "does not apply", outcome.splitlines()))
        elif not outcome.failed:
            lines.append(
                Line(name, False, f"SURVIVES ({outcome.score}/{outcome.max_score})", [mutant.bug])
            )
        else:
            killers = outcome.failed
            if failures is not None:
                failures[mutant.name] = set(killers)
            shown = ", ".join(killers[:3]) + (f" (+{len(killers) - 3})" if len(killers) > 3 else "")
            lines.append(Line(name, True, f"killed by {shown}"))
    killed = sum(line.ok for line in lines)
    seconds = time.perf_counter() - start
    summary = f"{killed} of {len(lines)} killed ({seconds:.1f} s)"
    lines.append(Line("mutants", killed == len(lines) and bool(lines), summary))
    return lines
