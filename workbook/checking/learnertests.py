"""A learner's own tests, run the way a test that can fail must be: on correct code written
two ways, then on that code with each bug it must catch laid over.

The learner writes ``test_<name>`` functions in cells tagged ``test``. A test earns trust only if it
passes on every correct implementation (*wheats*: the learner's code, and the same code with its
seams' locals renamed, recompiled and wrapped, under the contract's free variants) and fails when
each bug of its step's ``catches`` is laid over each wheat (`workbook.checking.layover`). `check`
reports, per test: whether it passes on the learner's code, how it failed the second wheat if it
did, which bugs it catches, and, as advice only, generic mutants (`workbook.checking.mutation`) of
the lines it ran that it lets through.

Everything runs in a fresh interpreter (`python -m workbook.checking.learnertests`, fed one JSON job
on stdin), and each run of a test in a fork of it, in an empty folder of its own (`_attempt`), so a
mutant that loops forever costs only its own time limit, nothing a run leaves reaches the next (as
at grading, one worker a run), and nothing reaches the learner's kernel. Async tests run on virtual
time. Hypothesis runs with the settings of `workbook.checking.fixedhypothesis` (derandomized, no
database, no deadline, no shrinking), as it does at grading, so the same tests give the same report
on every run.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from workbook import vtime
from workbook.checking import fixedhypothesis
from workbook.checking.feedback import cut
from workbook.checking.layover import (
    RUN_SECONDS,
    LaidOver,
    defined_names,
    same_behaviour,
    wrap_seams,
)
from workbook.checking.mutation import Mutant, mutants
from workbook.shared.buildfolder import answer_checks
from workbook.shared.modules import execute, fresh_module, registered

#: Real seconds one test may take on a generic mutant (advice only) before it counts as caught.
TEST_SECONDS = 0.25
#: Real seconds on a wheat or with a bug laid over: the grader's own limit, so a slow test is
#: judged alike on both sides (a run past it is "not passed" there too).
OWN_SECONDS = RUN_SECONDS
#: Mutants tried per test at most: the self-check must answer in about two seconds.
MAX_MUTANTS = 60
#: Survivors per test put to the step's visible checks (the report shows this many), the real
#: seconds those checks may take on one of them, and on all of them together (the self-check
#: must still answer in about two seconds; a survivor past it is shown without a verdict).
JUDGED_SURVIVORS = 3
CHECK_SECONDS = 1.0
JUDGE_BUDGET_SECONDS = 1.5


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
    """Advice: generic mutants of lines the test ran that it lets through."""
    caught: dict[str, bool] = field(default_factory=dict)
    """By laid-over bug: does the test fail with it over every wheat?"""
    wheat_failure: str = ""
    """How the test failed on the second wheat (the learner's code, rewritten to behave the
    same), when it did."""

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
    """Run setup, `answers`, `extra` (a wheat's wrappers, a laid-over bug) and the test cells
    in one fresh module."""
    return _module(sources, answers, extra).__dict__


def _module(
    sources: Sources, answers: Sequence[str], extra: str = "", *, tests: bool = True
) -> types.ModuleType:
    module = fresh_module("learner_tests_subject")
    with registered(module):
        code = (*sources.setup, *answers, extra)
        for i, text in enumerate(code):
            if text:
                execute(module, text, f"<cell {i + 1}>")
        # As in a grading worker: the test cells start from the same seed on every variant.
        random.seed(fixedhypothesis.SEED)
        for i, text in enumerate(sources.tests if tests else (), len(code)):
            if text:
                execute(module, text, f"<cell {i + 1}>")
    return module


def _visible_checks_catch(judge: dict[str, Any], sources: Sources, answers: list[str]) -> bool:
    """Whether the step's own visible checks fail on this mutant (then it is a real bug, not
    one that behaves exactly like the learner's code). A mutant that hangs them, or does not
    load, is caught."""
    from workbook.checks import Checks  # the checks import the build's fixtures: only here

    checks: Checks = answer_checks(judge["build"])
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
        # Built once here, Hypothesis's engine and strategies are there in every forked run.
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            fixedhypothesis.warm_up()
        fixedhypothesis.load(max_examples)  # the warm-up's own settings forgotten


def _variant(sources: Sources, contract: str) -> tuple[list[str], str]:
    """The second wheat made of the learner's own code: the answers with every function's
    locals renamed, recompiled, every function and method they define behind a wrapper, and
    the contract variants laid over; as (answers, text run after them)."""
    names = defined_names(sources.answers)
    answers = [same_behaviour(text, names) for text in sources.answers]
    return answers, wrap_seams(names) + "\n" + contract


def _executed(fn: Callable[[], Any], cells: set[str]) -> tuple[bool, str, set[tuple[str, int]]]:
    """`_run` of `fn` on the learner's own code, with the lines of `cells` it executed."""
    lines: set[tuple[str, int]] = set()

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename not in cells:
            return None
        if event == "line":
            lines.add((frame.f_code.co_filename, frame.f_lineno))
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        passed, why = _run(fn, OWN_SECONDS)
    finally:
        sys.settrace(previous)
    return passed, why, lines


def _attempt(
    sources: Sources,
    answers: Sequence[str],
    extra: str,
    names: Sequence[str],
    seconds: float,
    trace: set[str] | None = None,
) -> dict[str, Any]:
    """One variant in a fresh child of this process, in an empty folder of its own (its
    working folder, HOME and TMPDIR): the module built and each test of `names` run there.
    Returns ``{"tests": {name: [passed, why, lines run]}}``, or ``{"error": why}`` when the
    cells did not build. Nothing a run leaves (a file, a name on `builtins`, a seed) reaches
    the next, as at grading, where each run is a worker of its own; a child that exits, dies
    or hangs passes nothing."""
    folder = tempfile.mkdtemp(prefix="rit-learner-test-")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: it never returns
        os.close(read)
        try:
            os.chdir(folder)
            os.environ.update(HOME=folder, TMPDIR=folder)
            tempfile.tempdir = folder
            data = json.dumps(_in_child(sources, answers, extra, names, seconds, trace)).encode()
        except BaseException:
            data = b'{"error": "the run ended its process"}'
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(write, view) :]
        finally:
            os._exit(0)
    os.close(write)
    chunks: list[bytes] = []
    deadline = time.monotonic() + seconds * max(1, len(names)) + 5.0
    try:
        while (left := deadline - time.monotonic()) > 0 and select.select([read], [], [], left)[0]:
            chunk = os.read(read, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)  # it never finished: nothing it said counts
            chunks = []
    finally:
        os.close(read)
        os.waitpid(pid, 0)
        shutil.rmtree(folder, ignore_errors=True)
    try:
        said = json.loads(b"".join(chunks))
    except ValueError:
        said = None
    return said if isinstance(said, dict) else {"error": "the run ended its process"}


def _warm(sources: Sources) -> None:
    """Build the answers once here, tests aside, so that what they load on the way (a sibling
    build's notebook, a fixture) is loaded once, before the children fork, not in each."""
    signal.setitimer(signal.ITIMER_REAL, OWN_SECONDS)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            _module(sources, sources.answers, tests=False)
    except BaseException:  # each run meets the same trouble, and says so
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _in_child(
    sources: Sources,
    answers: Sequence[str],
    extra: str,
    names: Sequence[str],
    seconds: float,
    trace: set[str] | None,
) -> dict[str, Any]:
    """`_attempt`'s work, inside the child."""
    try:
        found = _tests(_build(sources, answers, extra), names)
    except BaseException as exc:
        return {"error": cut(f"{type(exc).__name__}: {exc}")}
    tests: dict[str, list[Any]] = {}
    for name, fn in found.items():
        if trace is None:
            tests[name] = [*_run(fn, seconds), []]
        else:
            passed, why, lines = _executed(fn, trace)
            tests[name] = [passed, why, sorted(lines)]
    return {"tests": tests}


def _passed(attempt: dict[str, Any], name: str) -> tuple[bool, str]:
    """Whether test `name` passed in `attempt`, and why not."""
    if "error" in attempt:
        return False, str(attempt["error"])
    ran = attempt.get("tests", {}).get(name)
    return (bool(ran[0]), str(ran[1])) if ran else (False, "not defined in a test cell")


def run_job(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The child's work, per test: the learner's code and a second wheat of it (both must
    pass), then each laid-over bug on both wheats (caught only when the test fails on each),
    then, as advice, generic mutants of the lines the test ran."""
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
    first = len(sources.setup) + 1
    cells = {f"<cell {first + i}>" for i in range(len(sources.answers))}
    advice = bool(job.get("advice", True))
    _warm(sources)
    own = _attempt(sources, sources.answers, "", names, OWN_SECONDS, cells if advice else None)
    if "error" in own:
        for report in reports.values():
            report.message = f"your cells raised {own['error']}"
        return [asdict(r) for r in reports.values()]
    ran: dict[str, set[tuple[str, int]]] = {}
    for name, (passed, why, lines) in own["tests"].items():
        reports[name].passes, reports[name].message = bool(passed), str(why)
        ran[name] = {(str(f), int(n)) for f, n in lines}
    passing = [n for n in names if reports[n].passes]
    if not passing:
        return [asdict(r) for r in reports.values()]
    answers, after = _variant(sources, str(job.get("contract", "")))
    neutral = str(job.get("neutral", ""))
    # Each run holds two layers on every seam: a wheat two neutral ones, a chaff one and its
    # bug, so not even how deep the wrappers go tells them apart.
    wheats = [(list(sources.answers), neutral), (answers, f"{after}\n{neutral}")]
    twice = [(a, f"{after}\n{neutral}") for a, after in wheats] if neutral else wheats
    _on_wheats(sources, twice, passing, reports)
    judged = [n for n in passing if not reports[n].wheat_failure]
    for bug in job.get("bugs", []):
        _lay_bug(sources, bug, wheats, judged, reports)
    if advice:
        _advise(job, sources, judged, reports, ran)
    return [asdict(r) for r in reports.values()]


Wheat = tuple[list[str], str]
"""One correct variant of the answers: its answer cells, and what is laid over them."""


def _on_wheats(
    sources: Sources,
    wheats: Sequence[Wheat],
    names: Sequence[str],
    reports: dict[str, LearnerTestReport],
) -> None:
    """Run the tests `names` on each correct variant in turn; a test that fails on one keeps
    why in its `wheat_failure` and is not run on the next."""
    for wheat_answers, wheat_after in wheats:
        still = [n for n in names if not reports[n].wheat_failure]
        attempt = _attempt(sources, wheat_answers, wheat_after, still, OWN_SECONDS)
        for name in still:
            ok, message = _passed(attempt, name)
            if not ok:
                reports[name].wheat_failure = message


def _lay_bug(
    sources: Sources,
    bug: dict[str, Any],
    wheats: Sequence[Wheat],
    names: Sequence[str],
    reports: dict[str, LearnerTestReport],
) -> None:
    """Lay one known bug over each wheat and run the tests `names` on it: a test catches the
    bug only when it fails on every wheat (each stops being run once it passed on one)."""
    for name in names:
        reports[name].caught[bug["name"]] = True
    for wheat_answers, wheat_after in wheats:
        still = [n for n in names if reports[n].caught[bug["name"]]]
        if not still:
            break
        laid = f"{wheat_after}\n{bug['source']}"
        attempt = _attempt(sources, wheat_answers, laid, still, OWN_SECONDS)
        for name in still:
            if _passed(attempt, name)[0]:  # a bug that does not even load is caught
                reports[name].caught[bug["name"]] = False


def _advise(
    job: dict[str, Any],
    sources: Sources,
    names: Sequence[str],
    reports: dict[str, LearnerTestReport],
    ran: dict[str, set[tuple[str, int]]],
) -> None:
    """Generic mutants of the learner's seams, only on lines each test ran: the survivors are
    advice, never verdict (the first few put to the step's visible checks)."""
    cap = int(job.get("max_mutants", MAX_MUTANTS))
    judge: dict[str, Any] | None = job.get("judge")
    verdicts: dict[str, bool] = {}  # by mutant: do the visible checks catch it?
    judging = 0.0  # seconds spent on them so far
    first = len(sources.setup) + 1
    for index, text in enumerate(sources.answers):
        cell = f"<cell {first + index}>"
        for mutant in _cell_mutants(text, job.get("seams")):
            wanted = [
                n
                for n in names
                if reports[n].total < cap and (cell, mutant.line) in ran.get(n, set())
            ]
            if not wanted:
                continue
            answers = list(sources.answers)
            answers[index] = mutant.source
            attempt = _attempt(sources, answers, "", wanted, TEST_SECONDS)
            for name in wanted:
                report = reports[name]
                report.total += 1
                if not _passed(attempt, name)[0]:  # one that does not even load is caught
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
    bugs: Sequence[LaidOver] = (),
    contract: Sequence[LaidOver] = (),
    neutral: str = "",
    max_examples: int = fixedhypothesis.DEFAULT_EXAMPLES,
    max_mutants: int = MAX_MUTANTS,
    timeout: float = 30.0,
    judge: tuple[str, Sequence[str]] | None = None,
    advice: bool = True,
) -> list[LearnerTestReport]:
    """Run the learner tests `names` on their code and its mutants (inside `seams`, the
    top-level definitions under test) in a fresh interpreter; one report per name. `judge`:
    (build, steps) whose visible checks meet each test's first advice survivors, so a report can
    tell a bug the test misses (the checks fail on it) from a mutant that may behave exactly
    like the learner's code (they pass). Without `advice` no generic mutant runs: the verdict
    alone, as `make progress` needs it."""
    job = {
        "setup": list(sources.setup),
        "answers": list(sources.answers),
        "tests": list(sources.tests),
        "names": list(names),
        "seams": list(seams) if seams else None,
        "bugs": [asdict(b) for b in bugs],
        "contract": "\n".join(c.source for c in contract),
        "neutral": neutral,
        "max_examples": max_examples,
        "max_mutants": max_mutants,
        "judge": None if judge is None else {"build": judge[0], "steps": list(judge[1])},
        "advice": advice,
    }
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "workbook.checking.learnertests"],
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
