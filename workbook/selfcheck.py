"""The self-check cell of a build notebook: ``selfcheck("03", "content_id")``.

Runs the named checks (or every check of a step) against the names defined in the kernel
and prints, per check, pass or fail with the call, what came back and what was expected,
then the hint for the first check still failing. Running it again re-runs the checks.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

from workbook.checks import CheckResult, Checks, namespace
from workbook.manifest import load_manifest

MARKS = {"passed": "✓", "failed": "✗", "not done": "·", "error": "✗"}


def checks_for(build: str) -> Checks:
    """The visible checks of a build (``workbook.buildchecks.buildNN``)."""
    module = importlib.import_module(f"workbook.buildchecks.build{build}")
    checks: Checks = module.CHECKS
    return checks


def hints_for(build: str) -> dict[str, str]:
    try:
        entry = load_manifest().entry(build)
    except Exception:
        return {}
    return {t.name: t.hint for t in entry.tests}


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
    todo = next((r for r in results if not r.passed), None)
    if todo is None:
        summary += f" {done_note}" if whole_build else " This step is done: on to the next one."
    elif todo.name in hints:
        summary += f" Next: {hints[todo.name]}"
    lines.append(summary)
    return "\n".join(lines)


def selfcheck(build: str, *names_or_steps: str, ns: Any = None) -> None:
    """Run checks of `build` against the caller's globals (or `ns`) and print the report.

    Returns nothing, so a cell ending in ``selfcheck(...)`` shows the report once.
    """
    if ns is None:
        ns = namespace(sys._getframe(1).f_globals)
    results = checks_for(build).run(ns, *names_or_steps)
    which = ", ".join(names_or_steps) if names_or_steps else "all steps"
    title = f"Self-check, build {build} ({which}):"
    note = "Every step of this build is done."
    try:
        if load_manifest().entry(build).kind == "quiz":
            title = f"Self-check, concept check {build} ({which}):"
            note = "Every answer has a valid form; the grader marks whether it is right."
    except Exception:
        pass  # a notebook outside the manifest still gets its report
    print(
        report_text(
            results, hints_for(build), title, whole_build=not names_or_steps, done_note=note
        )
    )
