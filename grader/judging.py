"""Judges: the half of a hidden test that runs in the parent, on plain JSON observations.

A judge receives what the probes saw and compares it with expected values computed here, in
the grading process; those values never enter the child. Comparisons are exact in type
(``1`` is not ``1.0``, ``True`` is not ``1``, a ``str`` subclass is not a ``str``) because
`observe.plain` records the exact type of everything it could not turn into JSON. A judge
passes only on positive evidence: an observation that is missing, or an exception where a
value was due, fails it. Judging the same observations twice gives the same verdict, and each
verdict has its kind (`grader.results.Outcome`): a judge raises `Fail` (wrong), `NotDone` (a
stub or a missing name) or `GraderFault` (the grader's own failure, never the learner's).
Messages speak the one feedback vocabulary of `workbook.feedback`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from grader.observe import JSON as JSON  # re-exported for judges
from grader.results import Outcome, ProbeRecord
from workbook.feedback import message, show_json, show_outcome
from workbook.registry import Registry

#: Virtual clocks tick in microseconds (looptime's resolution), so times match to 2 µs.
TIME_TOLERANCE = 2e-6


class Fail(AssertionError):
    """The judge's verdict against the submission. Its text is the learner's feedback."""


class NotDone(Fail):
    """The step is not done yet: a stub still raising NotImplementedError, a missing name."""


class GraderFault(Exception):
    """The grader failed, not the submission (say, both interpreters had the same hash seed):
    the test says nothing about the work, and the result is never cached."""


class Unobserved(Exception):  # a reason, reported as the test's message
    """A probe the judge needs did not finish (timeout, crash, load failure)."""

    def __init__(self, reason: str, kind: Outcome = Outcome.UNFINISHED) -> None:
        super().__init__(reason)
        self.kind = kind


class Observed:
    """The probes' observations, by name; ``obs(name, interpreter=2)`` for the second one."""

    def __init__(self, records: Mapping[str, ProbeRecord]) -> None:
        self._records = records

    def __call__(self, name: str, interpreter: int = 1) -> JSON:
        key = name if interpreter == 1 else f"{name}@{interpreter}"
        record = self._records.get(key)
        if record is None:
            raise Unobserved(f"probe {key} did not run")
        if record.status != "done":
            raise Unobserved(record.reason or f"probe {key}: {record.status}", record.kind)
        return record.obs


JudgeFn = Callable[[Observed], None]


@dataclass(frozen=True)
class Judge:
    name: str
    fn: JudgeFn


class Judges(Registry[Judge]):
    """A hidden suite's judges, one per graded test name."""

    kind = "judge"

    def add(self, name: str) -> Callable[[JudgeFn], JudgeFn]:
        def register(fn: JudgeFn) -> JudgeFn:
            self.register(name, Judge(name, fn))
            return fn

        return register


class Verdict(NamedTuple):
    """What a judge decided: the kind of outcome, and the message a learner reads ("" when
    it passed)."""

    kind: Outcome
    message: str


def verdict(judge: Judge, observed: Observed) -> Verdict:
    """`Outcome.PASSED` when the judge is satisfied, else the kind and the message."""
    try:
        judge.fn(observed)
    except NotDone as exc:
        return Verdict(Outcome.NOT_DONE, str(exc))
    except Fail as exc:
        return Verdict(Outcome.WRONG, str(exc))
    except Unobserved as exc:
        return Verdict(exc.kind, str(exc))
    except GraderFault as exc:
        return Verdict(Outcome.GRADER_FAULT, str(exc))
    except Exception as exc:  # a judge bug must not stop the grading
        text = f"the judge could not read the observation ({type(exc).__name__}: {exc})"
        return Verdict(Outcome.GRADER_FAULT, text)
    return Verdict(Outcome.PASSED, "")


# ---------------------------------------------------------------------------------------
# Reading observations.


def not_done(outcome: Mapping[str, JSON], call: str) -> None:
    """Raise `NotDone` when the outcome is a stub or a missing name."""
    if "missing" in outcome:
        raise NotDone(f"not done yet: `{outcome['missing']}` is not defined in your answer cells")
    if outcome.get("raised") == "NotImplementedError":
        raise NotDone(
            f"not done yet: {call} raised NotImplementedError({outcome.get('message')!r})"
        )


def ok(outcome: Mapping[str, JSON], call: str, expected: str = "a value") -> JSON:
    """The value `call` returned; fail if it raised instead."""
    if "ok" in outcome:
        return outcome["ok"]
    not_done(outcome, call)
    raise Fail(message(call, show_outcome(outcome), f"it returns {expected}"))


def raises(outcome: Mapping[str, JSON], call: str, kind: str, note: str = "") -> None:
    """Fail unless `call` raised exactly `kind` (by class name)."""
    if outcome.get("raised") == kind:
        return
    not_done(outcome, call)
    raise Fail(message(call, show_outcome(outcome), f"raises {kind}", note))


def same_value(got: JSON, expected: JSON, tolerance: float = 0.0) -> bool:
    """Equal and of exactly the same JSON type, all the way down."""
    if type(got) is not type(expected):
        return False
    if isinstance(expected, float):
        return got == expected or math.isclose(got, expected, rel_tol=0.0, abs_tol=tolerance)
    if isinstance(expected, list):
        return len(got) == len(expected) and all(
            same_value(g, e, tolerance) for g, e in zip(got, expected, strict=True)
        )
    if isinstance(expected, dict):
        return got.keys() == expected.keys() and all(
            same_value(got[k], expected[k], tolerance) for k in expected
        )
    return bool(got == expected)


def equal(
    call: str,
    got: JSON,
    expected: JSON,
    *,
    tolerance: float = 0.0,
    say: str | None = None,
    note: str = "",
) -> None:
    """Fail unless `got` is `expected` (exact types). `say` describes the expectation in
    words instead of showing the value (for hidden expected values)."""
    if not same_value(got, expected, tolerance):
        expected_text = say if say is not None else show_json(expected)
        raise Fail(message(call, show_json(got), expected_text, note))


def check(condition: bool, call: str, got: str, expected: str, note: str = "") -> None:
    if not condition:
        raise Fail(message(call, got, expected, note))


def is_hex_digest(value: JSON, length: int) -> bool:
    return (
        type(value) is str
        and len(value) == length
        and all(ch in "0123456789abcdef" for ch in value)
    )
