"""What grading produces: per probe, per graded test, per submission. Plain data, JSON-ready.

Grading the same submission twice gives equal results, apart from the ``seconds`` fields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from workbook.shared.manifest import Entry

ProbeStatus = Literal["done", "timeout", "crashed", "error", "not run", "void", "load failed"]
SubmissionStatus = Literal["graded", "partial", "error"]
#: How a grader fault's message begins, wherever it is worded: the one form learners see.
GRADER_FAULT = "grader error:"


def fault_sentence(what: str) -> str:
    """The one sentence a learner reads for a grader fault: what failed, and that it is not
    theirs (`GRADER_FAULT` first, so reports and tests find it)."""
    return f"{GRADER_FAULT} {what} (not your submission's fault; tell your instructor)"


class Outcome(StrEnum):
    """What became of one graded test, so that reports and the cache never read sentences."""

    PASSED = "passed"
    WRONG = "wrong"
    """The judge saw the code run and disagreed."""
    NOT_DONE = "not done"
    """A stub still raising NotImplementedError, or a name the answer cells do not define."""
    UNFINISHED = "unfinished"
    """A probe it needs timed out, crashed or was not run (the submission's doing)."""
    NOT_LOADED = "not loaded"
    """The answer cells could not be exported or run at all."""
    VOID = "void"
    """Something other than the probe wrote to the results channel: nothing it said counts."""
    GRADER_FAULT = "grader fault"
    """The grader's own failure (a wall that would not rise, a broken suite): never cached."""


@dataclass(frozen=True)
class ProbeRecord:
    """One probe's outcome in the child: its observation when ``status == "done"``, else why not."""

    name: str
    status: ProbeStatus
    obs: Any = None
    reason: str = ""
    seconds: float = 0.0
    grader_fault: bool = False
    """The probe did not finish through the grader's fault (a wall that would not rise)."""
    ledger: tuple[tuple[str, float, Any], ...] = ()
    """The ticks the worker wrote while the probe ran, as the parent read them
    (`grader.classes.ledger`)."""

    @property
    def kind(self) -> Outcome:
        """What a test that needs this probe comes to when the probe did not finish."""
        if self.status == "done":
            return Outcome.PASSED
        if self.grader_fault:
            return Outcome.GRADER_FAULT
        if self.status == "void":
            return Outcome.VOID
        if self.status == "load failed":
            return Outcome.NOT_LOADED
        return Outcome.UNFINISHED


@dataclass
class ProbeRun:
    """Every probe of one submission, plus what the child printed (kept, never parsed)."""

    records: dict[str, ProbeRecord] = field(default_factory=dict)
    output: str = ""
    output_bytes: int = 0
    load_error: str | None = None
    load_fault: bool = False
    """The answers did not load through the grader's fault (a wall that would not rise)."""
    notes: list[str] = field(default_factory=list)
    children: int = 0
    seconds: float = 0.0
    artefacts: Path | None = None
    """The files the workers left at the top of their scratch folder (their working folder),
    copied out by the parent once each ended (regular files and folders only, bounded): the
    first interpreter's here, the second's in ``@2/``. Removed once judged."""


@dataclass(frozen=True)
class TestResult:
    """One graded test: full points or none, and the judge's message when it failed."""

    name: str
    points: int
    max_points: int
    message: str = ""
    visible: bool = False
    kind: Outcome = Outcome.PASSED
    got: str | None = None
    """What came back, when the judge's message says (its ``got:`` line): what the class
    summary counts of a wrong answer. None when the message says no such thing."""

    @property
    def passed(self) -> bool:
        return self.points == self.max_points


@dataclass(frozen=True)
class SubmissionResult:
    build: str
    label: str
    status: SubmissionStatus
    reason: str
    tests: tuple[TestResult, ...]
    seconds: float = 0.0
    output: str = ""
    notes: tuple[str, ...] = ()

    @property
    def score(self) -> int:
        return sum(t.points for t in self.tests)

    @property
    def grader_fault(self) -> bool:
        """The grader failed somewhere in this result: it says nothing about the work."""
        return any(t.kind is Outcome.GRADER_FAULT for t in self.tests)

    @property
    def max_score(self) -> int:
        return sum(t.max_points for t in self.tests)

    def test(self, name: str) -> TestResult:
        for result in self.tests:
            if result.name == name:
                return result
        raise KeyError(name)

    @property
    def failed(self) -> list[str]:
        return [t.name for t in self.tests if not t.passed]

    @property
    def passed(self) -> list[str]:
        return [t.name for t in self.tests if t.passed]

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["score"], data["max_score"] = self.score, self.max_score
        return data


def zero_results(entry: Entry, reason: str, kind: Outcome) -> tuple[TestResult, ...]:
    """Every learner test of `entry` at zero for one reason (its notebook was not read)."""
    return tuple(
        TestResult(spec.name, 0, spec.points, reason, True, kind) for spec in entry.learner_tests
    )


def all_zero(
    build: str, entry: Entry, label: str, reason: str, kind: Outcome, seconds: float = 0.0
) -> SubmissionResult:
    """Every test of `entry`, its checks then its learner tests, at zero for one reason (the
    build never got to its tests): an ``"error"`` result of build `build`."""
    tests = tuple(TestResult(t.name, 0, t.points, reason, t.visible, kind) for t in entry.tests)
    tests += zero_results(entry, reason, kind)
    return SubmissionResult(build, label, "error", reason, tests, seconds)
