"""Visible checks of build 03: seed 001's test names, the FNV-1a warm-up and the jitter stretch.

Each check takes the learner's namespace (the kernel's globals, or the module exported from the
notebook) and, when something is off, says the call it made, what came back and what it
expected. Checks keep no state between runs, build their own inputs, and never trust the
learner's `Row`: running one twice gives the same verdict. The async ones run on virtual time,
so a 5 s Retry-After costs microseconds.

Expected values here are published vectors or plain properties, never a reference
implementation: this module ships to learners.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from etl import Launch, MemorySink, NetworkError, ParseError, RateLimited, launches
from workbook.checks import Checks, Said, expect, expect_equal, expect_raises, outcome_of

CHECKS = Checks("03")

HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Row:
    """The toy row of notebook 02 (the checks' own copy, so a learner's edits can't move it)."""

    name: str
    alt_km: float


# ───────────────────────────────────────────────────────── step 0: fnv1a_64

FNV_VECTORS = (("", "cbf29ce484222325"), ("a", "af63dc4c8601ec8c"), ("foobar", "85944171f73967e8"))
#: What FNV-1 (multiply, then XOR) gives for the same inputs: the usual slip.
FNV1_DIGESTS = {"af63bd4c8601b7be", "340d8765a4dda9c2"}


def _fnv_note(got: Any) -> str:
    if isinstance(got, int):
        return 'Return text, not the number: 16 lowercase hex digits, f"{h:016x}".'
    if not isinstance(got, str):
        return 'Return a str: f"{h:016x}".'
    if got in FNV1_DIGESTS:
        return "That is FNV-1 (multiply, then XOR). FNV-1a XORs the byte in first, then multiplies."
    if len(got) > 16:
        return "Python ints never wrap: keep 64 bits with `& MASK_64` after every multiplication."
    if got.lower() != got:
        return "Use lowercase hex digits."
    if len(got) < 16:
        return 'Pad to 16 digits: f"{h:016x}".'
    return "Start from FNV_OFFSET_BASIS; per byte: h ^= byte, then h = (h * FNV_PRIME) & MASK_64."


@CHECKS.add(step="fnv1a_64")
def fnv1a_vectors(ns: Any) -> None:
    for text, digest in FNV_VECTORS:
        got = ns.fnv1a_64(text.encode())
        expect_equal(f"fnv1a_64({text.encode()!r})", got, digest, note=_fnv_note(got))


# ───────────────────────────────────────────────────────── step 1: content_id

#: sha256(b"row\x00x"), the published SHA-256 of those four bytes.
SHA256_ROW_NUL_X = "1a6787d3e9f760f3e6b0194d997042b2e554bf4970cce7f365ca0929a7e43123"


@CHECKS.add(step="content_id")
def same_content_hashes_stable_distinct_content_differs(ns: Any) -> None:
    first = ns.content_id("row", "x")
    expect(
        isinstance(first, str) and HEX64.fullmatch(first) is not None,
        'content_id("row", "x")',
        first,
        "64 lowercase hex digits (hashlib.sha256(...).hexdigest())",
    )
    expect_equal(
        'content_id("row", "x"), a second time',
        ns.content_id("row", "x"),
        first,
        note="Same content, same id, every time: nothing random, no clock, no hash().",
    )
    other = ns.content_id("row", "y")
    expect(
        other != first,
        'content_id("row", "y")',
        other,
        f'an id other than content_id("row", "x") = {first!r}',
        note="Different content, different id: is `canonical` hashed at all?",
    )
    as_a, as_b = ns.content_id("a", "x"), ns.content_id("b", "x")
    expect(
        as_a != as_b,
        'content_id("a", "x") and content_id("b", "x")',
        Said(f"the same id twice: {as_a!r}"),
        "two different ids",
        note="The kind tag goes into the hash: equal text of two kinds must not share an id.",
    )
    joined = ns.content_id("ab", "c")
    expect(
        joined != ns.content_id("a", "bc"),
        'content_id("ab", "c") and content_id("a", "bc")',
        Said(f"the same id twice: {joined!r}"),
        "two different ids",
        note="Hash one 0x00 byte between kind and canonical, so the boundary can't move.",
    )
    expect_equal(
        'content_id("row", "x")',
        first,
        SHA256_ROW_NUL_X,
        note="Expected sha256 of the UTF-8 bytes of the kind, one 0x00 byte, then canonical: "
        'hashlib.sha256(b"row\\x00x").hexdigest().',
    )


# ───────────────────────────────────────────────────────── step 2: content_key

CANONICAL_NOTE = (
    "The canonical form is json.dumps(dataclasses.asdict(row), sort_keys=True,"
    ' separators=(",", ":"), ensure_ascii=False, allow_nan=False).'
)


@CHECKS.add(step="content_key")
def content_key_is_stable_and_distinguishes_rows(ns: Any) -> None:
    launch: Launch = launches()[0]
    twin = dataclasses.replace(launch)  # equal content, built separately
    key = ns.content_key(launch)
    expect(
        isinstance(key, str) and HEX64.fullmatch(key) is not None,
        "content_key(launch)",
        key,
        '64 lowercase hex digits: content_id("row", canonical)',
    )
    expect_equal(
        "content_key(twin), where twin == launch but is another object",
        ns.content_key(twin),
        key,
        note="Equal rows must get equal keys: the key comes from the content only.",
    )
    renamed = dataclasses.replace(launch, name=launch.name + " (rescheduled)")
    other = ns.content_key(renamed)
    expect(
        other != key,
        "content_key(launch with a changed name)",
        other,
        f"a key other than content_key(launch) = {key!r}",
        note="Any changed field is a different row, so it needs a different key.",
    )
    canonical = '{"alt_km":420.0,"name":"ISS"}'
    expect_equal(
        'content_key(Row("ISS", 420.0))',
        ns.content_key(Row("ISS", 420.0)),
        ns.content_id("row", canonical),
        note=f"That is content_id('row', {canonical!r}). {CANONICAL_NOTE}",
    )
    for name in ("Alpha", "Beta"):
        expect_raises(
            ParseError,
            f'content_key(Row("{name}", math.nan))',
            functools.partial(ns.content_key, Row(name, math.nan)),
            note="A row with no canonical form has no key. A default key would give Alpha and "
            "Beta the same key, and the sink would drop one of them: raise etl.ParseError.",
        )


# ───────────────────────────────────────────────────────── step 3: the sink


@CHECKS.add(step="sink")
async def rerun_writes_zero_new_rows(ns: Any) -> None:
    inner = MemorySink()
    sink = ns.IdempotentSink(inner)
    rows = launches()[:2]
    first = "sink = IdempotentSink(MemorySink()); await sink.load(two_rows)"
    expect_equal(first, await sink.load(rows), 2, note="Both rows are new: both are written.")
    expect_equal(
        "await sink.load(two_rows), the same two rows again",
        await sink.load(rows),
        0,
        note="Every key is remembered from the first load: nothing is new, nothing is written.",
    )
    expect_equal(
        "len(inner.rows) after both loads",
        len(inner.rows),
        2,
        note="The inner sink should hold each row once.",
    )


@CHECKS.add(step="sink")
async def distinct_rows_all_written(ns: Any) -> None:
    inner = MemorySink()
    sink = ns.IdempotentSink(inner)
    rows = launches()[10:13]
    expect_equal(
        "sink = IdempotentSink(MemorySink()); await sink.load(three_distinct_rows)",
        await sink.load(rows),
        3,
        note="Three different rows, three keys, three writes.",
    )
    expect(
        inner.rows == rows,
        "inner.rows after the load (names)",
        [getattr(r, "name", r) for r in inner.rows],
        f"the three rows in their order: {[r.name for r in rows]}",
    )


# ───────────────────────────────────────────────────────── step 5: with_retry


class ScriptedOp:
    """A zero-argument op: each call makes the next outcome (the last one repeats) and raises
    it if it is an exception, returns it otherwise. Counts its calls."""

    def __init__(self, *outcomes: Callable[[], Any]) -> None:
        self.outcomes = outcomes
        self.calls = 0

    async def __call__(self) -> Any:
        outcome = self.outcomes[min(self.calls, len(self.outcomes) - 1)]()
        self.calls += 1
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


#: Real seconds a retry check may take: on virtual time its sleeps cost microseconds.
RETRY_REAL_SECONDS = 0.5
SLEPT_FOR_REAL = (
    f"under {RETRY_REAL_SECONDS} s: on virtual time, asyncio.sleep returns at once",
    "It waited for real: use await asyncio.sleep(...), never time.sleep(...), which also "
    "freezes every other task on the loop.",
)


def loop_time() -> float:
    return asyncio.get_running_loop().time()


@CHECKS.add(step="with_retry")
async def gives_up_on_permanent_immediately(ns: Any) -> None:
    policy = ns.RetryPolicy()
    op = ScriptedOp(lambda: ParseError("bad JSON"))
    call = "await with_retry(RetryPolicy(), op), op raising ParseError('bad JSON') every time"
    start = loop_time()
    ok, got = await outcome_of(ns.with_retry(policy, op))
    waited = loop_time() - start
    expect(
        not ok and type(got) is ParseError,
        call,
        Said.of(ok, got),
        "raises ParseError (the op's own error)",
        note="A permanent error is raised as it is, at once.",
    )
    expect_equal(
        f"{call}: calls of op",
        op.calls,
        1,
        note="err.is_transient() is False for ParseError: the same call would fail the same "
        "way, so it is never repeated.",
    )
    expect(
        math.isclose(waited, 0.0, abs_tol=1e-9),
        f"{call}: seconds waited",
        waited,
        "0 (no wait before giving up)",
    )


@CHECKS.add(step="with_retry")
async def retries_transient_then_succeeds(ns: Any) -> None:
    policy = ns.RetryPolicy()
    op = ScriptedOp(
        lambda: NetworkError("connection reset"),
        lambda: NetworkError("connection reset"),
        lambda: 42,
    )
    call = "await with_retry(RetryPolicy(), op), op raising NetworkError twice, then returning 42"
    start, real_start = loop_time(), time.perf_counter()
    ok, got = await outcome_of(ns.with_retry(policy, op))
    waited, real = loop_time() - start, time.perf_counter() - real_start
    expect(
        ok and type(got) is int and got == 42,
        call,
        Said.of(ok, got),
        "returned 42",
        note="NetworkError is transient and 4 attempts are allowed: the third call succeeds.",
    )
    expect_equal(f"{call}: calls of op", op.calls, 3)
    expect(
        real < RETRY_REAL_SECONDS, f"{call}: real seconds taken", round(real, 2), *SLEPT_FOR_REAL
    )
    expect(
        math.isclose(waited, 0.6, abs_tol=1e-6),
        f"{call}: seconds waited (virtual)",
        waited,
        "0.6: backoff_delay(policy, 1) + backoff_delay(policy, 2) = 0.2 + 0.4",
        note="Wait after each failure with await asyncio.sleep(backoff_delay(policy, attempt)).",
    )


@CHECKS.add(step="with_retry")
async def honors_retry_after(ns: Any) -> None:
    policy = ns.RetryPolicy()
    op = ScriptedOp(lambda: RateLimited(5.0), lambda: "ok")
    call = "await with_retry(RetryPolicy(), op), op raising RateLimited(5.0) once, then 'ok'"
    start, real_start = loop_time(), time.perf_counter()
    ok, got = await outcome_of(ns.with_retry(policy, op))
    waited, real = loop_time() - start, time.perf_counter() - real_start
    expect(ok and got == "ok", call, Said.of(ok, got), "returned 'ok'")
    expect_equal(f"{call}: calls of op", op.calls, 2)
    expect(
        real < RETRY_REAL_SECONDS, f"{call}: real seconds taken", round(real, 2), *SLEPT_FOR_REAL
    )
    expect(
        waited >= 5.0 - 1e-6,
        f"{call}: seconds waited (virtual)",
        waited,
        "at least 5.0: the server said Retry-After: 5",
        note="When err.retry_after() is not None, wait that long instead of the backoff.",
    )
    expect(
        math.isclose(waited, 5.0, abs_tol=1e-6),
        f"{call}: seconds waited (virtual)",
        waited,
        "exactly 5.0",
        note="Retry-After replaces the computed backoff; it is not added to it.",
    )


# ───────────────────────────────────────────────────────── step 6: full jitter

JITTER_DRAWS = 200


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
    plain = ns.backoff_delay(ns.RetryPolicy(), 3, rng=random.Random(7))
    expect_equal(
        "backoff_delay(RetryPolicy(), 3, rng=random.Random(7))",
        plain,
        0.8,
        note='With jitter="none" the wait is the capped delay itself.',
    )
