"""Grading: hidden probes in a walled-in child, judges in the parent, points from the manifest.

- `Runner`: grades one submission at a time (`grade_notebook`, `grade_source`); owns its fork
  servers; one per worker thread to grade in parallel.
- `grade_notebook(build, path)`: the same, with a runner of its own.
- `Limits`: the per-child time, memory, process, file and output limits.
- `load_suite(build)`: a build's hidden probes, judges and mutants (``tests/hidden/buildNN``).
"""

from grader.results import ProbeRecord, ProbeRun, SubmissionResult, TestResult
from grader.runner import Runner, grade_notebook
from grader.sandbox import Isolation, Limits
from grader.suites import Mutant, Suite, SuiteError, has_suite, load_suite

__all__ = [
    "Isolation",
    "Limits",
    "Mutant",
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
