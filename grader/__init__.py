"""Grading: hidden probes in a walled-in child, judges in the parent, points from the manifest.

- `Runner`: grades one submission at a time (`grade_notebook`, `grade_source`); owns its fork
  servers; one per worker thread to grade in parallel.
- `grade_notebook(build, path)`: the same, with a runner of its own.
- `Limits`: the per-child time, memory, process, file and output limits.
- `load_suite(build)`: a build's hidden probes, judges and mutants (``builds/buildNN/hidden``).
- `Outcome`: the kind of each graded test's result (passed, wrong, not done, grader fault, ...).

Inside: `runner` (the facade) drives `forkclient` (its fork servers) over `protocol`, reads
each worker's lines with `stream`; `sandbox` builds the walls each server runs in, and
`grader.child` is the server and worker side, the only part of the grader bound into them;
`observe` (probes, in the worker) and `judging` (judges, here) are the hidden suites' halves.

This file imports nothing: every name below is loaded on first use, so that the walls, where
only `grader.child`, `protocol` and `observe` exist, can import ``grader`` at all, and
importing `grader.child` never imports the runner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.protocol import Limits
    from grader.results import Outcome, ProbeRecord, ProbeRun, SubmissionResult, TestResult
    from grader.runner import Runner, grade_notebook
    from grader.sandbox import Isolation
    from grader.suites import Mutant, Suite, SuiteError, has_suite, load_suite

_WHERE = {
    "Isolation": "grader.sandbox",
    "Limits": "grader.protocol",
    "Mutant": "grader.suites",
    "Outcome": "grader.results",
    "ProbeRecord": "grader.results",
    "ProbeRun": "grader.results",
    "Runner": "grader.runner",
    "SubmissionResult": "grader.results",
    "Suite": "grader.suites",
    "SuiteError": "grader.suites",
    "TestResult": "grader.results",
    "grade_notebook": "grader.runner",
    "has_suite": "grader.suites",
    "load_suite": "grader.suites",
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
