"""Build 03's judges, their shared half: expected values and readers of observations.

The judges are the ``test_*.py`` beside this module (``test_ids_and_keys``, ``test_sink``,
``test_retry``): one ``test_<name>(observed)`` per graded test of notebook 03 in
``workbook.toml``, run in the grading process on the probes' observations. Expected values are
computed here, from inputs chosen here: FNV-1a and SHA-256 from their definitions, the
canonical JSON from its spec, backoff from its formula, a retry loop's calls and waits from the
spec (`model_run`); ``test_retry`` also runs tenacity itself. Every probe is seeded, so each
judge first draws the submission's own inputs again (`seeded`) and judges the observation
against those: an observation recorded from other answers, or made up in advance, fails. Lists
are checked for length before anything in them (an empty list of draws is no evidence of
anything), exceptions by class (`raises`). The graded versions of the visible tests use more
inputs than the self-checks, so answers hard-coded to the visible cases do not pay. Messages
describe what was expected in words wherever the value itself would give a hidden answer away
(hashes). Judging the same observations twice gives the same verdicts. No judges module is
imported here.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Sequence
from functools import partial
from typing import Any

from builds.build03.hidden import probes as P
from etl import EtlError
from grader.suites.digest import CANONICAL_OPTIONS, content_id
from grader.suites.judging import JSON, TIME_TOLERANCE, Fail, Observed, equal, not_done, ok, raises
from workbook.checking.feedback import message, show_json

DEFAULT_POLICY: dict[str, Any] = {"max_attempts": 4, "base_delay": 0.2, "max_delay": 10.0}
Script = tuple[dict[str, Any], tuple[P.Outcome, ...]]


#: ``seeded(observed, name)`` (``interpreter=2`` for the second interpreter's): the probe's
#: observation and the parent's own generator of its inputs, `Observed.seeded` bound to this
#: build's probes.
seeded = partial(Observed.seeded, probes=P.PROBES)


# ─────────────────────────────────────────────────────────────── expected values


def fnv1a_64(data: bytes) -> str:
    digest = 0xCBF29CE484222325
    for byte in data:
        digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{digest:016x}"


def canonical(row: Any, **overrides: Any) -> str:
    """The row's canonical JSON; `overrides` change one option, as a learner's bug would."""
    return json.dumps(dataclasses.asdict(row), **{**CANONICAL_OPTIONS, **overrides})


def key_of(row: Any) -> str:
    return content_id("row", canonical(row))


def backoff(kwargs: dict[str, Any], attempt: int) -> float:
    policy = {**DEFAULT_POLICY, **kwargs}
    return float(min(policy["base_delay"] * 2 ** (attempt - 1), policy["max_delay"]))


def model_run(kwargs: dict[str, Any], outcomes: Sequence[P.Outcome]) -> JSON:
    """What with_retry must do with `outcomes` (the last repeating), by the spec: the result
    (``{"ok": v}`` or ``{"raised": kind, "message": text}``) and the virtual time of each
    call."""
    policy = {**DEFAULT_POLICY, **kwargs}
    times: list[float] = []
    now = 0.0
    for n in range(1, policy["max_attempts"] + 1):
        times.append(round(now, 6))
        outcome = P.make_outcome(outcomes[min(n, len(outcomes)) - 1])
        if not isinstance(outcome, BaseException):
            return {"ok": outcome, "times": times}
        if not isinstance(outcome, EtlError) or not outcome.is_transient():
            return {"raised": type(outcome).__name__, "message": str(outcome), "times": times}
        if n == policy["max_attempts"]:
            return {"raised": type(outcome).__name__, "message": str(outcome), "times": times}
        given = outcome.retry_after()
        now += given if given is not None else backoff(kwargs, n)
    raise AssertionError("unreachable: the last attempt returns")


def describe_policy(kwargs: dict[str, Any]) -> str:
    def value(v: Any) -> str:
        return f"math.{v!r}" if isinstance(v, float) and not math.isfinite(v) else repr(v)

    return "RetryPolicy(" + ", ".join(f"{k}={value(v)}" for k, v in kwargs.items()) + ")"


def describe_outcomes(outcomes: Sequence[P.Outcome]) -> str:
    def one(spec: P.Outcome) -> str:
        if spec[0] == "ok":
            return f"returns {spec[1]!r}"
        if spec[0] == "HttpStatus":
            extra = f", retry_after_secs={spec[2]!r}" if spec[2] is not None else ""
            text = f", {spec[3]!r}" if len(spec) > 3 and spec[3] else ""
            return f"HttpStatus({spec[1]}{text}{extra})"
        return f"{spec[0]}({spec[1]!r})"

    return ", then ".join(one(spec) for spec in outcomes)


def retry_call(kwargs: dict[str, Any], outcomes: Sequence[P.Outcome], repeats: bool) -> str:
    tail = " (the last one repeating)" if repeats else ""
    return (
        f"await with_retry({describe_policy(kwargs)}, op), op: {describe_outcomes(outcomes)}{tail}"
    )


def times_of(run: JSON, call: str) -> list[float]:
    """The call times a retry probe reported: as many as the calls it counted, all floats."""
    times = run.get("times")
    calls = run.get("calls")
    if (
        type(times) is not list
        or type(calls) is not int
        or len(times) != calls
        or not all(type(t) is float for t in times)
    ):
        raise Fail(message(call, "a report whose call times do not match its calls", "a run"))
    return times


def sleeps_of(run: JSON, call: str = "with_retry") -> list[float]:
    return [round(b - a, 6) for a, b in itertools.pairwise(times_of(run, call))]


def tail_of(run: JSON, call: str = "with_retry") -> float:
    times = times_of(run, call)
    return round(float(run.get("elapsed", 0.0)) - (times[-1] if times else 0.0), 6)


def started(run: JSON, call: str) -> None:
    """Fail as "not done" when the retry loop or policy is still a stub or missing."""
    if "ok" not in run:
        not_done(run, call)


def blocking_note(run: JSON) -> str:
    if run.get("blocking", 0.0) > 0:
        return (
            f"It blocked the thread with time.sleep for {run['blocking']:g} s in all: wait"
            " with `await asyncio.sleep(...)`, which lets the event loop (and its clock) run."
        )
    return ""


def judge_run(
    run: JSON,
    kwargs: dict[str, Any],
    outcomes: Sequence[P.Outcome],
    *,
    repeats: bool = False,
    note: str = "",
) -> None:
    """Fail unless `run` did what the spec says for `outcomes`: the same value or error (by
    class, with its message), the same number of calls, the same waits, none after the last."""
    call = retry_call(kwargs, outcomes, repeats)
    want = model_run(kwargs, outcomes)
    if "ok" in want:
        equal(call, ok(run, call, show_json(want["ok"])), want["ok"], note=note)
    else:
        raises(run, call, want["raised"], note=note)
        equal(
            f"{call}: the error's message",
            run.get("message"),
            want["message"],
            note="Raise the op's error itself, unchanged.",
        )
    waits = [round(b - a, 6) for a, b in itertools.pairwise(want["times"])]
    equal(f"{call}: calls of op", run.get("calls"), len(want["times"]), note=note)
    equal(
        f"{call}: the waits between calls",
        sleeps_of(run, call),
        waits,
        tolerance=TIME_TOLERANCE,
        note=blocking_note(run) or note,
    )
    equal(
        f"{call}: seconds waited after the last call",
        tail_of(run, call),
        0.0,
        tolerance=TIME_TOLERANCE,
        note="N attempts have N - 1 waits: nothing follows the last call.",
    )
