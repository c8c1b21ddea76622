"""Build 03's judges of IdempotentSink: re-runs and repeats written once, nothing
remembered from a failed load, concurrent loads, preloaded keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from builds.build03.hidden import probes as P
from builds.build03.hidden.expected import seeded
from grader.suites.judging import JSON, Fail, Observed, check, equal, listed, not_done, ok, raises
from workbook.checking.feedback import message, show_json, show_outcome

# ─────────────────────────────────────────────────────────────── visible tests, graded


def sink_steps(seen: JSON, call: str) -> JSON:
    if "stopped" in seen:
        stopped = seen["stopped"]
        not_done(stopped, call)
        raise Fail(message(call, show_outcome(stopped), "it runs to the end"))
    return seen["steps"]


def ids_of(rows: Sequence[Any]) -> list[str]:
    return [row.id for row in rows]


def test_rerun_writes_zero_new_rows(observed: Observed) -> None:
    seen, rng = seeded(observed, "rerun_writes_zero_new_rows")
    rows = P.draw_launches(rng, 2, "rerun_writes_zero_new_rows")
    call = "sink = IdempotentSink(inner); await sink.load(two_rows)"
    steps = sink_steps(seen, call)
    equal(call, ok(steps["first"], call), 2)
    again = "await sink.load(the same two rows, as new but equal objects)"
    equal(again, ok(steps["second"], again), 0, note="Every key is already remembered.")
    equal("the rows inner received", steps["written"], ids_of(rows))


def test_distinct_rows_all_written(observed: Observed) -> None:
    seen, rng = seeded(observed, "distinct_rows_all_written")
    rows = P.draw_launches(rng, rng.randint(3, 6), "distinct_rows_all_written")
    call = f"sink = IdempotentSink(inner); await sink.load({len(rows)} distinct rows)"
    steps = sink_steps(seen, call)
    equal(call, ok(steps["load"], call), len(rows))
    equal("the rows inner received, in order", steps["written"], ids_of(rows))
    names = [row.name for row in P.UNSORTED_ROWS]
    listing = ", ".join(f"Row({row.name!r}, {row.alt_km!r})" for row in P.UNSORTED_ROWS)
    fixed = f"IdempotentSink(inner).load([{listing}])"
    equal(fixed, ok(steps["fixed"], fixed), len(names))
    equal(
        f"{fixed}: the batches inner received",
        steps["fixed_loads"],
        [names],
        note="One inner.load call, with the fresh rows in their batch order (never sorted).",
    )
    reported = (
        f"IdempotentSink(inner).load(those {len(names)} rows), inner.load returning"
        f" {P.INNER_REPORTS} whatever it is given"
    )
    equal(
        reported,
        ok(steps["reported"], reported),
        P.INNER_REPORTS,
        note="Return what inner.load returned, not how many rows you handed it.",
    )


# ─────────────────────────────────────────────────────────────── hidden


def test_duplicates_within_a_batch_written_once(observed: Observed) -> None:
    seen, rng = seeded(observed, "duplicates_within_a_batch_written_once")
    a, b, c, d = ids_of(P.draw_launches(rng, 4, "duplicates_within_a_batch_written_once"))
    call = "await sink.load([a, b, a_copy, c, b])"
    steps = sink_steps(seen, call)
    equal(call, ok(steps["first"], call), 3, note="A repeat inside one batch is a repeat too.")
    then = "then await sink.load([c, d, d])"
    equal(then, ok(steps["second"], then), 1)
    equal(
        "the batches inner received",
        steps["loads"],
        [[a, b, c], [d]],
        note="Each row once, in the order first seen.",
    )


def test_parse_failure_mid_batch_remembers_nothing(observed: Observed) -> None:
    seen, rng = seeded(observed, "parse_failure_mid_batch_remembers_nothing")
    rows = P.draw_launches(rng, 2, "parse_failure_mid_batch_remembers_nothing")
    call = "await sink.load([a, row_with_nan, b])"
    steps = sink_steps(seen, call)
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
        ids_of(rows),
        note="Compute every key before writing anything: a bad row fails the whole batch.",
    )


def test_inner_failure_remembers_nothing_and_retry_writes(observed: Observed) -> None:
    seen, rng = seeded(observed, "inner_failure_remembers_nothing_and_retry_writes")
    rows = P.draw_launches(rng, 2, "inner_failure_remembers_nothing_and_retry_writes")
    call = "await sink.load(rows), inner.load raising NetworkError"
    steps = sink_steps(seen, call)
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
    equal("the rows inner received", steps["written"], ids_of(rows))


def test_concurrent_loads_write_once(observed: Observed) -> None:
    seen, rng = seeded(observed, "concurrent_loads_write_once")
    rows = P.draw_launches(rng, 2, "concurrent_loads_write_once")
    call = "await asyncio.gather(sink.load(rows), sink.load(rows)), inner.load taking 1 s"
    steps = sink_steps(seen, call)
    results = [ok(r, call) for r in listed(steps["results"], 2, call, "results")]
    equal(
        "the rows inner received",
        steps["written"],
        ids_of(rows),
        note="The second load waits until the first has written and remembered its keys.",
    )
    check(
        all(type(r) is int for r in results) and sorted(results) == [0, 2],
        call,
        show_json(results),
        "one load returning 2 and the other 0",
    )


def test_first_concurrent_load_fails_second_writes(observed: Observed) -> None:
    seen, rng = seeded(observed, "first_concurrent_load_fails_second_writes")
    rows = P.draw_launches(rng, 2, "first_concurrent_load_fails_second_writes")
    call = (
        "await asyncio.gather(sink.load(rows), sink.load(rows)), the first inner.load failing"
        " after 1 s"
    )
    steps = sink_steps(seen, call)
    first, second = listed(steps["results"], 2, call, "results")
    raises(first, f"{call}: the first load", "NetworkError")
    equal(
        f"{call}: the second load",
        ok(second, f"{call}: the second load"),
        2,
        note="The first write failed, so its keys were never remembered: the second writes.",
    )
    equal("the rows inner received", steps["written"], ids_of(rows))


def test_with_seen_skips_preloaded_keys(observed: Observed) -> None:
    seen, rng = seeded(observed, "with_seen_skips_preloaded_keys")
    _, b = ids_of(P.draw_launches(rng, 2, "with_seen_skips_preloaded_keys"))
    call = "sink = IdempotentSink.with_seen(inner, keys_of([a])); await sink.load([a, b])"
    steps = sink_steps(seen, call)
    equal(call, ok(steps["mixed"], call), 1, note="a's key was given: only b is new.")
    equal("the rows inner received", steps["written"], [b])
    full = "IdempotentSink.with_seen(inner2, [key_a, key_b]).load([a, b])"
    equal(full, ok(steps["none_new"], full), 0)
    equal(f"{full}: calls of inner2.load", steps["full_loads"], [], note="Nothing new: no write.")


def test_each_sink_remembers_its_own_keys(observed: Observed) -> None:
    seen, rng = seeded(observed, "each_sink_remembers_its_own_keys")
    rows = P.draw_launches(rng, 2, "each_sink_remembers_its_own_keys")
    call = "IdempotentSink(inner1).load(rows), then IdempotentSink(inner2).load(rows)"
    steps = sink_steps(seen, call)
    equal(f"{call}: the first", ok(steps["first"], call), 2)
    equal(
        f"{call}: the second",
        ok(steps["second"], call),
        2,
        note="A new sink starts with no keys, whatever other sinks have loaded.",
    )
    equal("the rows inner2 received", steps["second_written"], ids_of(rows))
    nested = f"IdempotentSink(IdempotentSink(inner3)).load(rows), given {P.NESTED_SECONDS:g} s"
    equal(
        nested,
        ok(steps["nested"], nested),
        2,
        note="Each sink makes its own asyncio.Lock in __init__: a lock shared by every sink"
        " makes the outer load wait for itself.",
    )
    equal(f"{nested}: the rows inner3 received", steps["nested_written"], ids_of(rows))
