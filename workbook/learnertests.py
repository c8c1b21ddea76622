"""A learner's own tests, run the way a test that can fail must be: against their code, then
against that code broken on purpose.

The learner writes ``test_<name>`` functions in cells tagged ``test``. A test earns trust only
if it passes on the learner's implementation *and* fails on each plausible bug of it: the
mutants of `workbook.mutation`, made inside the seams it tests, and one named **sabotage** per
seam (the "remove the key" bug of seed 002 made concrete, such as a `content_key` that returns a
fresh key every call). `check` reports, per test: whether it passes on the learner's code, how
many mutants it kills, and each survivor as a short diff with the words of its description.

Everything runs in a fresh interpreter (`python -m workbook.learnertests`, fed one JSON job on
stdin), so a mutant that loops forever costs only its own time limit and nothing a mutant does
reaches the learner's kernel. Async tests run on virtual time. Hypothesis runs with the settings
of `workbook.fixedhypothesis` (derandomized, no database, no deadline, no shrinking), as it does
at grading, so the same tests give the same report on every run.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from workbook import fixedhypothesis, vtime
from workbook.feedback import cut
from workbook.modules import execute, fresh_module, registered
from workbook.mutation import Mutant, mutants

#: Real seconds one test may take on one mutant before it counts as caught (it hung).
TEST_SECONDS = 0.5
#: Real seconds on the learner's own code, which is right: room for a cold start (Hypothesis's
#: first run costs 0.2 s, three times that on a busy machine) without calling the test wrong.
OWN_SECONDS = 2.0
#: Mutants tried per test at most: the self-check must answer in about two seconds.
MAX_MUTANTS = 60
#: Survivors per test put to the step's visible checks (the report shows this many), the real
#: seconds those checks may take on one of them, and on all of them together (the self-check
#: must still answer in about two seconds; a survivor past it is shown without a verdict).
JUDGED_SURVIVORS = 3
CHECK_SECONDS = 1.0
JUDGE_BUDGET_SECONDS = 1.5


@dataclass(frozen=True)
class Sabotage:
    """A named bug made by rebinding names after the answers ran (``content_key = ...``)."""

    name: str
    description: str
    source: str


@dataclass(frozen=True)
class Sources:
    """A build's code as the learner wrote it: setup, answer and test cells, in order."""

    setup: tuple[str, ...]
    answers: tuple[str, ...]
    tests: tuple[str, ...]


@dataclass
class LearnerTestReport:
    """What became of one learner test."""

    name: str
    passes: bool
    message: str = ""
    killed: int = 0
    total: int = 0
    survivors: list[dict[str, str]] = field(default_factory=list)
    sabotage_caught: dict[str, bool] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return self.killed / self.total if self.total else 0.0


# ---------------------------------------------------------------------------------------
# Inside the fresh interpreter.


class _TimeUp(BaseException):  # a BaseException, so a learner's `except Exception` can't eat it
    """A test ran past `TEST_SECONDS` of real time."""


def _alarm(signum: int, frame: Any) -> None:
    raise _TimeUp()


def _build(sources: Sources, answers: Sequence[str], extra: str = "") -> dict[str, Any]:
    """Run setup, `answers`, `extra` (a sabotage) and the test cells in one fresh module."""
    return _module(sources, answers, extra).__dict__


def _module(
    sources: Sources, answers: Sequence[str], extra: str = "", *, tests: bool = True
) -> types.ModuleType:
    module = fresh_module("learner_tests_subject")
    with registered(module):
        cells = (*sources.setup, *answers, extra, *(sources.tests if tests else ()))
        for i, text in enumerate(cells):
            if text:
                execute(module, text, f"<cell {i + 1}>")
    return module


def _visible_checks_catch(judge: dict[str, Any], sources: Sources, answers: list[str]) -> bool:
    """Whether the step's own visible checks fail on this mutant (then it is a real bug, not
    one that behaves exactly like the learner's code). A mutant that hangs them, or does not
    load, is caught."""
    from workbook.checks import Checks  # the checks import the build's fixtures: only here

    checks: Checks = importlib.import_module(f"workbook.buildchecks.build{judge['build']}").CHECKS
    signal.setitimer(signal.ITIMER_REAL, float(judge.get("seconds", CHECK_SECONDS)))
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            # The answers alone: nothing a test cell does at its top level sways the verdict.
            results = checks.run(_module(sources, answers, tests=False), *judge["steps"])
    except BaseException:  # it hung, or did not load: the checks would say so too
        return True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return not all(r.passed for r in results)


def _run(fn: Callable[[], Any], seconds: float = TEST_SECONDS) -> tuple[bool, str]:
    """(passed, why not) for one test function; never raises."""
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            outcome = fn()
            if inspect.iscoroutine(outcome):
                vtime.run(outcome, deadline=vtime.VIRTUAL_DEADLINE)
    except _TimeUp:
        return False, f"did not finish within {seconds:g} s"
    except AssertionError as exc:
        return False, cut(f"AssertionError: {exc}" if str(exc) else "AssertionError")
    except BaseException as exc:  # a test that crashes fails; that is a catch too
        return False, cut(f"{type(exc).__name__}: {exc}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return True, ""


def _tests(namespace: dict[str, Any], names: Sequence[str]) -> dict[str, Callable[[], Any]]:
    found = {n: namespace[n] for n in names if callable(namespace.get(n))}
    for fn in found.values():
        fixedhypothesis.hold(fn)  # a test's own @settings never changes the verdict
    return found


def _configure_hypothesis(max_examples: int) -> None:
    with contextlib.suppress(ImportError):
        fixedhypothesis.load(max_examples)


def run_job(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The child's work: every test on the learner's code, then on each mutant and sabotage."""
    signal.signal(signal.SIGALRM, _alarm)
    sources = Sources(tuple(job["setup"]), tuple(job["answers"]), tuple(job["tests"]))
    random.seed(fixedhypothesis.SEED)  # as at grading: the same draws on every run
    if any("hypothesis" in text for text in (*sources.setup, *sources.tests)):
        _configure_hypothesis(
            int(job.get("max_examples", fixedhypothesis.DEFAULT_EXAMPLES))
        )  # its import costs 0.7 s
    names: list[str] = job["names"]
    reports = {
        n: LearnerTestReport(n, passes=False, message="not defined in a test cell") for n in names
    }
    try:
        own = _tests(_build(sources, sources.answers), names)
    except BaseException as exc:
        for report in reports.values():
            report.message = cut(f"your cells raised {type(exc).__name__}: {exc}")
        return [asdict(r) for r in reports.values()]
    for name, fn in own.items():
        reports[name].passes, reports[name].message = _run(fn, OWN_SECONDS)
    passing = [n for n in own if reports[n].passes]
    if not passing:
        return [asdict(r) for r in reports.values()]
    for sabotage in job.get("sabotage", []):
        try:
            broken = _tests(_build(sources, sources.answers, sabotage["source"]), passing)
        except BaseException:
            broken = {}
        for name in passing:
            caught = name not in broken or not _run(broken[name])[0]
            reports[name].sabotage_caught[sabotage["name"]] = caught
    cap = int(job.get("max_mutants", MAX_MUTANTS))
    judge: dict[str, Any] | None = job.get("judge")
    verdicts: dict[str, bool] = {}  # by mutant: do the visible checks catch it?
    judging = 0.0  # seconds spent on them so far
    for index, text in enumerate(sources.answers):
        for mutant in _cell_mutants(text, job.get("seams")):
            if all(reports[n].total >= cap for n in passing):
                break  # every test has met its cap: building more mutants is wasted time
            answers = list(sources.answers)
            answers[index] = mutant.source
            try:
                broken = _tests(_build(sources, answers), passing)
            except BaseException:
                broken = {}  # the mutant does not even load: every test catches it
            for name in passing:
                report = reports[name]
                if report.total >= cap:
                    continue
                report.total += 1
                if name not in broken or not _run(broken[name])[0]:
                    report.killed += 1
                    continue
                survivor = {"description": mutant.description, "diff": cut(mutant.diff, 400)}
                judged = sum("checks" in s for s in report.survivors)
                if judge is not None and judged < int(judge.get("limit", JUDGED_SURVIVORS)):
                    if mutant.id not in verdicts and judging < JUDGE_BUDGET_SECONDS:
                        started = time.perf_counter()
                        verdicts[mutant.id] = _visible_checks_catch(judge, sources, answers)
                        judging += time.perf_counter() - started
                    if mutant.id in verdicts:
                        survivor["checks"] = "fail" if verdicts[mutant.id] else "pass"
                report.survivors.append(survivor)
    return [asdict(r) for r in reports.values()]


def _cell_mutants(text: str, seams: Sequence[str] | None) -> list[Mutant]:
    try:
        return mutants(text, within=list(seams) if seams else None)
    except SyntaxError:
        return []


# ---------------------------------------------------------------------------------------
# The parent's side.


def check(
    sources: Sources,
    names: Sequence[str],
    *,
    seams: Sequence[str] | None = None,
    sabotage: Sequence[Sabotage] = (),
    max_examples: int = fixedhypothesis.DEFAULT_EXAMPLES,
    max_mutants: int = MAX_MUTANTS,
    timeout: float = 30.0,
    judge: tuple[str, Sequence[str]] | None = None,
) -> list[LearnerTestReport]:
    """Run the learner tests `names` on their code and its mutants (inside `seams`, the
    top-level definitions under test) in a fresh interpreter; one report per name. `judge`:
    (build, steps) whose visible checks meet each test's first survivors, so a report can
    tell a bug the test misses (the checks fail on it) from a mutant that may behave exactly
    like the learner's code (they pass)."""
    job = {
        "setup": list(sources.setup),
        "answers": list(sources.answers),
        "tests": list(sources.tests),
        "names": list(names),
        "seams": list(seams) if seams else None,
        "sabotage": [asdict(s) for s in sabotage],
        "max_examples": max_examples,
        "max_mutants": max_mutants,
        "judge": None if judge is None else {"build": judge[0], "steps": list(judge[1])},
    }
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "workbook.learnertests"],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        why = f"the test run did not finish within {timeout:g} s"
        return [LearnerTestReport(n, passes=False, message=why) for n in names]
    try:
        raw = json.loads(done.stdout.splitlines()[-1])
    except (IndexError, ValueError):
        why = cut(f"the test run failed: {done.stderr.strip()[-300:] or done.returncode}")
        return [LearnerTestReport(n, passes=False, message=why) for n in names]
    return [LearnerTestReport(**r) for r in raw]


def main() -> int:
    job = json.loads(sys.stdin.read())
    started = time.perf_counter()
    reports = run_job(job)
    sys.stdout.write("\n" + json.dumps(reports) + "\n")
    sys.stderr.write(f"learner tests: {time.perf_counter() - started:.2f} s\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
