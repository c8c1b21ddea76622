"""Build 03's probes: run in the grading child, next to the learner's exported answers.

Each probe calls the learner's code on inputs defined here and returns what it saw as plain
JSON (`observe.plain`: exact types recorded, exceptions by class name, times on a virtual
clock). No expected value lives in this file: the judges (``judges.py``, in the parent)
compute those. The inputs below are shared with the judges, which load this file too.
Probing the same answers twice gives the same observations (apart from ``real`` seconds).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from etl import (
    HttpStatus,
    Launch,
    NetworkError,
    ParseError,
    RateLimited,
    RequestTimeout,
    launches,
)
from grader.observe import (
    JSON,
    Clock,
    Probes,
    attempt,
    need,
    plain,
    raised,
    vrun,
)

PROBES = Probes()
#: Parsed once, when the fork server imports this file: every worker inherits them.
LAUNCHES: tuple[Launch, ...] = tuple(launches())

# ─────────────────────────────────────────────────────────────── inputs (shared with judges)


@dataclass(frozen=True)
class Row:
    """Notebook 02's toy row (the probes' own copy: the learner's may have been edited)."""

    name: str
    alt_km: float


@dataclass(frozen=True)
class Reading:
    """Any dataclass row must work: fields declared out of alphabetical order, JSON types."""

    zeta: str
    alpha: int
    ok: bool
    note: str | None
    ratio: float


FNV_INPUTS: tuple[bytes, ...] = (
    b"",
    b"a",
    b"foobar",
    b"\xff\x00\x80",
    "Союз".encode(),
    bytes(range(256)),
)

CONTENT_ID_INPUTS: tuple[tuple[str, str], ...] = (
    ("row", "x"),
    ("row", "y"),
    ("launch", "ISS|420"),
    ("row", ""),
    ("", "row"),
    ("ab", "c"),
    ("a", "bc"),
    ("row", "Союз-2.1б — Байконур ✓"),
    ("kind with space", '{"alpha":1}'),
)


def sample_launches() -> list[Launch]:
    """A fixture launch, and one with its optional fields absent (None): fresh copies."""
    return [
        dataclasses.replace(LAUNCHES[0]),
        dataclasses.replace(LAUNCHES[1], mission=None, orbit=None),
    ]


def key_rows() -> list[Any]:
    """Rows whose keys are judged exactly: launches, non-ASCII text, -0.0, any dataclass."""
    first, second = sample_launches()
    return [
        first,
        second,
        dataclasses.replace(first, name="Союз-2.1б | Прогресс МС-27", pad="Baïkonour 31/6"),
        Row("ISS", 420.0),
        Row("Baïkonour", 0.09),
        Row("neg", -0.0),
        Reading(zeta="z", alpha=7, ok=True, note=None, ratio=0.5),
    ]


KEY_ROW_LABELS = (
    "launch (a fixture launch)",
    "launch_without_mission (mission=None, orbit=None)",
    'launch_in_cyrillic (name="Союз-2.1б | Прогресс МС-27", pad="Baïkonour 31/6")',
    'Row("ISS", 420.0)',
    'Row("Baïkonour", 0.09)',
    'Row("neg", -0.0)',
    'Reading(zeta="z", alpha=7, ok=True, note=None, ratio=0.5), fields declared out of order',
)


def unencodable_rows() -> list[Any]:
    """Rows with no canonical JSON form: NaN and infinities in float fields."""
    base = sample_launches()[0]
    return [
        dataclasses.replace(base, latitude=math.nan),
        dataclasses.replace(base, longitude=math.inf),
        Row("Alpha", -math.inf),
        Row("Beta", math.nan),
    ]


UNENCODABLE_LABELS = (
    "a launch with latitude=math.nan",
    "a launch with longitude=math.inf",
    'Row("Alpha", -math.inf)',
    'Row("Beta", math.nan)',
)


# Scripted outcomes for the retry loop: data, so the judges can replay them in tenacity.
Outcome = tuple[Any, ...]
NET: Outcome = ("NetworkError", "connection reset")
TIMEOUT: Outcome = ("RequestTimeout", "no answer in 30 s")
PARSE: Outcome = ("ParseError", "bad JSON")


def http(status: int, retry_after: float | None = None) -> Outcome:
    return ("HttpStatus", status, retry_after)


def limited(seconds: float | None) -> Outcome:
    return ("RateLimited", seconds)


def ok(value: Any) -> Outcome:
    return ("ok", value)


def make_outcome(spec: Outcome) -> Any:
    """The exception (or value) an outcome spec stands for: a new object every call."""
    kind = spec[0]
    if kind == "ok":
        return spec[1]
    if kind == "NetworkError":
        return NetworkError(spec[1])
    if kind == "RequestTimeout":
        return RequestTimeout(spec[1])
    if kind == "RateLimited":
        return RateLimited(spec[1])
    if kind == "HttpStatus":
        return HttpStatus(spec[1], retry_after_secs=spec[2])
    if kind == "ParseError":
        return ParseError(spec[1])
    if kind == "KeyError":
        return KeyError(spec[1])
    if kind == "TypeError":
        return TypeError(spec[1])
    raise ValueError(f"unknown outcome {spec!r}")


#: (policy keyword arguments, outcomes): the tenacity cross-check replays each in both.
TENACITY_SCRIPTS: tuple[tuple[dict[str, Any], tuple[Outcome, ...]], ...] = (
    ({}, (NET, NET, ok(42))),
    ({}, (http(503),) * 5),
    (
        {"max_attempts": 6, "base_delay": 0.5, "max_delay": 2.0},
        (TIMEOUT, http(502), http(500), http(504), http(408), ok("done")),
    ),
    ({}, (http(404),)),
    ({}, (NET, PARSE, ok(1))),
    ({"max_attempts": 3}, (limited(1.5), limited(None), ok(None))),
    ({"max_attempts": 2}, (http(429, 7.0), http(429, 7.0))),
    ({"max_attempts": 5, "base_delay": 1.0, "max_delay": 1.0}, (NET,) * 5),
    ({"max_attempts": 8, "base_delay": 0.25, "max_delay": 4.0}, (TIMEOUT,) * 8),
)

#: (policy keyword arguments, outcomes) whose call times are judged exactly.
SCHEDULES: tuple[tuple[dict[str, Any], tuple[Outcome, ...]], ...] = (
    ({}, (http(503),)),  # repeated: every call fails
    ({"max_attempts": 1}, (NET,)),
    ({"max_attempts": 6, "base_delay": 0.5, "max_delay": 3.0}, (NET,)),
    ({"max_attempts": 3}, (limited(2.0),)),
)

#: (policy keyword arguments, outcomes) for Retry-After.
RETRY_AFTER_CASES: tuple[tuple[dict[str, Any], tuple[Outcome, ...]], ...] = (
    ({}, (limited(30.0), ok("ok"))),  # above max_delay: not capped
    ({}, (http(503, 2.5), ok("ok"))),
    ({}, (limited(None), ok("ok"))),  # no Retry-After: the backoff
    ({}, (limited(0.0), ok("ok"))),  # zero is a value, not "absent"
    ({"max_delay": 1.0}, (limited(3.0), http(503), ok("ok"))),
)

BAD_POLICIES: tuple[dict[str, Any], ...] = (
    {"max_attempts": 0},
    {"max_attempts": -1},
    {"base_delay": -0.1},
    {"base_delay": math.nan},
    {"base_delay": math.inf},
    {"max_delay": -1.0},
    {"max_delay": math.nan},
    {"max_delay": math.inf},
    {"base_delay": 0.5, "max_delay": 0.1},
    {"jitter": "partial"},
    {"jitter": "FULL"},
)
GOOD_POLICIES: tuple[dict[str, Any], ...] = (
    {},
    {"max_attempts": 1, "base_delay": 0.0, "max_delay": 0.0},
    {"jitter": "full"},
    {"max_attempts": 10, "base_delay": 1.5, "max_delay": 1.5},
)

#: (policy keyword arguments, attempts) for backoff_delay's schedule.
BACKOFF_CASES: tuple[tuple[dict[str, Any], tuple[int, ...]], ...] = (
    ({}, tuple(range(1, 13))),
    ({"base_delay": 0.5, "max_delay": 3.0}, tuple(range(1, 8))),
    ({"base_delay": 0.05, "max_delay": 60.0}, (1, 2, 5, 10, 11, 12, 20)),
)

JITTER_SEED = 20150304  # the day Brooker's post went up, as a number
JITTER_POLICY: dict[str, Any] = {"base_delay": 1.0, "max_delay": 8.0, "jitter": "full"}
JITTER_ATTEMPTS = (1, 2, 3, 4, 6, 9)
JITTER_DRAWS = 400
VISIBLE_JITTER_DRAWS = 200


# ─────────────────────────────────────────────────────────────── probe helpers


def policy(ns: ModuleType, kwargs: dict[str, Any]) -> Any:
    return need(ns, "RetryPolicy")(**kwargs)


class Script:
    """A zero-argument op for `with_retry`: each call returns a fresh coroutine that plays
    the next outcome (the last one repeats), raising it if it is an exception."""

    def __init__(self, clock: Clock, outcomes: Sequence[Outcome]) -> None:
        self.clock = clock
        self.outcomes = outcomes
        self.calls = 0
        self.times: list[float] = []
        self.raised: list[BaseException] = []

    def __call__(self) -> Awaitable[Any]:
        self.calls += 1
        return self._play()

    async def _play(self) -> Any:
        self.times.append(self.clock.now())
        spec = self.outcomes[min(len(self.times), len(self.outcomes)) - 1]
        outcome = make_outcome(spec)
        if isinstance(outcome, BaseException):
            self.raised.append(outcome)
            raise outcome
        return outcome


def run_retry(ns: ModuleType, kwargs: dict[str, Any], outcomes: Sequence[Outcome]) -> JSON:
    """with_retry(RetryPolicy(**kwargs), op) on virtual time: the outcome, the call times,
    and whether an error raised was the very object the op raised last."""
    box: dict[str, Any] = {}

    async def go(clock: Clock) -> Any:
        with_retry = need(ns, "with_retry")
        retry_policy = policy(ns, kwargs)
        op = box["op"] = Script(clock, outcomes)
        try:
            return await with_retry(retry_policy, op)
        except BaseException as exc:
            box["exc"] = exc
            raise

    seen = vrun(go)
    op: Script | None = box.get("op")
    seen["calls"] = op.calls if op else 0
    seen["times"] = op.times if op else []
    exc = box.get("exc")
    seen["last_itself"] = bool(op and op.raised and exc is op.raised[-1])
    return seen


async def settle(awaitable: Awaitable[Any]) -> JSON:
    """Await and observe, inside a running loop (cancellation included)."""
    try:
        return {"ok": plain(await awaitable)}
    except BaseException as exc:
        return raised(exc)


class CountingSink:
    """The probes' own inner sink: records each load's rows by id, can fail or be slow."""

    def __init__(self, fail_first: int = 0, delay: float = 0.0) -> None:
        self.fail_first = fail_first
        self.delay = delay
        self.loads: list[list[JSON]] = []
        self.written: list[JSON] = []

    async def load(self, rows: Sequence[Any]) -> int:
        batch = [row_id(row) for row in rows]
        self.loads.append(batch)
        if self.delay:
            await asyncio.sleep(self.delay)
        if len(self.loads) <= self.fail_first:
            raise NetworkError("connection dropped mid-write")
        self.written.extend(batch)
        return len(batch)


def row_id(row: Any) -> JSON:
    """A row as the judges see it: the launch id or the toy row's name, never the object."""
    if type(row) is Launch:
        return row.id
    if type(row) is Row:
        return row.name
    return plain(row)


def sink_run(make: Callable[[ModuleType], Awaitable[JSON]], ns: ModuleType) -> JSON:
    """Run one sink scenario on virtual time; its observation, or why it stopped."""

    async def go(clock: Clock) -> JSON:
        return await make(ns)

    seen = vrun(go)
    if "ok" in seen:
        return {"steps": seen["ok"], "elapsed": seen["elapsed"]}
    return {"stopped": {k: v for k, v in seen.items() if k in ("raised", "message", "missing")}}


def distinct_launches(start: int, count: int) -> list[Launch]:
    return [dataclasses.replace(launch) for launch in LAUNCHES[start : start + count]]


# ─────────────────────────────────────────────────────────────── the visible tests' probes


@PROBES.add("fnv1a_vectors")
def fnv1a_vectors(ns: ModuleType) -> JSON:
    return {"digests": [attempt(lambda d=d: need(ns, "fnv1a_64")(d)) for d in FNV_INPUTS]}


@PROBES.add("same_content_hashes_stable_distinct_content_differs")
def same_content(ns: ModuleType) -> JSON:
    calls = (("row", "x"), ("row", "x"), ("row", "y"), ("a", "x"), ("b", "x"), ("ab", "c"))
    calls += (("a", "bc"),)
    return {"ids": [attempt(lambda k=k, c=c: need(ns, "content_id")(k, c)) for k, c in calls]}


@PROBES.add("content_key_is_stable_and_distinguishes_rows")
def content_key_stable(ns: ModuleType) -> JSON:
    launch = dataclasses.replace(LAUNCHES[0])
    twin = dataclasses.replace(launch)
    renamed = dataclasses.replace(launch, name=launch.name + " (rescheduled)")

    def key(row: Any) -> JSON:
        return attempt(lambda: need(ns, "content_key")(row))

    return {
        "launch": key(launch),
        "twin": key(twin),
        "renamed": key(renamed),
        "toy": key(Row("ISS", 420.0)),
        "toy_by_id": attempt(
            lambda: need(ns, "content_id")("row", '{"alt_km":420.0,"name":"ISS"}')
        ),
        "nan": [key(Row("Alpha", math.nan)), key(Row("Beta", math.nan))],
    }


@PROBES.add("rerun_writes_zero_new_rows")
def rerun_writes_zero(ns: ModuleType) -> JSON:
    async def scenario(ns: ModuleType) -> JSON:
        inner = CountingSink()
        sink = need(ns, "IdempotentSink")(inner)
        rows = distinct_launches(0, 2)
        first = await settle(sink.load(rows))
        second = await settle(sink.load(distinct_launches(0, 2)))
        return {"first": first, "second": second, "written": inner.written}

    return sink_run(scenario, ns)


@PROBES.add("distinct_rows_all_written")
def distinct_rows(ns: ModuleType) -> JSON:
    async def scenario(ns: ModuleType) -> JSON:
        inner = CountingSink()
        sink = need(ns, "IdempotentSink")(inner)
        rows = distinct_launches(10, 3)
        return {"load": await settle(sink.load(rows)), "written": inner.written}

    return sink_run(scenario, ns)


@PROBES.add("gives_up_on_permanent_immediately")
def gives_up(ns: ModuleType) -> JSON:
    return run_retry(ns, {}, (PARSE,))


@PROBES.add("retries_transient_then_succeeds")
def retries_transient(ns: ModuleType) -> JSON:
    return run_retry(ns, {}, (NET, NET, ok(42)))


@PROBES.add("honors_retry_after")
def honors_retry_after(ns: ModuleType) -> JSON:
    return run_retry(ns, {}, (limited(5.0), ok("ok")))


@PROBES.add("full_jitter_stays_within_bounds")
def jitter_bounds(ns: ModuleType) -> JSON:
    def draws(kwargs: dict[str, Any], attempt_no: int, seed: int, count: int) -> JSON:
        def go() -> list[Any]:
            retry_policy = policy(ns, kwargs)
            backoff = need(ns, "backoff_delay")
            rng = random.Random(seed)
            return [backoff(retry_policy, attempt_no, rng=rng) for _ in range(count)]

        return attempt(go)

    return {
        "draws": [
            draws({"jitter": "full"}, n, 1000 + n, VISIBLE_JITTER_DRAWS) for n in range(1, 10)
        ],
        "five": [draws({"jitter": "full"}, 4, 7, 5), draws({"jitter": "full"}, 4, 7, 5)],
        "plain": draws({}, 3, 7, 1),
    }


# ─────────────────────────────────────────────────────────────── hidden: content ids and keys


@PROBES.add("content_id_is_sha256_of_kind_nul_canonical")
def content_id_exact(ns: ModuleType) -> JSON:
    return {
        "ids": [
            attempt(lambda k=k, c=c: need(ns, "content_id")(k, c)) for k, c in CONTENT_ID_INPUTS
        ]
    }


@PROBES.add("content_key_hashes_the_canonical_json")
def content_key_exact(ns: ModuleType) -> JSON:
    return {"keys": [attempt(lambda r=r: need(ns, "content_key")(r)) for r in key_rows()]}


@PROBES.add("keys_equal_across_interpreters", interpreters=2)
def keys_across(ns: ModuleType) -> JSON:
    return {
        "keys": [attempt(lambda r=r: need(ns, "content_key")(r)) for r in key_rows()],
        "ids": [
            attempt(lambda k=k, c=c: need(ns, "content_id")(k, c)) for k, c in CONTENT_ID_INPUTS
        ],
        "hash": hash("run-it-twice"),
    }


@PROBES.add("row_without_canonical_form_raises_parse_error")
def unencodable(ns: ModuleType) -> JSON:
    return {
        "bad": [attempt(lambda r=r: need(ns, "content_key")(r)) for r in unencodable_rows()],
        "good": attempt(lambda: need(ns, "content_key")(Row("finite", 1.5))),
    }


# ─────────────────────────────────────────────────────────────── hidden: the sink


@PROBES.add("duplicates_within_a_batch_written_once")
def within_batch(ns: ModuleType) -> JSON:
    async def scenario(ns: ModuleType) -> JSON:
        a, b, c, d = distinct_launches(20, 4)
        inner = CountingSink()
        sink = need(ns, "IdempotentSink")(inner)
        first = await settle(sink.load([a, b, dataclasses.replace(a), c, b]))
        second = await settle(sink.load([c, d, d]))
        return {"first": first, "second": second, "loads": inner.loads}

    return sink_run(scenario, ns)


@PROBES.add("parse_failure_mid_batch_remembers_nothing")
def parse_failure(ns: ModuleType) -> JSON:
    async def scenario(ns: ModuleType) -> JSON:
        a, b = distinct_launches(30, 2)
        bad = dataclasses.replace(a, id="bad-row", latitude=math.nan)
        inner = CountingSink()
        sink = need(ns, "IdempotentSink")(inner)
        failed = await settle(sink.load([a, bad, b]))
        retry = await settle(sink.load([a, b]))
        return {"failed": failed, "retry": retry, "loads": inner.loads, "written": inner.written}

    return sink_run(scenario, ns)


@PROBES.add("inner_failure_remembers_nothing_and_retry_writes")
def inner_failure(ns: ModuleType) -> JSON:
    async def scenario(ns: ModuleType) -> JSON:
        rows = distinct_launches(40, 2)
        inner = CountingSink(fail_first=1)
        sink = need(ns, "IdempotentSink")(inner)
        failed = await settle(sink.load(rows))
        retry = await settle(sink.load(rows))
        again = await settle(sink.load(rows))
        return {"failed": failed, "retry": retry, "again": again, "written": inner.written}

    return sink_run(scenario, ns)


@PROBES.add("concurrent_loads_write_once")
def concurrent(ns: ModuleType) -> JSON:
    async def scenario(ns: ModuleType) -> JSON:
        rows = distinct_launches(50, 2)
        inner = CountingSink(delay=1.0)
        sink = need(ns, "IdempotentSink")(inner)
        results = await asyncio.gather(settle(sink.load(rows)), settle(sink.load(rows)))
        return {"results": list(results), "written": inner.written}

    return sink_run(scenario, ns)


@PROBES.add("first_concurrent_load_fails_second_writes")
def concurrent_first_fails(ns: ModuleType) -> JSON:
    async def scenario(ns: ModuleType) -> JSON:
        rows = distinct_launches(60, 2)
        inner = CountingSink(fail_first=1, delay=1.0)
        sink = need(ns, "IdempotentSink")(inner)
        results = await asyncio.gather(settle(sink.load(rows)), settle(sink.load(rows)))
        return {"results": list(results), "written": inner.written}

    return sink_run(scenario, ns)


@PROBES.add("with_seen_skips_preloaded_keys")
def with_seen(ns: ModuleType) -> JSON:
    async def scenario(ns: ModuleType) -> JSON:
        a, b = distinct_launches(70, 2)
        content_key = need(ns, "content_key")
        sink_class = need(ns, "IdempotentSink")
        inner = CountingSink()
        # Any iterable of keys, here a generator (as when they are read from a file).
        sink = sink_class.with_seen(inner, (content_key(row) for row in [a]))
        mixed = await settle(sink.load([a, b]))
        full = CountingSink()
        every = sink_class.with_seen(full, [content_key(a), content_key(b)])
        none_new = await settle(every.load([a, b]))
        return {
            "mixed": mixed,
            "written": inner.written,
            "none_new": none_new,
            "full_loads": full.loads,
        }

    return sink_run(scenario, ns)


@PROBES.add("each_sink_remembers_its_own_keys")
def own_memory(ns: ModuleType) -> JSON:
    async def scenario(ns: ModuleType) -> JSON:
        rows = distinct_launches(80, 2)
        sink_class = need(ns, "IdempotentSink")
        first_inner, second_inner = CountingSink(), CountingSink()
        first = await settle(sink_class(first_inner).load(rows))
        second = await settle(sink_class(second_inner).load(rows))
        return {"first": first, "second": second, "second_written": second_inner.written}

    return sink_run(scenario, ns)


# ─────────────────────────────────────────────────────────────── hidden: the retry loop


@PROBES.add("non_etl_error_propagates_at_once")
def non_etl(ns: ModuleType) -> JSON:
    return {
        "key_error": run_retry(ns, {}, (("KeyError", "missing field"), ok(1))),
        "type_error": run_retry(ns, {}, (("TypeError", "bad operand"), ok(1))),
    }


@PROBES.add("cancellation_is_never_retried")
def cancellation(ns: ModuleType) -> JSON:
    async def op_cancelled(clock: Clock) -> JSON:
        calls = [0]

        async def once() -> Any:
            calls[0] += 1
            raise asyncio.CancelledError()

        outcome = await settle(need(ns, "with_retry")(policy(ns, {}), lambda: once()))
        return {"outcome": outcome, "calls": calls[0], "at": clock.now()}

    async def cancelled_while_waiting(clock: Clock) -> JSON:
        script = Script(clock, (NET,))
        with_retry = need(ns, "with_retry")
        task = asyncio.ensure_future(with_retry(policy(ns, {}), script))
        await asyncio.sleep(0.1)  # inside the first 0.2 s backoff
        was_done = task.done()
        task.cancel()
        outcome = await settle(task)
        await asyncio.sleep(30.0)  # a retry that survived the cancel would call again
        return {
            "done_before_cancel": was_done,
            "outcome": outcome,
            "cancelled": task.cancelled(),
            "calls_after": script.calls,
        }

    return {"op_raises": vrun(op_cancelled), "task_cancelled": vrun(cancelled_while_waiting)}


@PROBES.add("exhaustion_reraises_the_last_error")
def exhaustion(ns: ModuleType) -> JSON:
    return run_retry(
        ns,
        {"max_attempts": 3},
        (NET, TIMEOUT, ("HttpStatus", 503, None)),
    )


@PROBES.add("n_attempts_sleep_n_minus_1_times")
def schedules(ns: ModuleType) -> JSON:
    return {"runs": [run_retry(ns, kwargs, outcomes) for kwargs, outcomes in SCHEDULES]}


@PROBES.add("backoff_delay_doubles_then_caps")
def backoff(ns: ModuleType) -> JSON:
    def schedule(kwargs: dict[str, Any], attempts: tuple[int, ...]) -> JSON:
        def go() -> list[Any]:
            retry_policy = policy(ns, kwargs)
            backoff_delay = need(ns, "backoff_delay")
            return [backoff_delay(retry_policy, n) for n in attempts]

        return attempt(go)

    return {"schedules": [schedule(kwargs, attempts) for kwargs, attempts in BACKOFF_CASES]}


@PROBES.add("backoff_delay_edge_cases")
def backoff_edges(ns: ModuleType) -> JSON:
    def call(n: int) -> JSON:
        return attempt(lambda: need(ns, "backoff_delay")(policy(ns, {}), n))

    return {"zero": call(0), "negative": call(-3), "huge": call(1100), "first": call(1)}


@PROBES.add("retry_after_replaces_the_wait_uncapped")
def retry_after(ns: ModuleType) -> JSON:
    return {"runs": [run_retry(ns, kwargs, outcomes) for kwargs, outcomes in RETRY_AFTER_CASES]}


@PROBES.add("bad_policies_rejected")
def bad_policies(ns: ModuleType) -> JSON:
    def frozen() -> JSON:
        retry_policy = policy(ns, {})
        retry_policy.max_attempts = 99
        return retry_policy.max_attempts

    def defaults() -> list[Any]:
        made = policy(ns, {})
        return [made.max_attempts, made.base_delay, made.max_delay, made.jitter]

    def made(kwargs: dict[str, Any]) -> None:
        policy(ns, kwargs)  # only whether it is accepted: the object itself is not reported

    return {
        "bad": [attempt(lambda k=k: made(k)) for k in BAD_POLICIES],
        "good": [attempt(lambda k=k: made(k)) for k in GOOD_POLICIES],
        "defaults": attempt(defaults),
        "frozen": attempt(frozen),
    }


@PROBES.add("sleeps_on_the_event_loop_not_the_thread")
def event_loop_sleep(ns: ModuleType) -> JSON:
    # Tiny delays: a blocking time.sleep here costs tens of milliseconds, never seconds.
    return run_retry(
        ns, {"max_attempts": 3, "base_delay": 0.01, "max_delay": 1.0}, (NET, NET, ok(7))
    )


@PROBES.add("matches_tenacity_on_scripted_failures")
def tenacity_scripts(ns: ModuleType) -> JSON:
    return {"runs": [run_retry(ns, kwargs, outcomes) for kwargs, outcomes in TENACITY_SCRIPTS]}


@PROBES.add("full_jitter_spreads_over_the_whole_range")
def jitter_spread(ns: ModuleType) -> JSON:
    def draws(attempt_no: int) -> JSON:
        def go() -> list[Any]:
            retry_policy = policy(ns, JITTER_POLICY)
            backoff = need(ns, "backoff_delay")
            rng = random.Random(JITTER_SEED + attempt_no)
            return [backoff(retry_policy, attempt_no, rng=rng) for _ in range(JITTER_DRAWS)]

        return attempt(go)

    # with_retry draws from the random module by default: seed it, so this is repeatable.
    random.seed(JITTER_SEED)
    in_loop = run_retry(ns, {**JITTER_POLICY, "max_attempts": 7}, (NET,))
    return {"draws": [draws(n) for n in JITTER_ATTEMPTS], "with_retry": in_loop}
