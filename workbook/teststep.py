"""The self-check of a test-writing step: ``selfcheck("03", "test_rerun_writes_zero_new_rows")``.

The learner's test is run by `workbook.learnertests` on the learner's own setup and answer
cells (a test that rejects correct code is named), then on the build's sabotage of the seams it
tests and on mutants of those seams. It runs only once the seams' own visible checks pass, so
the code being mutated is right. Running it again rebuilds everything and gives the same report
(Hypothesis runs derandomized).
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Sequence

from workbook.checks import CheckResult, Checks
from workbook.fixedhypothesis import DEFAULT_EXAMPLES
from workbook.learnertests import (
    JUDGED_SURVIVORS,
    MAX_MUTANTS,
    LearnerTestReport,
    Sabotage,
    Sources,
    check,
)
from workbook.manifest import load_manifest

#: Survivors shown per test: enough to act on, few enough to read; each is put to the visible
#: checks first.
SHOWN_SURVIVORS = JUDGED_SURVIVORS
STUB = "not written yet"


def is_test_step(names_or_steps: Sequence[str]) -> bool:
    return bool(names_or_steps) and all(n.startswith("test_") for n in names_or_steps)


def _buildchecks(build: str) -> types.ModuleType:
    return importlib.import_module(f"workbook.buildchecks.build{build}")


def _learner_side(build: str) -> types.ModuleType:
    """Where `build` keeps ``LEARNER_TESTS`` and ``SABOTAGE``: ``buildNN_tests`` when it has
    one (build 07's checks fill their own module), else its checks module."""
    name = f"workbook.buildchecks.build{build}_tests"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:  # the module exists and an import inside it failed
            raise
        return _buildchecks(build)


def seams_of(build: str, name: str) -> tuple[str, ...]:
    """The seams test `name` of `build` tests (its ``LEARNER_TESTS`` entry)."""
    tests: dict[str, tuple[str, ...]] = getattr(_learner_side(build), "LEARNER_TESTS", {})
    if name not in tests:
        raise KeyError(f"no test-writing step named {name} in build {build}")
    return tests[name]


def sabotage_for(build: str, seams: Sequence[str], name: str = "") -> list[Sabotage]:
    """The build's sabotage for test `name` of `seams`: those its ``SABOTAGE_OF`` lists for
    it, if any; else what rebinds one of its seams, or rebinds no seam of another learner test
    (a sink's sabotage is no bug of the retry loop)."""
    from workbook.selfcheck import _bound  # selfcheck imports this module: import late

    module = _learner_side(build)
    every: list[Sabotage] = getattr(module, "SABOTAGE", [])
    listed: dict[str, tuple[str, ...]] = getattr(module, "SABOTAGE_OF", {})
    if name in listed:
        return [s for s in every if s.name in listed[name]]
    tests: dict[str, tuple[str, ...]] = getattr(module, "LEARNER_TESTS", {})
    others = {seam for these in tests.values() for seam in these} - set(seams)
    return [s for s in every if _bound(s.source) & set(seams) or not _bound(s.source) & others]


def gate(checks: Checks, seams: Sequence[str]) -> list[str]:
    """The steps whose visible checks must pass first: those named like a seam (``sink`` for
    ``IdempotentSink``); every step when none is."""
    flat = [s.lower().replace("_", "") for s in seams]
    steps = [st for st in checks.steps if any(st.replace("_", "") in f for f in flat)]
    return steps or list(checks.steps)


def gate_steps(build: str, names: Sequence[str]) -> list[str]:
    """Every step gating the test-writing steps `names` of `build`."""
    checks: Checks = _buildchecks(build).CHECKS
    return list(dict.fromkeys(s for n in names for s in gate(checks, seams_of(build, n))))


def gate_note(results: Sequence[CheckResult], steps: Sequence[str]) -> str | None:
    """None when every gating check passes, else what to finish first."""
    failing = [r.name for r in results if not r.passed]
    if not failing:
        return None
    return (
        f"· Not run yet: the visible checks of step {', '.join(steps)} do not all pass"
        f" ({', '.join(failing[:3])}). Your test is tried on your code once that code is"
        " right: run that step's self-check, and come back."
    )


def max_examples(build: str, name: str) -> int:
    """The examples a Hypothesis test gets here: the manifest's, the grader's own number."""
    specs = {s.name: s for s in load_manifest().entry(build).learner_tests}
    return specs[name].max_examples if name in specs else DEFAULT_EXAMPLES


def run_step(build: str, name: str, sources: Sources) -> LearnerTestReport:
    """Test `name` on the learner's code, the build's sabotage and mutants of its seams."""
    seams = seams_of(build, name)
    caps: dict[str, int] = getattr(_learner_side(build), "MAX_MUTANTS_OF", {})
    (report,) = check(
        sources,
        [name],
        seams=list(seams),
        sabotage=sabotage_for(build, seams, name),
        max_examples=max_examples(build, name),
        max_mutants=caps.get(name, MAX_MUTANTS),
        judge=(build, gate(_buildchecks(build).CHECKS, seams)),
    )
    return report


def _sabotage_lines(build: str, report: LearnerTestReport) -> list[str]:
    described = {s.name: s.description for s in getattr(_learner_side(build), "SABOTAGE", [])}
    lines = []
    for sabotage, caught in report.sabotage_caught.items():
        what = described.get(sabotage, sabotage)
        if caught:
            lines.append(f"  ✓ fails, as it should, when {what}")
        else:
            lines.append(
                f"  ✗ still passes when {what}: add an assertion that notices (remove that"
                " on purpose, once, in your code, and watch the test fail)"
            )
    return lines


def _verdict(checks: str | None) -> str:
    """What the step's visible checks said of a surviving mutant."""
    if checks == "fail":
        return ": a real bug (this step's checks fail on it); add an assertion that notices"
    if checks == "pass":
        return (
            ": this step's checks pass on it too, so it may behave exactly like your code;"
            " if it does not, your test can show how"
        )
    return ""


def step_report(build: str, name: str, report: LearnerTestReport) -> str:
    """The report: passes on the learner's code, the sabotage, the mutation score."""
    title = f"Self-check, build {build} (your {name}):"
    if not report.passes:
        if STUB in report.message:
            return f"{title}\n  · {name} is {STUB}: write it in the test cell above."
        if "not defined" in report.message:
            return f"{title}\n  ✗ no `def {name}` in a cell tagged `test`: define it there."
        return (
            f"{title}\n  ✗ {name} fails on your own code, which passes its visible checks:"
            f" {report.message}\n  A test that rejects correct code costs its points: check"
            " what it expects."
        )
    lines = [title, "  ✓ passes on your code", *_sabotage_lines(build, report)]
    lines.append(
        f"  Mutation score: {report.killed} of {report.total} mutants of your"
        f" {', '.join(seams_of(build, name))} caught."
    )
    if report.survivors:
        lines.append(f"  Mutants your test lets through (first {SHOWN_SURVIVORS}):")
    for survivor in report.survivors[:SHOWN_SURVIVORS]:
        lines.append(f"    - {survivor['description']}{_verdict(survivor.get('checks'))}")
    if any(not caught for caught in report.sabotage_caught.values()):
        lines.append("Not done: make the test fail on the bug above, and run this cell again.")
    else:
        lines.append("This step is done: your test can fail, and does when the code is wrong.")
    return "\n".join(lines)
