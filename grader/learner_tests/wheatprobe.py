"""The probe of one learner test on one variant of the reference, run in the grading child.

`grader.learner_tests.wheats` hands each worker the reference seams of a build (a *wheat*, or the
reference with one known bug: a *chaff*) as the exported source, with one last statement that binds
`JOB` to ``{"name", "text", "max_examples"}``: the learner's exported test cells
(`workbook.shared.export.export_tests`) and the one test this worker runs. The probe takes the job
out of the module before any learner code runs, drops the reference's text from `linecache`
(``inspect.getsource`` of a seam then fails: a test cannot read the code it judges), runs the test
cells as a module of their own (``from submission import *`` finds the variant), runs the one test
on virtual time, and reports only whether it returned, and if not the class of what it raised (a
builtin or `etl` kind by name, any other as "its own") and the line of the test cells it came from.
Never the message, never the output: on a wheat both could carry the reference's text out.
Hypothesis settings are fixed here (`workbook.checking.fixedhypothesis`: derandomized, no database,
no deadline, no shrinking, the manifest's examples), whatever the test asked for. Running it twice
gives the same report.
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import linecache
from types import ModuleType
from typing import Any

import httpx  # noqa: F401  (what learner tests use, imported once by the fork server)

import etl.server  # noqa: F401  (the server learner tests call, imported once likewise)
from grader.suites.observe import KINDS, Probes, ProbeTimeout
from workbook import vtime
from workbook.checking import fixedhypothesis
from workbook.shared.modules import execute, fresh_module, registered

PROBES = Probes()
#: The name the job is bound to in the variant's module (taken out before the tests run).
JOB = "__learner_test_job__"
#: The name the learner's test cells run under (their line numbers are the report's).
TESTS_FILE = "/scratch/work/learner_tests.py"


@PROBES.add("learner_test")
def learner_test(ns: ModuleType) -> dict[str, Any]:
    job = ns.__dict__.pop(JOB)
    linecache.cache.pop(str(ns.__dict__.get("__file__")), None)
    fixedhypothesis.load(int(job["max_examples"]))
    tests = fresh_module("learner_tests", TESTS_FILE)
    try:
        with registered(tests):
            execute(tests, str(job["text"]), TESTS_FILE)
    except ProbeTimeout:
        raise
    except BaseException as exc:  # the test cells themselves raise: nothing of them runs
        return {"loaded": False, **_failure(exc)}
    fn = tests.__dict__.get(str(job["name"]))
    if not callable(fn):
        return {"loaded": True, "defined": False}
    fixedhypothesis.hold(fn)  # a test's own @settings never changes the grade
    try:
        outcome = fn()
        if inspect.iscoroutine(outcome):
            vtime.run(outcome, deadline=vtime.VIRTUAL_DEADLINE)
    except ProbeTimeout:
        raise
    except BaseException as exc:  # a failing assertion, a crash: either way, not passed
        return {"loaded": True, "defined": True, "passed": False, **_failure(exc)}
    return {"loaded": True, "defined": True, "passed": True}


def _failure(exc: BaseException) -> dict[str, Any]:
    """What a failure may say: the class (by name only if it is a builtin or `etl` kind)
    and the line of the test cells it was raised from."""
    kind = type(exc)
    # By identity: a class of the learner's own may call itself anything, even "builtins".
    known = getattr(builtins, kind.__name__, None) is kind or any(k is kind for k in KINDS.values())
    line = None
    with contextlib.suppress(BaseException):
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == TESTS_FILE:
                line = tb.tb_lineno
            tb = tb.tb_next
    return {
        "raised": kind.__name__ if known else None,
        "not_written": isinstance(exc, NotImplementedError),
        "line": line,
    }
