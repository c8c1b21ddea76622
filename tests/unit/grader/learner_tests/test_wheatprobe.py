"""`grader.learner_tests.wheatprobe`: the probe of one learner test on one variant, called here in
this process on a tiny variant (the grader runs it in a fresh worker; `tests/grading` does that).

A variant is a module registered as ``submission`` holding the code under test and `JOB`; the
probe reports only whether the one test passed and, if not, a builtin's class name and the line
of the test cells it came from."""

from __future__ import annotations

import linecache
import random
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from hypothesis import core as hypothesis_core
from hypothesis import settings, stateful
from hypothesis.internal.conjecture import providers

from grader.learner_tests.wheatprobe import JOB, PROBES, learner_test
from grader.suites.observe import ProbeTimeout
from workbook.checking import fixedhypothesis
from workbook.shared.export import TESTS_PREAMBLE
from workbook.shared.modules import execute, fresh_module, registered

VARIANT_FILE = "/scratch/work/submission.py"
#: The code under test: a wheat of a toy seam, and a list a test may record into.
VARIANT = "seen = []\n\n\ndef double(x):\n    return 2 * x\n"


@pytest.fixture(autouse=True)
def hypothesis_restored() -> Iterator[None]:
    """The probe fixes Hypothesis's settings and seeds for its process: put them back after."""
    state = random.getstate()
    profile = settings.get_current_profile_name()
    run = stateful.run_state_machine_as_test
    constants = providers._get_local_constants
    try:
        yield
    finally:
        stateful.run_state_machine_as_test = run  # type: ignore[assignment]
        providers._get_local_constants = constants
        providers.CONSTANTS_CACHE.cache.clear()
        settings.load_profile(profile)
        hypothesis_core.global_force_seed = None
        fixedhypothesis._examples = None
        random.setstate(state)


def probe(tests: str, name: str, max_examples: int = 5) -> tuple[dict[str, Any], ModuleType]:
    """The probe's report of test `name` of the test cells `tests` (after the preamble) on
    `VARIANT`, and the variant's module."""
    ns = fresh_module("submission", VARIANT_FILE)
    with registered(ns):
        execute(ns, VARIANT, VARIANT_FILE)
        ns.__dict__[JOB] = {
            "name": name,
            "text": TESTS_PREAMBLE + tests,
            "max_examples": max_examples,
        }
        return learner_test(ns), ns


def test_the_suite_is_one_probe_run_in_the_first_interpreter_only() -> None:
    assert PROBES.names == ["learner_test"]
    assert [p.interpreters for p in PROBES] == [1]


def test_a_test_that_returns_has_passed_and_the_job_is_taken_out_first() -> None:
    tests = "def test_double():\n    assert double(3) == 6\n"
    report, ns = probe(tests, "test_double")
    assert report == {"loaded": True, "defined": True, "passed": True}
    assert JOB not in ns.__dict__


def test_a_failing_assertion_reports_its_class_and_line_never_its_message() -> None:
    tests = "def test_double():\n    x = 3\n    assert double(x) == 7, 'secret text'\n"
    report, _ = probe(tests, "test_double")
    line = (TESTS_PREAMBLE + tests).splitlines().index("    assert double(x) == 7, 'secret text'")
    assert report == {
        "loaded": True,
        "defined": True,
        "passed": False,
        "raised": "AssertionError",
        "not_written": False,
        "line": line + 1,
    }
    assert "secret" not in repr(report)


def test_a_class_of_the_tests_own_is_not_named_even_when_it_calls_itself_a_builtin() -> None:
    tests = (
        "class ValueError(Exception):\n    pass\n\n\n"
        "def test_double():\n    raise ValueError(double(1))\n"
    )
    report, _ = probe(tests, "test_double")
    assert report["passed"] is False and report["raised"] is None


def test_not_implemented_marks_the_test_not_written() -> None:
    tests = "def test_double():\n    raise NotImplementedError\n"
    report, _ = probe(tests, "test_double")
    assert report["not_written"] is True and report["raised"] == "NotImplementedError"


def test_test_cells_that_raise_while_loading_run_nothing() -> None:
    tests = "1 / 0\n\n\ndef test_double():\n    pass\n"
    report, _ = probe(tests, "test_double")
    assert report["loaded"] is False and report["raised"] == "ZeroDivisionError"
    assert "passed" not in report


def test_a_name_the_cells_do_not_define_is_reported_undefined() -> None:
    report, _ = probe("def test_other():\n    pass\n", "test_double")
    assert report == {"loaded": True, "defined": False}


def test_the_test_cannot_read_the_source_of_the_code_it_judges() -> None:
    tests = "import inspect\n\n\ndef test_double():\n    inspect.getsource(double)\n"
    linecache.cache.pop(VARIANT_FILE, None)
    report, _ = probe(tests, "test_double")
    assert report["passed"] is False and report["raised"] == "OSError"
    assert VARIANT_FILE not in linecache.cache


def test_an_async_test_runs_on_virtual_time() -> None:
    tests = (
        "import asyncio\n\n\n"
        "async def test_double():\n"
        "    loop = asyncio.get_running_loop()\n"
        "    start = loop.time()\n"
        "    await asyncio.sleep(600)\n"
        "    assert loop.time() - start == 600\n"
    )
    report, _ = probe(tests, "test_double")
    assert report == {"loaded": True, "defined": True, "passed": True}


def test_a_timeout_is_not_a_failure_of_the_test_it_ends_the_probe() -> None:
    tests = (
        "from grader.suites.observe import ProbeTimeout\n\n\n"
        "def test_double():\n    raise ProbeTimeout()\n"
    )
    with pytest.raises(ProbeTimeout):
        probe(tests, "test_double")


GIVEN = """
from hypothesis import given, settings, strategies


@settings(max_examples=500, derandomize=False)
@given(strategies.integers())
def test_double(x):
    seen.append(x)
    assert double(x) == x + x
"""


def test_hypothesis_runs_the_jobs_examples_whatever_the_test_asks_and_draws_the_same_twice() -> (
    None
):
    first, ns = probe(GIVEN, "test_double", max_examples=4)
    again, ns_again = probe(GIVEN, "test_double", max_examples=4)
    assert first == again == {"loaded": True, "defined": True, "passed": True}
    assert len(ns.seen) == 4  # not the 500 the test asked for
    assert ns.seen == ns_again.seen
