"""Grading: hidden probes in a walled-in child, judges in the parent, points from the manifest.

- `Runner`: grades one submission at a time (`grade_notebook`, `grade_source`); owns its fork
  servers; one per worker thread to grade in parallel.
- `grade_notebook(build, path)`: the same, with a runner of its own.
- `Limits`: the per-child time, memory, process, file and output limits.
- `load_suite(build)`: a build's hidden probes, judges and mutants (``tests/hidden/buildNN``).
- `Outcome`: the kind of each graded test's result (passed, wrong, not done, grader fault, ...).

Inside: `runner` (the facade) drives `forkclient` (its fork servers) over `protocol`, reads
each worker's lines with `stream`; `forkserver` is the server process, walled in by `sandbox`;
`observe` (probes, in the worker) and `judging` (judges, here) are the hidden suites' halves.
"""

from grader.results import Outcome, ProbeRecord, ProbeRun, SubmissionResult, TestResult
from grader.runner import Runner, grade_notebook
from grader.sandbox import Isolation, Limits
from grader.suites import Mutant, Suite, SuiteError, has_suite, load_suite

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
