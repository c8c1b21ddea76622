"""Visible checks of build 03: seed 001's test names, the FNV-1a warm-up, the jitter stretch,
and a check for every known bug of the hidden suite and every Predict answer of the notebook.

Each check takes the learner's namespace (the kernel's globals, or the module exported from the
notebook) and, when something is off, says the call, what came back and what was expected. A
check keeps no state and builds its own inputs (the hidden tests keep others; the scenarios go
through `scripted_harness`): running one twice gives the same verdict. Async ones run on virtual
time, so a 5 s Retry-After costs microseconds. Expected values are published vectors, literals
written out by hand, or plain properties, never a reference implementation: this ships to learners.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from builds.build03.visible import retry_checks
from builds.build03.visible.scripted_harness import (
    Destination,
    Load,
    expect_loads,
)
from etl import Launch, NetworkError, ParseError, launches
from workbook.checks import Checks, Said, expect, expect_equal, expect_raises, outcome_of

CHECKS = Checks("03")

HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Row:
    """The toy row of notebook 02 (the checks' own copy, so a learner's edits can't move it)."""

    name: str
    alt_km: float


# ───────────────────────────────────────────────────────── step 0: fnv1a_64

FNV_VECTORS = (
    ("", "cbf29ce484222325"),
    ("a", "af63dc4c8601ec8c"),
    ("foobar", "85944171f73967e8"),
    # Digests that start with a 0: hex(h)[2:] drops it and comes out 15 digits long.
    ("page", "038b2a0deba58916"),
    ("offset", "0268b0f8129435ca"),
)
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
#: sha256("row\x00Союз ✓".encode("utf-8")): non-ASCII text hashed as its UTF-8 bytes.
SHA256_ROW_NUL_SOYUZ = "a86a6f1bbf7c98270b86f5b7eb47bf9816ee17776ecc2a58cc3216503b180574"


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
    east, west = ns.content_id("row", "酒泉"), ns.content_id("row", "北京")
    expect(
        east != west,
        'content_id("row", "酒泉") and content_id("row", "北京")',
        Said(f"the same id twice: {east!r}"),
        "two different ids",
        note='Hash the text as UTF-8 (.encode("utf-8")): an ASCII encoding that drops or'
        " replaces the other characters makes different text collide.",
    )
    expect_equal(
        'content_id("row", "Союз ✓")',
        ns.content_id("row", "Союз ✓"),
        SHA256_ROW_NUL_SOYUZ,
        note='Expected hashlib.sha256("row\\x00Союз ✓".encode("utf-8")).hexdigest().',
    )


# ───────────────────────────────────────────────────────── step 2: content_key

CANONICAL_NOTE = (
    "The canonical form is json.dumps(dataclasses.asdict(row), sort_keys=True,"
    ' separators=(",", ":"), ensure_ascii=False, allow_nan=False).'
)


#: A launch of the checks' own, and its canonical JSON written out: its key is tagged "row" too.
VOSTOK = Launch(
    id="ll2-0001",
    name="Vostok 1",
    net="1961-04-12T06:07:00Z",
    status="Success",
    provider="OKB-1",
    rocket="Vostok-K",
    pad="Gagarin's Start",
    location="Baikonur",
    latitude=45.92,
    longitude=63.342,
)
VOSTOK_CANONICAL = (
    '{"id":"ll2-0001","latitude":45.92,"location":"Baikonur","longitude":63.342,'
    '"mission":null,"name":"Vostok 1","net":"1961-04-12T06:07:00Z","orbit":null,'
    '"pad":"Gagarin\'s Start","provider":"OKB-1","rocket":"Vostok-K","status":"Success"}'
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
    for row, canonical in (
        (Row("ISS", 420.0), '{"alt_km":420.0,"name":"ISS"}'),
        (Row("Jiuquan 酒泉", 40.96), '{"alt_km":40.96,"name":"Jiuquan 酒泉"}'),
        (VOSTOK, VOSTOK_CANONICAL),
    ):
        label = "Launch(id='ll2-0001', name='Vostok 1', ...)" if row is VOSTOK else repr(row)
        expect_equal(
            f"content_key({label})",
            ns.content_key(row),
            ns.content_id("row", canonical),
            note=f"That is content_id('row', {canonical!r}): the kind is \"row\" for every"
            f" row, a Launch included. {CANONICAL_NOTE}",
        )
    for name in ("Alpha", "Beta"):
        expect_raises(
            ParseError,
            f'content_key(Row("{name}", math.nan))',
            functools.partial(ns.content_key, Row(name, math.nan)),
            note="A row with no canonical form has no key. A default key would give Alpha and "
            "Beta the same key, and the sink would drop one of them: raise etl.ParseError.",
        )
    when: Any = datetime(2026, 12, 2, tzinfo=UTC)  # not a float: a value JSON cannot hold
    expect_raises(
        ParseError,
        f'content_key(Row("Launch day", {when!r}))',
        functools.partial(ns.content_key, Row("Launch day", when)),
        note="JSON has no datetime: json.dumps raises TypeError for it (ValueError is NaN's)."
        " Both mean the row has no canonical form: turn either into etl.ParseError.",
    )


# ───────────────────────────────────────────────────────── step 3: the sink


async def run_loads(
    ns: Any, first: int, loads: Sequence[Load], end: str, note: str, *, failures: int = 0
) -> Destination:
    """`expect_loads` on a new ``IdempotentSink(inner)``, a, b, c, d being fixture launches
    `first` to `first` + 3, inner's first `failures` writes raising NetworkError; the inner."""
    inner = Destination(failures=failures)
    made = "sink = IdempotentSink(inner)"
    made += ", inner's first write raising NetworkError" if failures else ""
    rows = launches()[first : first + 4]
    await expect_loads(ns.IdempotentSink(inner), inner, made, rows, loads, end, note)
    return inner


class Reporting(Destination):
    """An inner sink whose load returns `count` whatever it was given (a store that reports
    how many rows were new to it)."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count

    async def load(self, rows: Sequence[Any]) -> int:
        await super().load(rows)
        return self.count


@CHECKS.add(step="sink")
async def rerun_writes_zero_new_rows(ns: Any) -> None:
    note = "Every key is remembered from the first load: nothing is new, nothing is written."
    inner = await run_loads(ns, 0, [("a b", 2), ("a b", 0)], "a b", note)
    expect_equal(
        "sink.load([a, b]) twice: the sizes of inner's loads (inner.calls)",
        inner.calls,
        [2],
        note="One inner.load call for a load with anything new, with all its fresh rows; none"
        " at all when no row is new (return 0 then).",
    )


@CHECKS.add(step="sink")
async def distinct_rows_all_written(ns: Any) -> None:
    note = "Three different rows, three keys, three writes; return what inner.load returned."
    inner = await run_loads(ns, 10, [("a b c", 3)], "a b c", note)
    expect_equal(
        "sink.load([a, b, c]): the sizes of inner's loads (inner.calls)",
        inner.calls,
        [3],
        note="Hand inner the fresh rows in one call: await inner.load(fresh_rows).",
    )
    reporting = Reporting(1)
    rows = launches()[14:17]
    call = (
        "sink = IdempotentSink(inner), inner.load returning 1 whatever it is given;"
        " await sink.load(three new rows)"
    )
    ok, got = await outcome_of(ns.IdempotentSink(reporting).load(rows))
    expect(
        ok and type(got) is int and got == 1,
        call,
        Said.of(ok, got),
        "returned 1, what inner.load returned",
        note="Return what inner.load returned (how many rows reached the store), not how many"
        " rows you handed it.",
    )


@CHECKS.add(step="sink")
async def repeats_in_one_batch_written_once(ns: Any) -> None:
    note = "A key met twice in one batch is written once, at its first position."
    await run_loads(ns, 120, [("a b a* b c", 3), ("c d d", 1)], "a b c d", note)


@CHECKS.add(step="sink")
async def failed_write_is_retried_in_full(ns: Any) -> None:
    note = (
        "The Predict of step 3: remember the keys only once inner.load has returned. Keys"
        " remembered before the write make the retry skip rows that were never stored."
    )
    loads: list[Load] = [("a b c", NetworkError), ("a b c", 3)]
    await run_loads(ns, 130, loads, "a b c", note, failures=1)


@CHECKS.add(step="sink")
async def bad_row_leaves_no_key_behind(ns: Any) -> None:
    note = (
        "Compute every key of the batch before remembering any: a row with no key"
        " (ParseError) leaves no key of its batch behind."
    )
    await run_loads(ns, 140, [("a c! b", ParseError), ("a b", 2)], "a b", note)


@CHECKS.add(step="sink")
async def concurrent_loads_write_each_row_once(ns: Any) -> None:
    rows = launches()[150:153]
    for failures, want, expected in (
        (0, [3, 0], "[3, 0]: the second load waits for the first, then finds every key"),
        (1, ["NetworkError", 3], "the first raises NetworkError; the second writes all 3"),
    ):
        inner = Destination(failures=failures, delay=2.0)
        sink = ns.IdempotentSink(inner)
        both = await asyncio.gather(outcome_of(sink.load(rows)), outcome_of(sink.load(rows)))
        got = [v if ok else type(v).__name__ for ok, v in both]
        call = "two loads of the same 3 rows at once (asyncio.gather), inner taking 2 s a write"
        call += ", its first write failing" if failures else ""
        note = (
            "The Predict of step 3: a second load of the same rows waits until the first has"
            " written and remembered its keys (inner.load included), then writes only what is new."
        )
        expect(got == want, call, got, expected, note)
        expect_equal(f"{call}: len(inner.rows)", len(inner.rows), 3, note=note)


@CHECKS.add(step="sink")
async def each_sink_starts_from_its_own_keys(ns: Any) -> None:
    rows = launches()[160:164]
    await ns.IdempotentSink(Destination()).load(rows[:2])
    inner = Destination()
    made = "one sink loaded [a, b]; sink = IdempotentSink(inner), another one"
    note = "A sink remembers only its own keys: a new one starts with none, whatever others loaded."
    await expect_loads(ns.IdempotentSink(inner), inner, made, rows, [("a b", 2)], "a b", note)
    inner = Destination()
    sink = ns.IdempotentSink.with_seen(inner, (ns.content_key(row) for row in rows[::2]))
    made = "sink = IdempotentSink.with_seen(inner, the keys of a and c, as a generator)"
    note = "with_seen returns a sink that treats the keys given (any iterable) as already written."
    await expect_loads(sink, inner, made, rows, [("a b c", 1)], "b", note)
    inner = Destination()
    nested = ns.IdempotentSink(ns.IdempotentSink(inner))
    call = "IdempotentSink(IdempotentSink(inner)).load([a, b]), given 60 s"
    ok, got = await outcome_of(asyncio.wait_for(nested.load(rows[:2]), 60.0))
    expect(
        ok and type(got) is int and got == 2 and len(inner.rows) == 2,
        call,
        Said.of(ok, got),
        "returned 2, inner holding a and b",
        note="Each sink makes its own asyncio.Lock in __init__: a lock shared by every sink"
        " (a class attribute) makes the outer sink's load wait for itself, and ties every sink"
        " to one event loop.",
    )


CHECKS.include(retry_checks.CHECKS)
