"""The self-check of a test-writing step: ``selfcheck("03", "test_<name>")`` for a `test` cell.

The learner's test is run by `workbook.checking.learnertests` on the learner's own setup and answer
cells and on a second wheat made of them, then with each bug of the step's ``catches`` laid over
both (`workbook.checking.layover`, the definitions the grader lays over the reference). Its points
come from `workbook.checking.layover.score`, as at grading, so "done" here means full marks there.
It runs only once the seams' own visible checks pass, so the code under the bugs is right. Running
it again rebuilds everything and gives the same report (Hypothesis runs derandomized).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from workbook.checking.fixedhypothesis import DEFAULT_EXAMPLES
from workbook.checking.layover import NO_FIXTURES, LaidOver, Verdict, score
from workbook.checking.learnertests import (
    JUDGED_SURVIVORS,
    MAX_MUTANTS,
    LearnerTestReport,
    Sources,
    check,
)
from workbook.checks import CheckResult, Checks
from workbook.shared.buildfolder import answer_checks, has_written_tests, written_tests
from workbook.shared.export import cell_source, cell_tags, read_notebook
from workbook.shared.manifest import LearnerTestSpec, load_manifest

#: Advice survivors shown per test: enough to act on, few enough to read.
SHOWN_SURVIVORS = JUDGED_SURVIVORS
STUB = "not written yet"


def is_test_step(names_or_steps: Sequence[str]) -> bool:
    return bool(names_or_steps) and all(n.startswith("test_") for n in names_or_steps)


def seams_of(build: str, name: str) -> tuple[str, ...]:
    """The seams test `name` of `build` tests (its ``LEARNER_TESTS`` entry)."""
    tests: dict[str, tuple[str, ...]] = written_tests(build).LEARNER_TESTS
    if name not in tests:
        raise KeyError(f"no test-writing step named {name} in build {build}")
    return tests[name]


def spec_of(build: str, name: str) -> LearnerTestSpec:
    """The manifest's entry of test `name` of `build`: its points, catches and gate."""
    specs = {s.name: s for s in load_manifest().entry(build).learner_tests}
    if name not in specs:
        raise KeyError(f"no [[learner_test]] named {name} in builds/build{build}/build.toml")
    return specs[name]


def bugs_of(build: str, name: str) -> list[LaidOver]:
    """The laid-over bugs test `name` must catch, in its ``catches`` order."""
    laid: dict[str, LaidOver] = written_tests(build).LAID_OVER
    return [laid[bug] for bug in spec_of(build, name).catches]


def contract_of(build: str, name: str) -> list[LaidOver]:
    """What the contract of test `name`'s seams leaves free, laid over its second wheat."""
    variants: dict[str, tuple[LaidOver, ...]] = written_tests(build).CONTRACT_VARIANTS
    return [v for seam in seams_of(build, name) for v in variants.get(seam, ())]


def neutral_of(build: str) -> str:
    """The build's neutral layers (``NEUTRAL``): laid over every wheat, under every bug."""
    layers: tuple[LaidOver, ...] = getattr(written_tests(build), "NEUTRAL", ())
    return "\n".join(layer.source for layer in layers)


def gate(checks: Checks, seams: Sequence[str]) -> list[str]:
    """The steps whose visible checks must pass first: those named like a seam (``sink`` for
    ``IdempotentSink``); every step when none is."""
    flat = [s.lower().replace("_", "") for s in seams]
    steps = [st for st in checks.steps if any(st.replace("_", "") in f for f in flat)]
    return steps or list(checks.steps)


def gate_steps(build: str, names: Sequence[str]) -> list[str]:
    """Every step gating the test-writing steps `names` of `build`."""
    checks: Checks = answer_checks(build)
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
    try:
        return spec_of(build, name).max_examples
    except KeyError:
        return DEFAULT_EXAMPLES


def run_step(build: str, name: str, sources: Sources, *, advice: bool = True) -> LearnerTestReport:
    """Test `name` on the learner's code and its second wheat, with each bug laid over; with
    `advice`, generic mutants of the lines it ran too."""
    seams = seams_of(build, name)
    caps: dict[str, int] = getattr(written_tests(build), "MAX_MUTANTS_OF", {})
    (report,) = check(
        sources,
        [name],
        seams=list(seams),
        bugs=bugs_of(build, name),
        contract=contract_of(build, name),
        neutral=neutral_of(build),
        max_examples=max_examples(build, name),
        max_mutants=caps.get(name, MAX_MUTANTS),
        judge=(build, gate(answer_checks(build), seams)),
        advice=advice,
    )
    return report


SECOND_WHEAT = (
    "your own code, rewritten to behave the same (locals renamed, each function wrapped,"
    " the contract's free choices made differently)"
)


def verdict(build: str, name: str, report: LearnerTestReport) -> Verdict:
    """The points the grader would give the test, from what the self-check saw."""
    spec = spec_of(build, name)
    words = {b.name: b.words for b in bugs_of(build, name)}
    failure = ""
    if not report.passes:
        failure = f"it fails on your own code, which passes its visible checks: {report.message}"
        if STUB in report.message or "not defined" in report.message:
            failure = f"{name} is {STUB}"
    elif report.wheat_failure:
        failure = f"it fails on {SECOND_WHEAT}: {report.wheat_failure}"
    return score(
        points=spec.points,
        catches=spec.catches,
        gate=spec.gate,
        caught=report.caught,
        words=words,
        wheat_failure=failure,
    )


def _verdict(checks: str | None) -> str:
    """What the step's visible checks said of a surviving mutant."""
    if checks == "fail":
        return " (a bug, which the step's own checks catch)"
    return ""


def step_report(build: str, name: str, report: LearnerTestReport) -> str:
    """The report: passes on every wheat, each bug of the step caught or not, the points,
    then (advice) mutants of lines the test ran that it lets through."""
    title = f"Self-check, build {build} (your {name}):"
    got = verdict(build, name, report)
    if not report.passes:
        if STUB in report.message:
            return f"{title}\n  · {name} is {STUB}: write it in the test cell above."
        if "not defined" in report.message:
            return f"{title}\n  ✗ no `def {name}` in a cell tagged `test`: define it there."
        if "required positional argument" in report.message:
            return f"{title}\n  ✗ {name} takes arguments, but {NO_FIXTURES}."
        return (
            f"{title}\n  ✗ {name} fails on your own code, which passes its visible checks:"
            f" {report.message}\n  A test that rejects correct code costs its points: check"
            " what it expects."
        )
    if report.wheat_failure:
        return (
            f"{title}\n  ✓ passes on your code\n  ✗ fails on {SECOND_WHEAT}:"
            f" {report.wheat_failure}\n  A test must check what the code does, not how it is"
            " written: it runs on other correct code at grading too. Not done (0 of"
            f" {got.max_points} points)."
        )
    lines = [title, "  ✓ passes on your code, and on it rewritten to behave the same"]
    for bug in bugs_of(build, name):
        if report.caught.get(bug.name):
            lines.append(f"  ✓ fails, as it should, when {bug.words}")
        else:
            lines.append(f"  ✗ still passes when {bug.words}: it shows when {bug.visible_when}")
    shown = report.survivors[:SHOWN_SURVIVORS] if got.done else []
    if shown:
        lines.append("  Advice, not graded: changes to lines your test ran that it lets through:")
    for survivor in shown:
        lines.append(f"    - {survivor['description']}{_verdict(survivor.get('checks'))}")
    if got.done:
        lines.append(
            f"This step is done ({got.points} of {got.max_points} points): your test can fail,"
            " and does on every bug it must catch."
        )
    else:
        first = "the first bug above" if got.points == 0 else "the bugs marked ✗"
        lines.append(
            f"Not done ({got.points} of {got.max_points} points): make the test fail on"
            f" {first}, and run this cell again."
        )
    return "\n".join(lines)


def result(build: str, name: str, sources: Sources) -> CheckResult:
    """Test `name` as one check of its build: passed exactly when it earns full points."""
    report = run_step(build, name, sources, advice=False)
    got = verdict(build, name, report)
    if got.done:
        return CheckResult(name, "test", "passed")
    if not report.passes and (STUB in report.message or "not defined" in report.message):
        return CheckResult(name, "test", "not done", f"{name} is {STUB}")
    why = got.problem or "; ".join(got.lines)
    return CheckResult(
        name,
        "test",
        "failed",
        f"{got.points} of {got.max_points} points: {why}",
    )


def saved_sources(path: Path) -> Sources:
    """A build notebook's setup, answer and test cells as saved (what `make progress`, the
    learner's `make check` and the grader read); its path is given to the setup cells, which
    may load a sibling build from the same folder."""
    cells = read_notebook(path)["cells"]
    tagged = {
        tag: tuple(cell_source(c) for c in cells if tag in cell_tags(c))
        for tag in ("setup", "answer", "test")
    }
    where = f"__notebook__ = {str(path.resolve())!r}"
    return Sources((where, *tagged["setup"]), tagged["answer"], tagged["test"])


def results(build: str, sources: Sources, checked: Sequence[CheckResult]) -> list[CheckResult]:
    """Each test-writing step of `build` as one more check (`result`), in manifest order; a
    step whose seams' visible checks (in `checked`) do not all pass yet is not tried. Steps
    run side by side (each is a process of its own)."""
    if not has_written_tests(build):
        return []
    checks: Checks = answer_checks(build)

    def one(spec: LearnerTestSpec) -> CheckResult:
        steps = gate(checks, seams_of(build, spec.name))
        failing = [r.name for r in checked if r.step in steps and not r.passed]
        if not failing:
            return result(build, spec.name, sources)
        why = (
            f"not done yet: your test is tried once the checks of step {', '.join(steps)}"
            f" pass ({', '.join(failing[:3])} do not yet)"
        )
        return CheckResult(spec.name, "test", "not done", why)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(one, load_manifest().entry(build).learner_tests))
