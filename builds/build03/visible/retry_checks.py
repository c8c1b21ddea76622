"""Visible checks of build 03, steps 4 to 6: the retry policy and its backoff, ``with_retry``
(Retry-After, permanent errors, exhaustion, cancellation) and full jitter. `answer_checks`
includes them after the checks of steps 0 to 3, in this order.

Like every check of the build, each builds its own inputs, runs async code on virtual time
and keeps no state: running one twice gives the same verdict. Ships to learners.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import math
import random
from typing import Any

from builds.build03.visible.scripted_harness import (
    RAISES,
    ScriptedOp,
    expect_retry,
    fails,
    loop_time,
    policy_text,
)
from etl import HttpStatus, NetworkError, ParseError, RateLimited, RequestTimeout
from workbook.checks import Checks, Said, expect, expect_equal, expect_raises, outcome, outcome_of

CHECKS = Checks("03")

# ───────────────────────────────────────────────────────── step 4: policy and backoff

BACKOFF_CASES: tuple[tuple[dict[str, Any], tuple[float, ...]], ...] = (
    ({}, (0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0)),  # the Predict of step 4
    ({"base_delay": 0.3, "max_delay": 2.0}, (0.3, 0.6, 1.2, 2.0, 2.0)),
    ({"base_delay": 1, "max_delay": 4}, (1.0, 2.0, 4.0, 4.0)),  # whole numbers, float waits
)


@CHECKS.add(step="policy")
def backoff_doubles_then_caps(ns: Any) -> None:
    for kwargs, want in BACKOFF_CASES:
        policy = ns.RetryPolicy(**kwargs)
        got = [ns.backoff_delay(policy, n) for n in range(1, len(want) + 1)]
        expect(
            all(type(g) is float for g in got)
            and all(math.isclose(g, w, rel_tol=1e-9) for g, w in zip(got, want, strict=True)),
            f"[backoff_delay({policy_text(kwargs)}, n) for n in 1..{len(want)}]",
            got,
            f"{list(want)}: min(base_delay * 2 ** (n - 1), max_delay), as floats",
        )
    ok, got = outcome(lambda: ns.backoff_delay(ns.RetryPolicy(), 5000))
    note = "2 ** 4999 is past any float: catch OverflowError and return max_delay."
    call = "backoff_delay(RetryPolicy(), 5000)"
    expect(ok and got == 10.0, call, Said.of(ok, got), "returned 10.0 (the cap)", note)
    for attempt in (-1, 0):
        expect_raises(
            ValueError,
            f"backoff_delay(RetryPolicy(), {attempt})",
            functools.partial(ns.backoff_delay, ns.RetryPolicy(), attempt),
            note="Attempts count from 1: refuse anything lower, 0 included (attempt < 1).",
        )


BAD_POLICIES: tuple[dict[str, Any], ...] = (
    {"max_attempts": -2},
    {"max_attempts": 3, "base_delay": math.nan},
    {"base_delay": -0.5},
    {"base_delay": -2.0, "max_delay": -1.0},
    {"base_delay": 1.0, "max_delay": math.inf},
    {"base_delay": 3.0, "max_delay": 0.3},
    {"jitter": "decorrelated"},
)
GOOD_POLICIES: tuple[dict[str, Any], ...] = (
    {"max_attempts": 1},
    {"max_attempts": 2, "base_delay": 0.0, "max_delay": 0.0},
    {"base_delay": 2.0, "max_delay": 2.0, "jitter": "full"},
)


@CHECKS.add(step="policy")
def bad_policies_are_refused(ns: Any) -> None:
    for kwargs in BAD_POLICIES:
        expect_raises(
            ValueError,
            policy_text(kwargs),
            functools.partial(ns.RetryPolicy, **kwargs),
            note="In __post_init__: max_attempts >= 1; both delays finite (math.isfinite) and"
            ' >= 0; max_delay >= base_delay; jitter "none" or "full".',
        )
    for kwargs in GOOD_POLICIES:
        ok, got = outcome(functools.partial(ns.RetryPolicy, **kwargs))
        expect(ok, policy_text(kwargs), Said.of(ok, got), "a policy (this one is valid)")
    policy = ns.RetryPolicy()

    def change() -> None:
        policy.max_attempts = 99

    expect_raises(
        dataclasses.FrozenInstanceError,
        "policy = RetryPolicy(); policy.max_attempts = 99",
        change,
        note="A policy is checked once, when it is made: @dataclass(frozen=True) keeps it so.",
    )


# ───────────────────────────────────────────────────────── step 5: with_retry


@CHECKS.add(step="with_retry")
async def gives_up_on_permanent_immediately(ns: Any) -> None:
    op = fails(lambda: ParseError("bad JSON"))
    await expect_retry(ns, {}, op, "raising ParseError('bad JSON') every time", RAISES, [0.0])


async def expect_jittered_waits(ns: Any) -> None:
    """with_retry on a policy with jitter="full": its backoff waits are jittered."""
    kwargs = {"max_attempts": 5, "base_delay": 1.0, "max_delay": 8.0, "jitter": "full"}
    ceilings = [1.0, 2.0, 4.0, 8.0]
    op = ScriptedOp(*[lambda: NetworkError("connection reset")] * 4, lambda: "ok")
    state = random.getstate()  # with_retry draws from the random module: seed it, then restore
    random.seed(2026)
    try:
        start = loop_time()
        ok, got = await outcome_of(ns.with_retry(ns.RetryPolicy(**kwargs), op))
    finally:
        random.setstate(state)
    called = [t - start for t in op.times]
    waits = [round(b - a, 6) for a, b in itertools.pairwise(called)]
    call = f"await with_retry({policy_text(kwargs)}, op), op raising NetworkError 4 times,"
    call += " then returning 'ok'"
    expect(ok and got == "ok", call, Said.of(ok, got), "returned 'ok'")
    expect(
        len(waits) == 4
        and all(0.0 <= w <= c + 1e-6 for w, c in zip(waits, ceilings, strict=True))
        and waits != ceilings,
        f"{call}: the waits between calls",
        waits,
        f"4 jittered waits, each from 0 to its ceiling {ceilings}",
        note="Wait backoff_delay(policy, attempt): it applies the policy's jitter. A backoff"
        " computed in with_retry itself never jitters.",
    )


@CHECKS.add(step="with_retry")
async def retries_transient_then_succeeds(ns: Any) -> None:
    op = ScriptedOp(*[lambda: NetworkError("connection reset")] * 2, lambda: 42)
    label = "raising NetworkError twice, then returning 42"
    await expect_retry(ns, {}, op, label, 42, [0.0, 0.2, 0.6])
    await expect_jittered_waits(ns)


@CHECKS.add(step="with_retry")
async def honors_retry_after(ns: Any) -> None:
    op = fails(lambda: RateLimited(5.0), "ok")
    label = "raising RateLimited(5.0) once, then returning 'ok'"
    await expect_retry(ns, {}, op, label, "ok", [0.0, 5.0])


@CHECKS.add(step="with_retry")
async def attempts_run_out_after_n_minus_1_waits(ns: Any) -> None:
    # The first is step 5's Predict: four calls, three waits, raised at t = 1.4 s.
    for kwargs, error, label, times in (
        ({}, lambda: HttpStatus(503), "HttpStatus(503)", [0.0, 0.2, 0.6, 1.4]),
        (
            {"max_attempts": 3, "base_delay": 0.5, "max_delay": 0.75},
            lambda: RequestTimeout("no answer in 30 s"),
            "RequestTimeout('no answer in 30 s')",
            [0.0, 0.5, 1.25],
        ),
        ({"max_attempts": 1}, lambda: NetworkError("refused"), "NetworkError('refused')", [0.0]),
    ):
        await expect_retry(ns, kwargs, fails(error), f"raising {label} every time", RAISES, times)


@CHECKS.add(step="with_retry")
async def retry_after_is_waited_as_given(ns: Any) -> None:
    # The first is step 5's second Predict: 30 s exactly, above max_delay.
    for kwargs, error, label, times in (
        ({}, lambda: RateLimited(30.0), "RateLimited(30.0)", [0.0, 30.0]),
        (
            {"base_delay": 0.1, "max_delay": 0.5},
            lambda: HttpStatus(503, retry_after_secs=2.0),
            "HttpStatus(503, retry_after_secs=2.0)",
            [0.0, 2.0],
        ),
        (
            {"base_delay": 1.0, "max_delay": 1.0},
            lambda: HttpStatus(429, retry_after_secs=0.0),
            "HttpStatus(429, retry_after_secs=0.0)",
            [0.0, 0.0],
        ),
        ({"base_delay": 0.3}, lambda: RateLimited(None), "RateLimited(None)", [0.0, 0.3]),
    ):
        label = f"raising {label} once, then returning 'ok'"
        await expect_retry(ns, kwargs, fails(error, "ok"), label, "ok", times)


@CHECKS.add(step="with_retry")
async def bugs_and_cancellation_pass_through(ns: Any) -> None:
    op = fails(lambda: ValueError("no field 'net'"), "ok")
    await expect_retry(ns, {}, op, "raising ValueError once, then 'ok'", RAISES, [0.0])
    calls: list[float] = []

    async def slow_op() -> str:
        calls.append(loop_time())
        await asyncio.sleep(5.0)
        return "late"

    task = asyncio.ensure_future(ns.with_retry(ns.RetryPolicy(), slow_op))
    await asyncio.sleep(1.0)
    task.cancel()
    await asyncio.sleep(60.0)
    expect(
        task.cancelled() and len(calls) == 1,
        "with_retry(RetryPolicy(), op) in a task, op taking 5 s, the task cancelled at t = 1 s;"
        " 60 s later",
        Said(f"{'' if task.cancelled() else 'not '}cancelled, op called {len(calls)}x"),
        "cancelled, op called once",
        note="Cancellation (asyncio.CancelledError) is not an Exception: never catch it (no"
        " `except BaseException`, no bare `except:`), so the task stops.",
    )


# ───────────────────────────────────────────────────────── step 6: full jitter

JITTER_DRAWS = 200


class Quarter(random.Random):
    """An rng whose every draw is 0.25: ``uniform(a, b)`` gives ``a + (b - a) / 4``."""

    def random(self) -> float:
        return 0.25


@CHECKS.add(step="jitter")
def full_jitter_stays_within_bounds(ns: Any) -> None:
    policy = ns.RetryPolicy(jitter="full")
    for attempt in range(1, 10):
        ceiling = min(0.2 * 2 ** (attempt - 1), 10.0)
        call = f'backoff_delay(RetryPolicy(jitter="full"), {attempt}, rng=random.Random(...))'
        rng = random.Random(1000 + attempt)
        draws = [ns.backoff_delay(policy, attempt, rng=rng) for _ in range(JITTER_DRAWS)]
        outside = [d for d in draws if not (type(d) is float and 0.0 <= d <= ceiling)]
        expect(
            not outside,
            call,
            outside[0] if outside else None,
            f"a float from 0 to {ceiling:g} = min(0.2 * 2 ** {attempt - 1}, 10.0)",
            note="Full jitter draws from 0 up to the capped delay: cap first, then jitter.",
        )
        low, high = min(draws), max(draws)
        expect(
            low < 0.25 * ceiling and high > 0.75 * ceiling,
            f"{call}, drawn {JITTER_DRAWS} times: smallest and largest",
            (round(low, 4), round(high, 4)),
            f"waits spread over 0 to {ceiling:g}",
            note=(
                "Every draw was the same: does backoff_delay return full_jitter(ceiling, rng)"
                ' when policy.jitter == "full"?'
                if low == high
                else "Draw uniformly over the whole range: rng.uniform(0, ceiling)."
            ),
        )
        at_cap = sum(d == ceiling for d in draws)
        expect(
            at_cap <= JITTER_DRAWS // 20,
            f"{call}, drawn {JITTER_DRAWS} times: waits exactly at {ceiling:g}",
            at_cap,
            "hardly ever exactly the ceiling",
            note="Jitter the capped value; capping a jittered one sends every client back at "
            "exactly max_delay.",
        )

    def five_waits() -> list[Any]:
        rng = random.Random(7)
        return [ns.backoff_delay(policy, 4, rng=rng) for _ in range(5)]

    first, again = five_waits(), five_waits()
    expect(
        first == again,
        'five backoff_delay(RetryPolicy(jitter="full"), 4, rng=rng), rng = random.Random(7),'
        " then again with a new random.Random(7)",
        again,
        f"the same waits both times: {first}",
        note="Draw from the rng you are given (rng.uniform), not from the random module.",
    )
    quarter = ns.backoff_delay(policy, 4, rng=Quarter())
    expect(
        isinstance(quarter, float) and abs(quarter - 0.4) < 1e-9,
        'backoff_delay(RetryPolicy(jitter="full"), 4, rng), an rng whose every random() is 0.25',
        quarter,
        "0.4: rng.uniform(0.0, 1.6) with that rng, a quarter of the way up from 0",
        note="Draw rng.uniform(0.0, ceiling), low bound first: uniform(ceiling, 0.0) is as well"
        " spread, but gives other waits for the same seed than the spec's draw.",
    )
    flat = ns.RetryPolicy(base_delay=0.0, max_delay=0.0, jitter="full")
    zero = ns.backoff_delay(flat, 1, rng=random.Random(7))
    expect(
        type(zero) is float and zero == 0.0,
        'backoff_delay(RetryPolicy(base_delay=0.0, max_delay=0.0, jitter="full"), 1,'
        " rng=random.Random(7))",
        zero,
        "0.0, a float: rng.uniform(0.0, 0.0)",
        note="full_jitter always returns a float, a ceiling of 0 included: draw it.",
    )
    plain = ns.backoff_delay(ns.RetryPolicy(), 3, rng=random.Random(7))
    expect_equal(
        "backoff_delay(RetryPolicy(), 3, rng=random.Random(7))",
        plain,
        0.8,
        note='With jitter="none" the wait is the capped delay itself.',
    )
