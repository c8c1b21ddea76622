"""Build 03's judges of RetryPolicy, backoff_delay and with_retry: the calls and waits
the spec gives (`model_run`), full jitter, cancellation, and tenacity's behaviour,
found by running tenacity.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from functools import cache
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from builds.build03.hidden import probes as P
from builds.build03.hidden.expected import (
    DEFAULT_POLICY,
    backoff,
    blocking_note,
    describe_policy,
    judge_run,
    model_run,
    retry_call,
    seeded,
    sleeps_of,
    started,
    tail_of,
)
from etl import EtlError
from grader.suites.judging import (
    JSON,
    TIME_TOLERANCE,
    Fail,
    Observed,
    check,
    equal,
    is_kind,
    learner_text,
    listed,
    not_done,
    ok,
    raises,
    same_value,
)
from workbook.checking.feedback import message, show_json, show_outcome

# ─────────────────────────────────────────────────────────────── visible tests, graded


def test_gives_up_on_permanent_immediately(observed: Observed) -> None:
    seen, rng = seeded(observed, "gives_up_on_permanent_immediately")
    call = retry_call({}, (P.PARSE,), True)
    run = seen["fixed"]
    raises(run, call, "ParseError", note="A permanent error is raised as it is, at once.")
    equal(f"{call}: calls of op", run["calls"], 1)
    equal(f"{call}: seconds waited", run["elapsed"], 0.0, tolerance=TIME_TOLERANCE)
    judge_run(seen["drawn"], {}, P.permanent_inputs(rng), note="The permanent error ends it.")


def test_retries_transient_then_succeeds(observed: Observed) -> None:
    seen, rng = seeded(observed, "retries_transient_then_succeeds")
    outcomes = (P.NET, P.NET, P.ok(42))
    call = retry_call({}, outcomes, False)
    run = seen["fixed"]
    equal(call, ok(run, call, "42"), 42)
    equal(f"{call}: calls of op", run["calls"], 3)
    equal(
        f"{call}: seconds waited (virtual)",
        run["elapsed"],
        0.6,
        tolerance=TIME_TOLERANCE,
        note=blocking_note(run) or "0.2 after the first failure, 0.4 after the second.",
    )
    judge_run(seen["drawn"], {}, P.transient_inputs(rng))


def test_honors_retry_after(observed: Observed) -> None:
    seen, rng = seeded(observed, "honors_retry_after")
    call = retry_call({}, (P.limited(5.0), P.ok("ok")), False)
    run = seen["fixed"]
    equal(call, ok(run, call, "'ok'"), "ok")
    equal(f"{call}: calls of op", run["calls"], 2)
    equal(
        f"{call}: seconds waited (virtual)",
        run["elapsed"],
        5.0,
        tolerance=TIME_TOLERANCE,
        note=blocking_note(run) or "Retry-After replaces the backoff; it is not added to it.",
    )
    judge_run(seen["drawn"], {}, P.honors_inputs(rng), note="Wait what Retry-After says.")


def judge_draws(got: JSON, call: str, count: int, ceiling: float) -> list[float]:
    """The draws, if there are `count` of them and each is a float from 0 to `ceiling`."""
    values = listed(ok(got, call, "waits"), count, call, "draws")
    outside = [d for d in values if not (type(d) is float and 0.0 <= d <= ceiling)]
    check(not outside, call, show_json(outside[:1]), f"floats from 0 to {ceiling:g}")
    return values


def test_full_jitter_stays_within_bounds(observed: Observed) -> None:
    seen, rng = seeded(observed, "full_jitter_stays_within_bounds")
    counts, five_seed = P.bounds_inputs(rng)
    rows = listed(seen["draws"], len(counts), "draws for attempts 1 to 9", "attempts")
    for n, (count, got) in enumerate(zip(counts, rows, strict=True), start=1):
        ceiling = backoff({}, n)
        call = f'backoff_delay(RetryPolicy(jitter="full"), {n}, rng=random.Random(...))'
        values = judge_draws(got, f"{call}, {count} times", count, ceiling)
        low, high = min(values), max(values)
        check(
            low < 0.25 * ceiling and high > 0.75 * ceiling,
            f"{call}, {count} draws: smallest and largest",
            show_json([round(low, 4), round(high, 4)]),
            f"waits spread over 0 to {ceiling:g}",
        )
        at_cap = sum(d == ceiling for d in values)
        check(at_cap <= count // 20, call, f"{at_cap} waits at exactly {ceiling:g}", "few")
    call = f"five draws with random.Random({five_seed})"
    five = listed(seen["five"], 2, call, "runs")
    first, second = (judge_draws(g, call, 5, backoff({}, 4)) for g in five)
    equal(
        f"{call}, then again with a new random.Random({five_seed})",
        second,
        first,
        note="Draw from the rng you are given.",
    )
    plain_call = f"backoff_delay(RetryPolicy(), 3, rng=random.Random({five_seed}))"
    equal(plain_call, ok(seen["plain"], plain_call), [0.8])
    zero_call = (
        f"three backoff_delay({describe_policy(P.ZERO_CEILING)}, 1, rng=random.Random({five_seed}))"
    )
    equal(
        zero_call,
        ok(seen["zero"], zero_call),
        [0.0, 0.0, 0.0],
        note="full_jitter returns a float, rng.uniform(0, ceiling), a ceiling of 0 included.",
    )


# ─────────────────────────────────────────────────────────────── hidden


def test_non_etl_error_propagates_at_once(observed: Observed) -> None:
    seen, rng = seeded(observed, "non_etl_error_propagates_at_once")
    for key, spec in zip(("key_error", "type_error"), P.non_etl_inputs(rng), strict=True):
        run = seen[key]
        outcomes = (spec, P.ok(1))
        call = retry_call({}, outcomes, False)
        note = "Anything that is not an EtlError is a bug: let it through."
        judge_run(run, {}, outcomes, note=note)
        check(run["last_itself"] is True, call, "another exception object", "the op's exception")


def test_cancellation_is_never_retried(observed: Observed) -> None:
    seen, rng = seeded(observed, "cancellation_is_never_retried")
    before, base, cancel_at = P.cancellation_inputs(rng)
    policy = describe_policy({"base_delay": base, "max_delay": 10 * base})
    direct = seen["op_raises"]
    call = f"await with_retry({policy}, op) after {before:g} s, op raising asyncio.CancelledError"
    started(direct, call)
    inner = direct["ok"]
    raises(inner["outcome"], call, "CancelledError", note="Cancellation is not an error to retry.")
    equal(f"{call}: calls of op", inner["calls"], 1)
    equal(f"{call}: the clock when it ended", inner["at"], before, tolerance=TIME_TOLERANCE)
    waiting = seen["task_cancelled"]
    call = (
        f"task = with_retry({policy}, op failing with NetworkError); task.cancel() at"
        f" {cancel_at:g} s"
    )
    started(waiting, call)
    got = waiting["ok"]
    check(
        got["done_before_cancel"] is False,
        call,
        f"the task had already ended: {show_outcome(got['outcome'])}",
        f"the task still waiting out its first backoff at {cancel_at:g} s",
    )
    check(
        got["cancelled"] is True and is_kind(got["outcome"], "CancelledError"),
        call,
        show_outcome(got["outcome"]),
        "the task ends cancelled",
        note="Let the CancelledError out of asyncio.sleep: never catch it.",
    )
    equal(f"{call}: the clock when it ended", got["at"], cancel_at, tolerance=TIME_TOLERANCE)
    equal(f"{call}: calls of op, 30 s later", got["calls"], 1)


def test_exhaustion_reraises_the_last_error(observed: Observed) -> None:
    seen, rng = seeded(observed, "exhaustion_reraises_the_last_error")
    kwargs, drawn = P.exhaustion_inputs(rng)
    for given, outcomes, run in (
        ({"max_attempts": 3}, (P.NET, P.TIMEOUT, P.http(503)), seen["fixed"]),
        (kwargs, drawn, seen["drawn"]),
    ):
        call = retry_call(given, outcomes, False)
        judge_run(run, given, outcomes, note="Raise the last error itself, not a wrapper.")
        check(
            run["last_itself"] is True,
            call,
            f"a different {learner_text(run.get('raised'))} object",
            "the very exception the last call raised (a bare `raise`)",
        )


def test_n_attempts_sleep_n_minus_1_times(observed: Observed) -> None:
    seen, rng = seeded(observed, "n_attempts_sleep_n_minus_1_times")
    cases = P.schedule_inputs(rng)
    runs = listed(seen["runs"], len(cases), "with_retry on each schedule", "runs")
    for (kwargs, outcomes), run in zip(cases, runs, strict=True):
        call = retry_call(kwargs, outcomes, True)
        attempts = {**DEFAULT_POLICY, **kwargs}["max_attempts"]
        kind = outcomes[0][0]
        if not is_kind(run, kind):
            not_done(run, call)
            raise Fail(message(call, show_outcome(run), f"raises {kind} after {attempts} calls"))
        judge_run(run, kwargs, outcomes, repeats=True)


def test_backoff_delay_doubles_then_caps(observed: Observed) -> None:
    seen, rng = seeded(observed, "backoff_delay_doubles_then_caps")
    cases = P.backoff_inputs(rng)
    schedules = listed(seen["schedules"], len(cases), "backoff_delay schedules", "schedules")
    for (kwargs, attempts), got in zip(cases, schedules, strict=True):
        call = f"[backoff_delay({describe_policy(kwargs)}, n) for n in {list(attempts)}]"
        expected = [backoff(kwargs, n) for n in attempts]
        equal(
            call,
            ok(got, call, "waits"),
            expected,
            tolerance=1e-12,
            note="min(base_delay * 2 ** (attempt - 1), max_delay), as a float.",
        )


def test_backoff_delay_edge_cases(observed: Observed) -> None:
    seen, rng = seeded(observed, "backoff_delay_edge_cases")
    kwargs, huge = P.edge_inputs(rng)
    first = ok(seen["first"], "backoff_delay(RetryPolicy(), 1)")
    equal("backoff_delay(RetryPolicy(), 1)", first, 0.2)
    raises(seen["zero"], "backoff_delay(RetryPolicy(), 0)", "ValueError", "Attempts count from 1.")
    raises(seen["negative"], "backoff_delay(RetryPolicy(), -3)", "ValueError")
    note = "2 ** 1099 does not fit in a float (OverflowError): the cap was hit long before."
    for call, got, want in (
        ("backoff_delay(RetryPolicy(), 1100)", seen["huge"], 10.0),
        (f"backoff_delay({describe_policy(kwargs)}, 1)", seen["drawn_first"], kwargs["base_delay"]),
        (
            f"backoff_delay({describe_policy(kwargs)}, {huge})",
            seen["drawn_huge"],
            kwargs["max_delay"],
        ),
    ):
        equal(call, ok(got, call, show_json(float(want))), float(want), tolerance=1e-12, note=note)


def test_retry_after_replaces_the_wait_uncapped(observed: Observed) -> None:
    seen, rng = seeded(observed, "retry_after_replaces_the_wait_uncapped")
    cases = P.retry_after_inputs(rng)
    runs = listed(seen["runs"], len(cases), "with_retry on each case", "runs")
    for (kwargs, outcomes), run in zip(cases, runs, strict=True):
        judge_run(
            run,
            kwargs,
            outcomes,
            note="Retry-After, when given (0.0 included), is the wait, as given: not capped, not"
            " added to the backoff; when it is None, the backoff.",
        )


def test_bad_policies_rejected(observed: Observed) -> None:
    seen, rng = seeded(observed, "bad_policies_rejected")
    drawn_good, drawn_bad = P.draw_policies(rng)
    good = listed(seen["good"], len(P.GOOD_POLICIES), "RetryPolicy(...)", "policies")
    for kwargs, got in zip(P.GOOD_POLICIES, good, strict=True):
        ok(got, describe_policy(kwargs), "a policy")
    defaults = ok(seen["defaults"], "RetryPolicy()")
    equal(
        "[p.max_attempts, p.base_delay, p.max_delay, p.jitter] for p = RetryPolicy()",
        defaults,
        [4, 0.2, 10.0, "none"],
    )
    kept = listed(seen["kept"], len(drawn_good), "RetryPolicy(...)", "policies")
    for kwargs, got in zip(drawn_good, kept, strict=True):
        call = (
            "[p.max_attempts, p.base_delay, p.max_delay, p.jitter] for p ="
            f" {describe_policy(kwargs)}"
        )
        want = [kwargs["max_attempts"], kwargs["base_delay"], kwargs["max_delay"], kwargs["jitter"]]
        equal(call, ok(got, call), want, note="A policy keeps the values it was given.")
    bad = (*P.BAD_POLICIES, *drawn_bad)
    for kwargs, got in zip(
        bad, listed(seen["bad"], len(bad), "RetryPolicy", "policies"), strict=True
    ):
        call = describe_policy(kwargs)
        if "ok" in got:
            raise Fail(
                message(call, "accepted it", "raises ValueError", "Refuse it when it is made.")
            )
        raises(got, call, "ValueError", "Refuse a bad policy when it is made.")
    frozen = seen["frozen"]
    if not (is_kind(frozen, "FrozenInstanceError") or is_kind(frozen, "AttributeError")):
        not_done(frozen, "RetryPolicy()")
        raise Fail(
            message(
                "policy = RetryPolicy(); policy.max_attempts = 99",
                show_outcome(frozen),
                "raises dataclasses.FrozenInstanceError: @dataclass(frozen=True)",
            )
        )


def test_sleeps_on_the_event_loop_not_the_thread(observed: Observed) -> None:
    run, rng = seeded(observed, "sleeps_on_the_event_loop_not_the_thread")
    kwargs, outcomes = P.event_loop_inputs(rng)
    call = retry_call(kwargs, outcomes, False)
    want = model_run(kwargs, outcomes)
    equal(call, ok(run, call, show_json(want["ok"])), want["ok"])
    check(
        run["blocking"] == 0.0,
        f"{call}: time.sleep calls",
        f"{run['blocking']:g} s of blocking sleep",
        "none: await asyncio.sleep(...)",
        note="time.sleep freezes the event loop and every other task on it.",
    )
    waited = f"{run['elapsed']:g} s on the event loop's clock, {run['real']:g} s of real time"
    equal(
        f"{call}: seconds waited on the event loop's clock",
        run["elapsed"],
        want["times"][-1],
        tolerance=TIME_TOLERANCE,
        note=f"It took {waited}: whatever it waited with, the event loop was not running.",
    )
    judge_run(run, kwargs, outcomes)


@cache
def tenacity_run(script: str) -> JSON:
    """What tenacity 9's AsyncRetrying does with `script` (JSON of a `Script`), configured to
    the policy."""
    kwargs, raw = json.loads(script)
    outcomes = [tuple(spec) for spec in raw]
    policy = {**DEFAULT_POLICY, **kwargs}
    calls = 0
    sleeps: list[float] = []
    exponential = wait_exponential(multiplier=policy["base_delay"], max=policy["max_delay"])

    def wait(state: RetryCallState) -> float:
        assert state.outcome is not None
        error = state.outcome.exception()
        given = error.retry_after() if isinstance(error, EtlError) else None
        return float(given) if given is not None else float(exponential(state))

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 6))

    async def op() -> Any:
        nonlocal calls
        calls += 1
        outcome = P.make_outcome(outcomes[min(calls, len(outcomes)) - 1])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def run() -> JSON:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(policy["max_attempts"]),
            wait=wait,
            retry=retry_if_exception(lambda e: isinstance(e, EtlError) and e.is_transient()),
            reraise=True,
            sleep=fake_sleep,
        )
        try:
            return {"ok": await retrying(op)}
        except Exception as exc:
            return {"raised": type(exc).__name__, "message": str(exc)}

    loop = asyncio.new_event_loop()
    try:
        result = loop.run_until_complete(run())
    finally:
        loop.close()
    result.update(calls=calls, sleeps=sleeps)
    return result


def test_matches_tenacity_on_scripted_failures(observed: Observed) -> None:
    seen, rng = seeded(observed, "matches_tenacity_on_scripted_failures")
    scripts = P.tenacity_inputs(rng)
    runs = listed(seen["runs"], len(scripts), "with_retry on each script", "runs")
    for (kwargs, outcomes), run in zip(scripts, runs, strict=True):
        theirs = tenacity_run(json.dumps([kwargs, outcomes]))
        call = retry_call(kwargs, outcomes, False)
        if "ok" in theirs:
            equal(call, ok(run, call, show_json(theirs["ok"])), theirs["ok"], note="As tenacity.")
        else:
            raises(run, call, theirs["raised"], note="tenacity (reraise=True) raises that.")
            equal(f"{call}: the error's message", run.get("message"), theirs["message"])
        equal(f"{call}: calls of op (tenacity: {theirs['calls']})", run["calls"], theirs["calls"])
        equal(
            f"{call}: the waits between calls",
            sleeps_of(run, call),
            theirs["sleeps"],
            tolerance=TIME_TOLERANCE,
            say=f"tenacity's waits: {theirs['sleeps']}",
            note=blocking_note(run),
        )
        equal(
            f"{call}: seconds waited after the last call", tail_of(run, call), 0.0, tolerance=1e-6
        )


def test_full_jitter_spreads_over_the_whole_range(observed: Observed) -> None:
    seen, rng = seeded(observed, "full_jitter_spreads_over_the_whole_range")
    seed, counts = P.spread_inputs(rng)
    rows = listed(seen["draws"], len(P.JITTER_ATTEMPTS), "draws per attempt number", "attempts")
    for n, count, got in zip(P.JITTER_ATTEMPTS, counts, rows, strict=True):
        ceiling = backoff(P.JITTER_POLICY, n)
        call = (
            f'backoff_delay(RetryPolicy(base_delay=1.0, max_delay=8.0, jitter="full"), {n},'
            f" rng=random.Random(...)), {count} draws"
        )
        values = judge_draws(got, call, count, ceiling)
        # Uniform on [0, c]: each quarter holds a quarter of the draws, give or take six
        # standard deviations (the draws differ per submission: an honest one fails this
        # about once in 10^8 gradings, a jitter applied before the cap every time).
        quarters = [0, 0, 0, 0]
        for d in values:
            quarters[min(int(4 * d / ceiling), 3)] += 1
        spread = 6 * math.sqrt(count * 0.25 * 0.75)
        low, high = 0.25 * count - spread, 0.25 * count + spread
        check(
            all(low <= q <= high for q in quarters),
            f"{call}: draws per quarter of 0 to {ceiling:g}",
            show_json(quarters),
            f"about {count // 4} in each quarter (uniform from 0 to the capped delay)",
            note="Draw rng.uniform(0, ceiling) with ceiling = min(base * 2 ** (n - 1), max_delay):"
            " cap first, then jitter.",
        )
        mean = sum(values) / len(values)
        check(
            abs(mean - ceiling / 2) <= 0.1 * ceiling,
            f"{call}: mean wait",
            f"{mean:.4f}",
            f"about {ceiling / 2:g}",
        )
        # The spec's draw is rng.uniform(0, ceiling): ceiling - draw, or uniform(ceiling, 0),
        # spreads just as well but is another sequence for the same seed.
        generator = random.Random(seed + n)
        want = [generator.uniform(0.0, ceiling) for _ in range(count)]
        check(
            same_value(values, want, 1e-9),
            f"{call}: the waits, draw by draw",
            show_json(values[:3]),
            f"rng.uniform(0, {ceiling:g}) each time: {show_json(want[:3])}, ...",
            note="Draw rng.uniform(0, ceiling) from the rng you are given: the same seed, the"
            " same waits.",
        )
    run = seen["with_retry"]
    policy = {**P.JITTER_POLICY, "max_attempts": 7}
    call = retry_call(policy, (P.NET,), True)
    if not is_kind(run, "NetworkError"):
        not_done(run, call)
        raise Fail(message(call, show_outcome(run), "raises NetworkError after 7 calls"))
    waits = sleeps_of(run, call)
    ceilings = [backoff(policy, n) for n in range(1, 7)]
    check(
        len(waits) == 6 and all(0 <= w <= c + 1e-6 for w, c in zip(waits, ceilings, strict=False)),
        f"{call}: the waits between calls",
        show_json(waits),
        f"six jittered waits, each between 0 and its ceiling {ceilings}",
        note="with_retry waits backoff_delay(policy, attempt), which jitters.",
    )
    check(
        not same_value(waits, ceilings, TIME_TOLERANCE),
        f"{call}: the waits between calls",
        show_json(waits),
        "jittered waits, not the ceilings themselves",
    )
