"""Build 03's judges: run in the grading process, on the probes' plain JSON observations.

One judge per graded test of notebook 03 in ``workbook.toml``. Expected values are computed
here (FNV-1a and SHA-256 from their definitions, the canonical JSON from its spec, backoff
from its formula, tenacity's behaviour by running tenacity) and never enter the child.
The graded versions of the visible tests use more inputs than the self-checks, so answers
hard-coded to the visible cases do not pay. Messages describe what was expected in words
wherever the value itself would give a hidden answer away (hashes). Judging the same
observations twice gives the same verdicts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from etl import EtlError
from grader.digest import CANONICAL_OPTIONS, content_id
from grader.judging import (
    JSON,
    TIME_TOLERANCE,
    Fail,
    GraderFault,
    Judges,
    Observed,
    check,
    equal,
    is_hex_digest,
    not_done,
    ok,
    raises,
    same_value,
)
from grader.suites import load_probes
from workbook.feedback import message, show_json, show_outcome

P = load_probes(Path(__file__).with_name("probes.py"))
JUDGES = Judges()
DEFAULT_POLICY: dict[str, Any] = {"max_attempts": 4, "base_delay": 0.2, "max_delay": 10.0}


# ─────────────────────────────────────────────────────────────── expected values


def fnv1a_64(data: bytes) -> str:
    digest = 0xCBF29CE484222325
    for byte in data:
        digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{digest:016x}"


def canonical(row: Any, **overrides: Any) -> str:
    """The row's canonical JSON; `overrides` change one option, as a learner's bug would."""
    return json.dumps(dataclasses.asdict(row), **{**CANONICAL_OPTIONS, **overrides})


def backoff(kwargs: dict[str, Any], attempt: int) -> float:
    policy = {**DEFAULT_POLICY, **kwargs}
    return float(min(policy["base_delay"] * 2 ** (attempt - 1), policy["max_delay"]))


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
            return f"HttpStatus({spec[1]}{extra})"
        return f"{spec[0]}({spec[1]!r})"

    return ", then ".join(one(spec) for spec in outcomes)


def retry_call(kwargs: dict[str, Any], outcomes: Sequence[P.Outcome], repeats: bool) -> str:
    tail = " (the last one repeating)" if repeats else ""
    return (
        f"await with_retry({describe_policy(kwargs)}, op), op: {describe_outcomes(outcomes)}{tail}"
    )


def sleeps_of(run: JSON) -> list[float]:
    times = run.get("times", [])
    return [round(b - a, 6) for a, b in itertools.pairwise(times)]


def tail_of(run: JSON) -> float:
    times = run.get("times", [])
    return round(run.get("elapsed", 0.0) - (times[-1] if times else 0.0), 6)


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


# ─────────────────────────────────────────────────────────────── visible tests, graded


def _bytes_text(data: bytes) -> str:
    return "bytes(range(256))" if data == bytes(range(256)) else repr(data)


@JUDGES.add("fnv1a_vectors")
def judge_fnv(obs: Observed) -> None:
    digests = obs("fnv1a_vectors")["digests"]
    public = {b"", b"a", b"foobar"}
    for data, got in zip(P.FNV_INPUTS, digests, strict=True):
        call = f"fnv1a_64({_bytes_text(data)})"
        value = ok(got, call, "16 lowercase hex digits")
        note = ""
        if type(value) is not str:
            note = 'Return text: f"{h:016x}".'
        elif len(value) > 16:
            note = "Keep 64 bits: `& MASK_64` after every multiplication."
        elif len(value) < 16:
            note = 'Pad to 16 digits: f"{h:016x}".'
        say = None if data in public else "its FNV-1a 64-bit digest, 16 lowercase hex digits"
        equal(call, value, fnv1a_64(data), say=say, note=note)


@JUDGES.add("same_content_hashes_stable_distinct_content_differs")
def judge_same_content(obs: Observed) -> None:
    ids = obs("same_content_hashes_stable_distinct_content_differs")["ids"]
    first = ok(ids[0], 'content_id("row", "x")', "an id")
    check(
        is_hex_digest(first, 64),
        'content_id("row", "x")',
        show_json(first),
        "64 lowercase hex digits (hashlib.sha256(...).hexdigest())",
    )
    again = ok(ids[1], 'content_id("row", "x"), a second time')
    equal('content_id("row", "x"), a second time', again, first, note="Same content, same id.")
    other = ok(ids[2], 'content_id("row", "y")')
    check(other != first, 'content_id("row", "y")', show_json(other), "an id other than for 'x'")
    as_a, as_b = ok(ids[3], 'content_id("a", "x")'), ok(ids[4], 'content_id("b", "x")')
    check(
        as_a != as_b,
        'content_id("a", "x") and content_id("b", "x")',
        "the same id twice",
        "two different ids: the kind tag goes into the hash",
    )
    joined, split = ok(ids[5], 'content_id("ab", "c")'), ok(ids[6], 'content_id("a", "bc")')
    check(
        joined != split,
        'content_id("ab", "c") and content_id("a", "bc")',
        "the same id twice",
        "two different ids: one 0x00 byte between kind and canonical",
    )
    equal(
        'content_id("row", "x")',
        first,
        content_id("row", "x"),
        note='sha256 of the UTF-8 kind, one 0x00 byte, then canonical: sha256(b"row\\x00x").',
    )


@JUDGES.add("content_key_is_stable_and_distinguishes_rows")
def judge_content_key_stable(obs: Observed) -> None:
    seen = obs("content_key_is_stable_and_distinguishes_rows")
    key = ok(seen["launch"], "content_key(launch)", "a key")
    check(is_hex_digest(key, 64), "content_key(launch)", show_json(key), "64 lowercase hex digits")
    equal(
        "content_key(twin), twin == launch but another object",
        ok(seen["twin"], "content_key(twin)"),
        key,
        note="Equal rows get equal keys.",
    )
    renamed = ok(seen["renamed"], "content_key(launch with a changed name)")
    check(
        renamed != key,
        "content_key(launch with a changed name)",
        show_json(renamed),
        "a key other than content_key(launch)",
    )
    by_id = ok(seen["toy_by_id"], 'content_id("row", \'{"alt_km":420.0,"name":"ISS"}\')')
    equal(
        'content_key(Row("ISS", 420.0))',
        ok(seen["toy"], 'content_key(Row("ISS", 420.0))'),
        by_id,
        say='content_id("row", \'{"alt_km":420.0,"name":"ISS"}\')',
        note="The canonical form: sorted keys, no spaces, non-ASCII kept, NaN refused.",
    )
    for name, got in zip(("Alpha", "Beta"), seen["nan"], strict=True):
        raises(
            got,
            f'content_key(Row("{name}", math.nan))',
            "ParseError",
            note="No canonical form, no key: a default key would merge Alpha and Beta.",
        )


def sink_steps(seen: JSON, call: str) -> JSON:
    if "stopped" in seen:
        stopped = seen["stopped"]
        not_done(stopped, call)
        raise Fail(message(call, show_outcome(stopped), "it runs to the end"))
    return seen["steps"]


def launch_ids(start: int, count: int) -> list[str]:
    return [launch.id for launch in P.distinct_launches(start, count)]


@JUDGES.add("rerun_writes_zero_new_rows")
def judge_rerun(obs: Observed) -> None:
    call = "sink = IdempotentSink(inner); await sink.load(two_rows)"
    steps = sink_steps(obs("rerun_writes_zero_new_rows"), call)
    equal(call, ok(steps["first"], call), 2)
    again = "await sink.load(the same two rows, as new but equal objects)"
    equal(again, ok(steps["second"], again), 0, note="Every key is already remembered.")
    equal("the rows inner received", steps["written"], launch_ids(0, 2))


@JUDGES.add("distinct_rows_all_written")
def judge_distinct(obs: Observed) -> None:
    call = "sink = IdempotentSink(inner); await sink.load(three_distinct_rows)"
    steps = sink_steps(obs("distinct_rows_all_written"), call)
    equal(call, ok(steps["load"], call), 3)
    equal("the rows inner received, in order", steps["written"], launch_ids(10, 3))


@JUDGES.add("gives_up_on_permanent_immediately")
def judge_gives_up(obs: Observed) -> None:
    call = retry_call({}, (P.PARSE,), True)
    run = obs("gives_up_on_permanent_immediately")
    raises(run, call, "ParseError", note="A permanent error is raised as it is, at once.")
    equal(f"{call}: calls of op", run["calls"], 1)
    equal(f"{call}: seconds waited", run["elapsed"], 0.0, tolerance=TIME_TOLERANCE)


@JUDGES.add("retries_transient_then_succeeds")
def judge_retries(obs: Observed) -> None:
    outcomes = (P.NET, P.NET, P.ok(42))
    call = retry_call({}, outcomes, False)
    run = obs("retries_transient_then_succeeds")
    equal(call, ok(run, call, "42"), 42)
    equal(f"{call}: calls of op", run["calls"], 3)
    equal(
        f"{call}: seconds waited (virtual)",
        run["elapsed"],
        0.6,
        tolerance=TIME_TOLERANCE,
        note=blocking_note(run) or "0.2 after the first failure, 0.4 after the second.",
    )


@JUDGES.add("honors_retry_after")
def judge_honors(obs: Observed) -> None:
    call = retry_call({}, (P.limited(5.0), P.ok("ok")), False)
    run = obs("honors_retry_after")
    equal(call, ok(run, call, "'ok'"), "ok")
    equal(f"{call}: calls of op", run["calls"], 2)
    equal(
        f"{call}: seconds waited (virtual)",
        run["elapsed"],
        5.0,
        tolerance=TIME_TOLERANCE,
        note=blocking_note(run) or "Retry-After replaces the backoff; it is not added to it.",
    )


@JUDGES.add("full_jitter_stays_within_bounds")
def judge_jitter_bounds(obs: Observed) -> None:
    seen = obs("full_jitter_stays_within_bounds")
    for n, got in enumerate(seen["draws"], start=1):
        ceiling = backoff({}, n)
        call = f'backoff_delay(RetryPolicy(jitter="full"), {n}, rng=random.Random(...))'
        draws = ok(got, call, "waits")
        outside = [d for d in draws if not (type(d) is float and 0.0 <= d <= ceiling)]
        check(not outside, call, show_json(outside[:1]), f"floats from 0 to {ceiling:g}")
        low, high = min(draws), max(draws)
        check(
            low < 0.25 * ceiling and high > 0.75 * ceiling,
            f"{call}, {len(draws)} draws: smallest and largest",
            show_json([round(low, 4), round(high, 4)]),
            f"waits spread over 0 to {ceiling:g}",
        )
        at_cap = sum(d == ceiling for d in draws)
        check(at_cap <= len(draws) // 20, call, f"{at_cap} waits at exactly {ceiling:g}", "few")
    five = [ok(g, "five draws with random.Random(7)") for g in seen["five"]]
    equal(
        "five draws with random.Random(7), then again with a new random.Random(7)",
        five[1],
        five[0],
        note="Draw from the rng you are given.",
    )
    plain_call = "backoff_delay(RetryPolicy(), 3, rng=random.Random(7))"
    equal(plain_call, ok(seen["plain"], plain_call), [0.8])


# ─────────────────────────────────────────────────────────────── hidden: ids and keys


def _id_call(kind: str, text: str) -> str:
    return f"content_id({kind!r}, {text!r})"


@JUDGES.add("content_id_is_sha256_of_kind_nul_canonical")
def judge_content_id_exact(obs: Observed) -> None:
    ids = obs("content_id_is_sha256_of_kind_nul_canonical")["ids"]
    for (kind, text), got in zip(P.CONTENT_ID_INPUTS, ids, strict=True):
        call = _id_call(kind, text)
        value = ok(got, call, "an id")
        if value == content_id(kind, text):
            continue
        note = ""
        if value == hashlib.sha256((kind + text).encode()).hexdigest():
            note = "That is sha256(kind + canonical): the 0x00 separator is missing."
        elif value == hashlib.sha256(text.encode()).hexdigest():
            note = "That is sha256(canonical) alone: hash the kind first."
        elif type(value) is str and value.lower() == content_id(kind, text):
            note = "Use lowercase hex: .hexdigest()."
        raise Fail(
            message(
                call,
                show_json(value),
                "sha256 of the UTF-8 bytes of kind, one 0x00 byte, then canonical, as 64"
                " lowercase hex digits",
                note,
            )
        )


@JUDGES.add("content_key_hashes_the_canonical_json")
def judge_content_key_exact(obs: Observed) -> None:
    keys = obs("content_key_hashes_the_canonical_json")["keys"]
    for row, label, got in zip(P.key_rows(), P.KEY_ROW_LABELS, keys, strict=True):
        call = f"content_key({label})"
        value = ok(got, call, "a key")
        if value == content_id("row", canonical(row)):
            continue
        slips = {
            "without sort_keys=True": {"sort_keys": False},
            'with json.dumps\'s default separators (", ", ": ")': {"separators": None},
            "with ensure_ascii left at True (non-ASCII escaped)": {"ensure_ascii": True},
        }
        note = next(
            (
                f"That is the key of the JSON written {slip}."
                for slip, change in slips.items()
                if value == content_id("row", canonical(row, **change))
            ),
            "",
        )
        raise Fail(
            message(
                call,
                show_json(value),
                'content_id("row", json.dumps(dataclasses.asdict(row), sort_keys=True,'
                ' separators=(",", ":"), ensure_ascii=False, allow_nan=False))',
                note,
            )
        )


@JUDGES.add("keys_equal_across_interpreters")
def judge_across(obs: Observed) -> None:
    here = obs("keys_equal_across_interpreters")
    there = obs("keys_equal_across_interpreters", interpreter=2)
    if here["hash"] == there["hash"]:
        raise GraderFault(
            "grader error: both interpreters had the same hash seed; ask the instructor"
        )
    for label, a, b in zip(P.KEY_ROW_LABELS, here["keys"], there["keys"], strict=True):
        call = f"content_key({label})"
        first = ok(a, call, "a key")
        check(is_hex_digest(first, 64), call, show_json(first), "64 lowercase hex digits")
        equal(
            f"{call} in a second Python process (another PYTHONHASHSEED)",
            ok(b, call),
            first,
            say="the same key as in the first process",
            note="Keys must not depend on hash(), on id(), or on the order of a set.",
        )
    for (kind, text), a, b in zip(P.CONTENT_ID_INPUTS, here["ids"], there["ids"], strict=True):
        call = _id_call(kind, text)
        equal(
            f"{call} in a second Python process",
            ok(b, call),
            ok(a, call),
            say="the same id as in the first process",
        )
    keys = [ok(a, "content_key(...)") for a in here["keys"]]
    check(len(set(keys)) == len(keys), "content_key of 7 different rows", "repeated keys", "7 keys")


@JUDGES.add("row_without_canonical_form_raises_parse_error")
def judge_unencodable(obs: Observed) -> None:
    seen = obs("row_without_canonical_form_raises_parse_error")
    good = ok(seen["good"], 'content_key(Row("finite", 1.5))', "a key")
    check(is_hex_digest(good, 64), 'content_key(Row("finite", 1.5))', show_json(good), "a key")
    for label, got in zip(P.UNENCODABLE_LABELS, seen["bad"], strict=True):
        raises(
            got,
            f"content_key({label})",
            "ParseError",
            note="json.dumps writes NaN and Infinity unless allow_nan=False; the ValueError it"
            " then raises must become etl.ParseError, never a default key.",
        )


# ─────────────────────────────────────────────────────────────── hidden: the sink


@JUDGES.add("duplicates_within_a_batch_written_once")
def judge_within_batch(obs: Observed) -> None:
    a, b, c, d = launch_ids(20, 4)
    call = "await sink.load([a, b, a_copy, c, b])"
    steps = sink_steps(obs("duplicates_within_a_batch_written_once"), call)
    equal(call, ok(steps["first"], call), 3, note="A repeat inside one batch is a repeat too.")
    then = "then await sink.load([c, d, d])"
    equal(then, ok(steps["second"], then), 1)
    equal(
        "the batches inner received",
        steps["loads"],
        [[a, b, c], [d]],
        note="Each row once, in the order first seen.",
    )


@JUDGES.add("parse_failure_mid_batch_remembers_nothing")
def judge_parse_failure(obs: Observed) -> None:
    call = "await sink.load([a, row_with_nan, b])"
    steps = sink_steps(obs("parse_failure_mid_batch_remembers_nothing"), call)
    raises(steps["failed"], call, "ParseError")
    retry = "then await sink.load([a, b])"
    equal(
        retry,
        ok(steps["retry"], retry),
        2,
        note="The failed batch must leave no key remembered: a and b were never written.",
    )
    equal(
        "the rows inner received",
        steps["written"],
        launch_ids(30, 2),
        note="Compute every key before writing anything: a bad row fails the whole batch.",
    )


@JUDGES.add("inner_failure_remembers_nothing_and_retry_writes")
def judge_inner_failure(obs: Observed) -> None:
    call = "await sink.load(rows), inner.load raising NetworkError"
    steps = sink_steps(obs("inner_failure_remembers_nothing_and_retry_writes"), call)
    raises(steps["failed"], call, "NetworkError", note="The inner sink's error passes through.")
    retry = "then await sink.load(rows) again, inner.load working"
    equal(
        retry,
        ok(steps["retry"], retry),
        2,
        note="Remember keys only after inner.load succeeds: the rows were never written.",
    )
    again = "then await sink.load(rows) a third time"
    equal(again, ok(steps["again"], again), 0)
    equal("the rows inner received", steps["written"], launch_ids(40, 2))


@JUDGES.add("concurrent_loads_write_once")
def judge_concurrent(obs: Observed) -> None:
    call = "await asyncio.gather(sink.load(rows), sink.load(rows)), inner.load taking 1 s"
    steps = sink_steps(obs("concurrent_loads_write_once"), call)
    results = [ok(r, call) for r in steps["results"]]
    equal(
        "the rows inner received",
        steps["written"],
        launch_ids(50, 2),
        note="Hold an asyncio.Lock across the inner write, so the second load sees the keys.",
    )
    check(
        sorted(results) == [0, 2] and all(type(r) is int for r in results),
        call,
        show_json(results),
        "one load returning 2 and the other 0",
    )


@JUDGES.add("first_concurrent_load_fails_second_writes")
def judge_concurrent_fail(obs: Observed) -> None:
    call = (
        "await asyncio.gather(sink.load(rows), sink.load(rows)), the first inner.load failing"
        " after 1 s"
    )
    steps = sink_steps(obs("first_concurrent_load_fails_second_writes"), call)
    first, second = steps["results"]
    raises(first, f"{call}: the first load", "NetworkError")
    equal(
        f"{call}: the second load",
        ok(second, f"{call}: the second load"),
        2,
        note="The first write failed, so its keys were never remembered: the second writes.",
    )
    equal("the rows inner received", steps["written"], launch_ids(60, 2))


@JUDGES.add("with_seen_skips_preloaded_keys")
def judge_with_seen(obs: Observed) -> None:
    call = "sink = IdempotentSink.with_seen(inner, keys_of([a])); await sink.load([a, b])"
    steps = sink_steps(obs("with_seen_skips_preloaded_keys"), call)
    equal(call, ok(steps["mixed"], call), 1, note="a's key was given: only b is new.")
    equal("the rows inner received", steps["written"], launch_ids(71, 1))
    full = "IdempotentSink.with_seen(inner2, [key_a, key_b]).load([a, b])"
    equal(full, ok(steps["none_new"], full), 0)
    equal(f"{full}: calls of inner2.load", steps["full_loads"], [], note="Nothing new: no write.")


@JUDGES.add("each_sink_remembers_its_own_keys")
def judge_own_memory(obs: Observed) -> None:
    call = "IdempotentSink(inner1).load(rows), then IdempotentSink(inner2).load(rows)"
    steps = sink_steps(obs("each_sink_remembers_its_own_keys"), call)
    equal(f"{call}: the first", ok(steps["first"], call), 2)
    equal(
        f"{call}: the second",
        ok(steps["second"], call),
        2,
        note="A new sink starts with no keys: create the set in __init__, not on the class.",
    )
    equal("the rows inner2 received", steps["second_written"], launch_ids(80, 2))


# ─────────────────────────────────────────────────────────────── hidden: the retry loop


@JUDGES.add("non_etl_error_propagates_at_once")
def judge_non_etl(obs: Observed) -> None:
    seen = obs("non_etl_error_propagates_at_once")
    for key, kind in (("key_error", "KeyError"), ("type_error", "TypeError")):
        run = seen[key]
        spec = (kind, "missing field" if kind == "KeyError" else "bad operand")
        call = retry_call({}, (spec, P.ok(1)), False)
        raises(run, call, kind, note="Anything that is not an EtlError is a bug: let it through.")
        equal(f"{call}: calls of op", run["calls"], 1)
        equal(f"{call}: seconds waited", run["elapsed"], 0.0, tolerance=TIME_TOLERANCE)
        check(run["last_itself"], call, "another exception object", "the op's exception itself")


@JUDGES.add("cancellation_is_never_retried")
def judge_cancellation(obs: Observed) -> None:
    seen = obs("cancellation_is_never_retried")
    direct = seen["op_raises"]
    call = "await with_retry(RetryPolicy(), op), op raising asyncio.CancelledError"
    started(direct, call)
    inner = direct["ok"]
    raises(inner["outcome"], call, "CancelledError", note="Cancellation is not an error to retry.")
    equal(f"{call}: calls of op", inner["calls"], 1)
    equal(f"{call}: seconds waited", inner["at"], 0.0, tolerance=TIME_TOLERANCE)
    waiting = seen["task_cancelled"]
    call = "task = with_retry(RetryPolicy(), op failing with NetworkError); task.cancel() at 0.1 s"
    started(waiting, call)
    got = waiting["ok"]
    check(
        not got["done_before_cancel"],
        call,
        f"the task had already ended: {show_outcome(got['outcome'])}",
        "the task still waiting out its first backoff at 0.1 s",
    )
    check(
        got["cancelled"],
        call,
        show_outcome(got["outcome"]),
        "the task ends cancelled",
        note="Let the CancelledError out of asyncio.sleep: never catch it.",
    )
    equal(f"{call}: calls of op, 30 s later", got["calls_after"], 1)


@JUDGES.add("exhaustion_reraises_the_last_error")
def judge_exhaustion(obs: Observed) -> None:
    outcomes = (P.NET, P.TIMEOUT, P.http(503))
    call = retry_call({"max_attempts": 3}, outcomes, False)
    run = obs("exhaustion_reraises_the_last_error")
    raises(run, call, "HttpStatus", note="Raise the last error itself, not a wrapper.")
    equal(f"{call}: calls of op", run["calls"], 3)
    check(
        run["last_itself"],
        call,
        f"a different {run.get('raised')} object",
        "the very exception the third call raised (a bare `raise`)",
    )


@JUDGES.add("n_attempts_sleep_n_minus_1_times")
def judge_schedules(obs: Observed) -> None:
    runs = obs("n_attempts_sleep_n_minus_1_times")["runs"]
    for (kwargs, outcomes), run in zip(P.SCHEDULES, runs, strict=True):
        call = retry_call(kwargs, outcomes, True)
        policy = {**DEFAULT_POLICY, **kwargs}
        attempts = policy["max_attempts"]
        kind = outcomes[0][0]
        if run.get("raised") != kind:
            not_done(run, call)
            raise Fail(message(call, show_outcome(run), f"raises {kind} after {attempts} calls"))
        equal(f"{call}: calls of op", run["calls"], attempts)
        retry_after = outcomes[0][1] if kind == "RateLimited" else None
        expected = [
            retry_after if retry_after is not None else backoff(kwargs, n)
            for n in range(1, attempts)
        ]
        equal(
            f"{call}: the waits between calls",
            sleeps_of(run),
            expected,
            tolerance=TIME_TOLERANCE,
            note=blocking_note(run),
        )
        equal(
            f"{call}: seconds waited after the last call",
            tail_of(run),
            0.0,
            tolerance=TIME_TOLERANCE,
            note="N attempts have N - 1 waits: nothing follows the last call, so no wait.",
        )


@JUDGES.add("backoff_delay_doubles_then_caps")
def judge_backoff(obs: Observed) -> None:
    schedules = obs("backoff_delay_doubles_then_caps")["schedules"]
    for (kwargs, attempts), got in zip(P.BACKOFF_CASES, schedules, strict=True):
        call = f"[backoff_delay({describe_policy(kwargs)}, n) for n in {list(attempts)}]"
        expected = [backoff(kwargs, n) for n in attempts]
        equal(
            call,
            ok(got, call, "waits"),
            expected,
            tolerance=1e-12,
            note="min(base_delay * 2 ** (attempt - 1), max_delay), as a float.",
        )


@JUDGES.add("backoff_delay_edge_cases")
def judge_backoff_edges(obs: Observed) -> None:
    seen = obs("backoff_delay_edge_cases")
    first = ok(seen["first"], "backoff_delay(RetryPolicy(), 1)")
    equal("backoff_delay(RetryPolicy(), 1)", first, 0.2)
    raises(seen["zero"], "backoff_delay(RetryPolicy(), 0)", "ValueError", "Attempts count from 1.")
    raises(seen["negative"], "backoff_delay(RetryPolicy(), -3)", "ValueError")
    huge = "backoff_delay(RetryPolicy(), 1100)"
    equal(
        huge,
        ok(seen["huge"], huge, "10.0"),
        10.0,
        note="2 ** 1099 does not fit in a float (OverflowError): the cap was hit long before.",
    )


@JUDGES.add("retry_after_replaces_the_wait_uncapped")
def judge_retry_after(obs: Observed) -> None:
    runs = obs("retry_after_replaces_the_wait_uncapped")["runs"]
    for (kwargs, outcomes), run in zip(P.RETRY_AFTER_CASES, runs, strict=True):
        call = retry_call(kwargs, outcomes, False)
        equal(call, ok(run, call, "'ok'"), "ok")
        expected = []
        for n, spec in enumerate(outcomes[:-1], start=1):
            given = spec[1] if spec[0] == "RateLimited" else spec[2]
            expected.append(given if given is not None else backoff(kwargs, n))
        equal(
            f"{call}: the waits between calls",
            sleeps_of(run),
            expected,
            tolerance=TIME_TOLERANCE,
            note=blocking_note(run)
            or "Retry-After, when given (0.0 included), is the wait, as given: not capped, not"
            " added to the backoff; when it is None, the backoff.",
        )


@JUDGES.add("bad_policies_rejected")
def judge_bad_policies(obs: Observed) -> None:
    seen = obs("bad_policies_rejected")
    for kwargs, got in zip(P.GOOD_POLICIES, seen["good"], strict=True):
        ok(got, describe_policy(kwargs), "a policy")
    defaults = ok(seen["defaults"], "RetryPolicy()")
    equal(
        "[p.max_attempts, p.base_delay, p.max_delay, p.jitter] for p = RetryPolicy()",
        defaults,
        [4, 0.2, 10.0, "none"],
    )
    for kwargs, got in zip(P.BAD_POLICIES, seen["bad"], strict=True):
        call = describe_policy(kwargs)
        if "ok" in got:
            raise Fail(
                message(call, "accepted it", "raises ValueError", "Refuse it when it is made.")
            )
        raises(got, call, "ValueError", "Refuse a bad policy when it is made.")
    frozen = seen["frozen"]
    if frozen.get("raised") not in ("FrozenInstanceError", "AttributeError"):
        not_done(frozen, "RetryPolicy()")
        raise Fail(
            message(
                "policy = RetryPolicy(); policy.max_attempts = 99",
                show_outcome(frozen),
                "raises dataclasses.FrozenInstanceError: @dataclass(frozen=True)",
            )
        )


@JUDGES.add("sleeps_on_the_event_loop_not_the_thread")
def judge_event_loop_sleep(obs: Observed) -> None:
    kwargs = {"max_attempts": 3, "base_delay": 0.01, "max_delay": 1.0}
    outcomes = (P.NET, P.NET, P.ok(7))
    call = retry_call(kwargs, outcomes, False)
    run = obs("sleeps_on_the_event_loop_not_the_thread")
    equal(call, ok(run, call, "7"), 7)
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
        0.03,
        tolerance=TIME_TOLERANCE,
        note=f"It took {waited}: whatever it waited with, the event loop was not running.",
    )


@cache
def tenacity_run(index: int) -> JSON:
    """What tenacity 9's AsyncRetrying does with script `index`, configured to the policy."""
    kwargs, outcomes = P.TENACITY_SCRIPTS[index]
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


@JUDGES.add("matches_tenacity_on_scripted_failures")
def judge_tenacity(obs: Observed) -> None:
    runs = obs("matches_tenacity_on_scripted_failures")["runs"]
    for index, ((kwargs, outcomes), run) in enumerate(zip(P.TENACITY_SCRIPTS, runs, strict=True)):
        theirs = tenacity_run(index)
        call = retry_call(kwargs, outcomes, False)
        if "ok" in theirs:
            equal(call, ok(run, call, show_json(theirs["ok"])), theirs["ok"], note="As tenacity.")
        else:
            raises(run, call, theirs["raised"], note="tenacity (reraise=True) raises that.")
            equal(f"{call}: the error's message", run.get("message"), theirs["message"])
        equal(f"{call}: calls of op (tenacity: {theirs['calls']})", run["calls"], theirs["calls"])
        equal(
            f"{call}: the waits between calls",
            sleeps_of(run),
            theirs["sleeps"],
            tolerance=TIME_TOLERANCE,
            say=f"tenacity's waits: {theirs['sleeps']}",
            note=blocking_note(run),
        )
        equal(f"{call}: seconds waited after the last call", tail_of(run), 0.0, tolerance=1e-6)


@JUDGES.add("full_jitter_spreads_over_the_whole_range")
def judge_jitter_spread(obs: Observed) -> None:
    seen = obs("full_jitter_spreads_over_the_whole_range")
    for n, got in zip(P.JITTER_ATTEMPTS, seen["draws"], strict=True):
        ceiling = backoff(P.JITTER_POLICY, n)
        call = (
            f'backoff_delay(RetryPolicy(base_delay=1.0, max_delay=8.0, jitter="full"), {n},'
            f" rng=random.Random(...)), {P.JITTER_DRAWS} draws"
        )
        draws = ok(got, call, "waits")
        outside = [d for d in draws if not (type(d) is float and 0.0 <= d <= ceiling)]
        check(not outside, call, show_json(outside[:1]), f"floats from 0 to {ceiling:g}")
        # Uniform on [0, c]: each quarter holds 100 of 400 draws, give or take ~26 (3 sigma).
        quarters = [0, 0, 0, 0]
        for d in draws:
            quarters[min(int(4 * d / ceiling), 3)] += 1
        check(
            all(70 <= q <= 130 for q in quarters),
            f"{call}: draws per quarter of 0 to {ceiling:g}",
            show_json(quarters),
            "about 100 in each quarter (uniform from 0 to the capped delay)",
            note="Draw rng.uniform(0, ceiling) with ceiling = min(base * 2 ** (n - 1), max_delay):"
            " cap first, then jitter.",
        )
        mean = sum(draws) / len(draws)
        check(
            abs(mean - ceiling / 2) <= 0.1 * ceiling,
            f"{call}: mean wait",
            f"{mean:.4f}",
            f"about {ceiling / 2:g}",
        )
    run = seen["with_retry"]
    policy = {**P.JITTER_POLICY, "max_attempts": 7}
    call = retry_call(policy, (P.NET,), True)
    if run.get("raised") != "NetworkError":
        not_done(run, call)
        raise Fail(message(call, show_outcome(run), "raises NetworkError after 7 calls"))
    waits = sleeps_of(run)
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
