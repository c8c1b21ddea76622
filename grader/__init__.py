"""Grading: hidden probes in a walled-in child, judges in the parent, points from the manifest.

- `Runner`: grades one submission at a time (`grade_notebook`, `grade_source`); owns its fork
  servers; one per worker thread to grade in parallel.
- `grade_notebook(build, path)`: the same, with a runner of its own.
- `Limits`: the per-child time, memory, process, file and output limits.
- `load_suite(build)`: a build's hidden probes, judges and mutants (``builds/buildNN/hidden``).
- `Outcome`: the kind of each graded test's result (passed, wrong, not done, grader fault, ...).

Its wings, by role (each package's docstring maps its modules):

- `grader.runtime`: grading one submission (runner, fork servers, walls, results);
- `grader.suites`: the hidden suites' API (loading, `observe` for probes, `judging`);
- `grader.learner_tests`: grading the tests a learner writes (wheats and laid-over bugs);
- `grader.classes`: class grading (``make check SUBMISSIONS=``), its cache and reports;
- `grader.exports`: LMS gradebooks, Gradescope, GitHub Classroom;
- `grader.proofs`: what proves the workbook sound (``make check``, validity, the bench);
- `grader.shipping`: the learner copy and its leak scan (``make release``).

``python -m grader.bench`` and ``python -m grader.validity`` stay at those names.

This file imports nothing: every name below is loaded on first use, so that the walls, where
only `grader.runtime.child`, `protocol` and `observe` exist, can import ``grader`` at all, and
importing `grader.runtime.child` never imports the runner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.runtime.protocol import Limits
    from grader.runtime.results import Outcome, ProbeRecord, ProbeRun, SubmissionResult, TestResult
    from grader.runtime.runner import Runner, grade_notebook
    from grader.runtime.sandbox import Isolation
    from grader.suites.loading import Mutant, Suite, SuiteError, has_suite, load_suite

_WHERE = {
    "Isolation": "grader.runtime.sandbox",
    "Limits": "grader.runtime.protocol",
    "Mutant": "grader.suites.loading",
    "Outcome": "grader.runtime.results",
    "ProbeRecord": "grader.runtime.results",
    "ProbeRun": "grader.runtime.results",
    "Runner": "grader.runtime.runner",
    "SubmissionResult": "grader.runtime.results",
    "Suite": "grader.suites.loading",
    "SuiteError": "grader.suites.loading",
    "TestResult": "grader.runtime.results",
    "grade_notebook": "grader.runtime.runner",
    "has_suite": "grader.suites.loading",
    "load_suite": "grader.suites.loading",
}
__all__ = [
    "Isolation",
    "Limits",
    "Mutant",
    "Outcome",
    "ProbeRecord",
    "ProbeRun",
    "Runner",
    "SubmissionResult",
    "Suite",
    "SuiteError",
    "TestResult",
    "grade_notebook",
    "has_suite",
    "load_suite",
]


def __getattr__(name: str) -> Any:
    """``grader.Runner`` and the rest: imported on first use (a repeat is a dict lookup)."""
    if name not in _WHERE:
        raise AttributeError(f"module 'grader' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
