"""Build 05's judges: pytest tests run in the grading process, on the probes' observations.

One ``test_<name>(observed)`` per graded test of notebook 05 in ``workbook.toml``. Expected
values are computed here from the specs: Retry-After from RFC 9110's arithmetic, an error's
kind from its status, the launches from the fixture's own data, each request's virtual time
from the policy's backoff and the server's scripted waits. None of it enters the child.

What the probes report is a claim, so each judge first draws the submission's own inputs
again (`Observed.seeded`: the order the fixture served its launches in, the Retry-After values
and dates drawn beside the fixed ones) and judges the observation against those; errors are
judged by class (`is_kind`), and the files ingested into are read here, from the copies the
probes kept (`file_holds`), not from what the child said they held. The graded versions of the
visible tests use more inputs than the self-checks. Judging the same observations twice gives
the same verdicts.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

from builds.build05.hidden import probes as P
from etl import TRANSIENT_STATUSES
from grader.judging import (
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
    same_value,
)
from workbook.feedback import message, show_json, show_outcome

#: The default policy's waits after failed attempts 1, 2, 3.
BACKOFF = (0.2, 0.4, 0.8)


def backoff_of(attempt: int) -> float:
    """The default policy's wait after failed attempt `attempt`."""
    return float(min(0.2 * 2 ** (attempt - 1), 10.0))


#: An HTTP-date has whole seconds and the fixture renders it from the wall clock, so a date
#: "4 s after the response" is 3 to 4 s after the client reads it.
DATE_SLACK = 1.0
#: Real time the client may take between the fixture's rendering of a date and its reading of
#: it (a busy machine): part of a second more, never a whole one.
PARSE_DELAY = 0.25


def seeded(observed: Observed, name: str) -> tuple[JSON, random.Random]:
    return observed.seeded(name, P.PROBES)


def listing_ids(rng: random.Random) -> list[str]:
    """The ids of the launches the fixture served this submission, in order."""
    return [result["id"] for result in P.listing(rng)]


# ─────────────────────────────────────────────────────────────── expected values


def seconds_until(value: str, now: datetime) -> float | None:
    """RFC 9110's Retry-After, from its grammar: what every answer here is judged against."""
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, OverflowError):  # a year past 2**31 overflows
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=now.tzinfo)
    return max(0.0, (when - now).total_seconds())


def date_seconds(offset: int, now: datetime) -> float:
    """Seconds from `now` to the date rendered `offset` s after it (rendering drops the
    fraction of a second)."""
    when = (now + timedelta(seconds=offset)).replace(microsecond=0)
    return max(0.0, (when - now).total_seconds())


def requests(*spec: tuple[int, int, float]) -> list[list[Any]]:
    return [[offset, nth, at] for offset, nth, at in spec]


def plain_pages(limit: int, count: int = 300, at: float = 0.0) -> list[list[Any]]:
    return [[offset, 1, at] for offset in range(0, count, limit)]


# ─────────────────────────────────────────────────────────────── reading observations


def value_of(seen: JSON, call: str, expected: str = "a value") -> JSON:
    return ok(seen, call, expected)


def retry_call(value: str | None, now: datetime = P.NOW) -> str:
    when = "now" if now == P.NOW else f"now={now.isoformat()}"
    return f"parse_retry_after({value!r}, {when})"


def judge_retry_after(
    seen: JSON, value: str | None, expected: float | None, note: str = ""
) -> None:
    call = retry_call(value)
    got = value_of(seen, call, show_json(expected))
    equal(call, got, expected, tolerance=1e-9, note=note)


def describe(returned: JSON) -> str:
    if returned is None:
        return "None"
    if not isinstance(returned, dict) or "kind" not in returned:
        return show_json(returned)
    if returned["kind"] == "other":
        return f"a {learner_text(returned.get('type'))} (not one of etl's error kinds)"
    parts = [learner_text(returned["kind"])]
    if returned.get("status") is not None:
        parts.append(f"status={show_json(returned['status'])}")
    parts.append(f"retry_after={show_json(returned.get('retry_after'))}")
    return ", ".join(parts)


def described_wait(returned: JSON, offset: int) -> str:
    """`describe`, with a wait within a minute of `offset` in whole seconds (down) and any
    other in whole minutes from it: the probe's clock is stopped, but code that reads
    another clock (``time.time()``) sees the real one, whose fraction of a second differs
    from run to run, and the feedback must not."""
    wait = returned.get("retry_after") if isinstance(returned, dict) else None
    if type(wait) is not float:
        return describe(returned)
    head = describe({**returned, "retry_after": None}).rsplit(", retry_after=", 1)[0]
    if abs(wait - offset) < 60:
        return f"{head}, retry_after about {math.floor(wait + 1e-6)} s"
    return f"{head}, retry_after {round((wait - offset) / 60):+d} min from {offset} s"


def response_call(spec: Sequence[Any]) -> str:
    return f"error_for_response(a response: {spec[0]}, now)"


def expected_error(spec: Sequence[Any], now: datetime = P.NOW) -> JSON:
    """What error_for_response must return for a non-2xx response, by the spec's table."""
    _, status, headers, _ = spec
    header = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    wait = None if header is None else seconds_until(header, now)
    if status == 429:
        return {"kind": "RateLimited", "status": None, "retry_after": wait}
    if status in TRANSIENT_STATUSES:
        return {"kind": "HttpStatus", "status": status, "retry_after": wait}
    return {"kind": "HttpStatus", "status": status}


def judge_response(seen: JSON, spec: Sequence[Any], expected: JSON, note: str = "") -> None:
    call = response_call(spec)
    got = value_of(seen, call, describe(expected))
    if expected is None or got is None or "retry_after" in expected:
        matches = same_value(got, expected, 1e-9)
    else:  # a permanent status: its Retry-After does not matter, nobody will wait on it
        matches = isinstance(got, dict) and {k: got.get(k) for k in expected} == expected
    check(matches, call, describe(got), describe(expected), note)


def end_of(run: JSON, call: str) -> JSON:
    end = run["end"]
    if "ok" not in end:
        not_done(end, call)
    return end


def runs_to_the_end(run: JSON, call: str) -> None:
    end = end_of(run, call)
    if "ok" not in end:
        note = ""
        if end.get("raised") == "TimeoutError":
            note = (
                "asyncio.timeout raised the built-in TimeoutError, which is not an EtlError:"
                " with_retry let it through. Raise RequestTimeout instead."
            )
        elif end.get("raised") == "RuntimeError" and "reuse" in str(end.get("message")):
            note = "Give with_retry an op that makes a new coroutine per call: functools.partial."
        elif end.get("raised") == "VirtualDeadline":
            note = "It never finished: is every attempt bounded by asyncio.timeout(page_timeout)?"
        elif end.get("raised") == "Runaway":
            note = "It kept requesting pages: does it stop when next is None?"
        raise Fail(message(call, show_outcome(end), "every launch, without an error", note))


def stops_with(run: JSON, call: str, kind: str, status: int | None = None, note: str = "") -> None:
    end = end_of(run, call)
    right = is_kind(end, kind)
    if status is not None:
        right = right and end.get("status") == status
    wanted = f"raises etl's {kind}" + (f"({status})" if status is not None else "")
    if not right:
        got = "it returned" if "ok" in end else show_outcome(end)
        raise Fail(message(call, got, wanted, note))


def yields(run: JSON, call: str, expected: list[str], note: str = "") -> None:
    items = run["items"]
    odd = next((i for i in items if not isinstance(i, str)), None)
    check(
        odd is None,
        f"{call}: what it yielded",
        show_json(odd),
        "etl.Launch rows (Launch.from_api of each result)",
    )
    if items != expected:
        first = next(
            (n for n, (a, b) in enumerate(zip(items, expected, strict=False)) if a != b),
            min(len(items), len(expected)),
        )
        raise Fail(
            message(
                f"{call}: the launches yielded",
                f"{len(items)} launches, differing from the listing at position {first}",
                f"{len(expected)} launches, the listing's, in order",
                note,
            )
        )


def requested(run: JSON, call: str, expected: list[list[Any]], note: str = "") -> None:
    got = [entry[:3] for entry in run["requests"]]
    if same_value(got, expected, TIME_TOLERANCE):
        return
    first = next(
        (
            n
            for n, (a, b) in enumerate(zip(got, expected, strict=False))
            if not same_value(a, b, TIME_TOLERANCE)
        ),
        min(len(got), len(expected)),
    )
    shown = "; ".join(_request_text(r) for r in got[max(0, first - 1) : first + 3]) or "none"
    wanted = "; ".join(_request_text(r) for r in expected[max(0, first - 1) : first + 3]) or "none"
    raise Fail(
        message(
            f"{call}: the requests (offset, its number for that page, virtual time)",
            f"{len(got)} requests; from #{first}: {shown}",
            f"{len(expected)} requests; from #{first}: {wanted}",
            note,
        )
    )


def _request_text(entry: Sequence[Any]) -> str:
    offset, nth, at = entry[:3]
    return f"offset {show_json(offset)} #{show_json(nth)} at {float(at):g} s"


# ─────────────────────────────────────────────────────────────── step 1: parse_retry_after


def test_retry_after_reads_seconds_and_dates(observed: Observed) -> None:
    seen, rng = seeded(observed, "retry_after_reads_seconds_and_dates")
    delay, dates = P.draw_delay(rng), P.draw_dates(rng, 2, 1, 10**6)
    values = ("120", "45", delay)
    for value, got in zip(values, listed(seen["seconds"], 3, "parse_retry_after"), strict=True):
        judge_retry_after(got, value, float(value), "ASCII digits are seconds, as a float.")
    offsets = (*P.DATE_OFFSETS[:3], *dates)
    for (offset, form), got in zip(
        offsets, listed(seen["dates"], len(offsets), "parse_retry_after"), strict=True
    ):
        text = P.date_text(offset, form)
        note = "A naive result (asctime) is UTC: .replace(tzinfo=UTC)." if form == "asctime" else ""
        judge_retry_after(got, text, date_seconds(offset, P.NOW), note)
    judge_retry_after(seen["past"], P.date_text(-60, "imf"), 0.0, "Never negative.")
    judge_retry_after(seen["none"], None, None)


def test_malformed_retry_after_is_none(observed: Observed) -> None:
    seen, rng = seeded(observed, "malformed_retry_after_is_none")
    values = [*P.MALFORMED, *P.NOT_DELAY_SECONDS, *P.drawn(rng, P.draw_malformed)]
    more = P.drawn(rng, P.draw_malformed)
    answers = listed(seen["values"], len(values), "values") + listed(seen["more"], len(more), "")
    for value, got in zip([*values, *more], answers, strict=True):
        judge_retry_after(
            got,
            value,
            seconds_until(value, P.NOW),
            "A Retry-After that is neither form is as good as none.",
        )


def test_retry_after_reads_all_three_date_forms(observed: Observed) -> None:
    seen, rng = seeded(observed, "retry_after_reads_all_three_date_forms")
    drawn_now, dates = P.draw_now(rng), P.draw_dates(rng, 6, 0, 10**7)
    note = (
        "Read every form with parsedate_to_datetime; the asctime form comes back naive, and it"
        " is UTC, on a machine in any time zone (this one is 5.5 h from UTC)."
    )
    for now, key, offsets in (
        (P.NOW, "now", P.DATE_OFFSETS),
        (P.NOW_FRACTION, "fraction", P.DATE_OFFSETS),
        (drawn_now, "drawn", tuple(dates)),
    ):
        answers = listed(seen[key], len(offsets), "parse_retry_after of each date")
        for (offset, form), got in zip(offsets, answers, strict=True):
            text = P.date_text(offset, form, now)
            call = retry_call(text, now)
            expected = date_seconds(offset, now)
            equal(
                call, value_of(got, call, show_json(expected)), expected, tolerance=1e-9, note=note
            )
    naive_now, naive_dates = P.naive_inputs(rng)
    answers = listed(seen["naive_now"], len(naive_dates), "parse_retry_after of each date")
    for (offset, form), got in zip(naive_dates, answers, strict=True):
        text = P.date_text(offset, form, naive_now)
        call = f"parse_retry_after({text!r}, now={naive_now.replace(tzinfo=None)!r}), a naive now"
        expected = date_seconds(offset, naive_now)
        equal(
            call,
            value_of(got, call, show_json(expected)),
            expected,
            tolerance=1e-9,
            note="A naive now is UTC too, like a naive date: make it aware with"
            " .replace(tzinfo=UTC) before subtracting (naive minus aware is a TypeError).",
        )


def test_delay_seconds_are_ascii_digits_only(observed: Observed) -> None:
    seen, rng = seeded(observed, "delay_seconds_are_ascii_digits_only")
    digits = (*P.DELAY_SECONDS, P.draw_delay(rng), f" {P.draw_delay(rng)} ")
    for value, got in zip(digits, listed(seen["digits"], len(digits), "values"), strict=True):
        judge_retry_after(got, value, float(int(value)), "ASCII digits: float(int(text)).")
    not_digits = listed(seen["not_digits"], len(P.NOT_DELAY_SECONDS), "values")
    for value, got in zip(P.NOT_DELAY_SECONDS, not_digits, strict=True):
        judge_retry_after(
            got,
            value,
            None,
            "delay-seconds is 1*DIGIT, ASCII digits only: no sign, point, underscore, unit or"
            " other script's digits (str.isdigit() and int() accept some of those).",
        )


def test_retry_after_in_the_past_is_zero(observed: Observed) -> None:
    seen, rng = seeded(observed, "retry_after_in_the_past_is_zero")
    offsets = (*P.PAST_OFFSETS, *P.draw_dates(rng, rng.randint(*P.DRAWN), -(10**8), -1))
    more = P.draw_dates(rng, rng.randint(*P.DRAWN), -(10**8), -1)
    answers = listed(seen["past"], len(offsets), "dates") + listed(seen["more"], len(more), "")
    for (offset, form), got in zip([*offsets, *more], answers, strict=True):
        judge_retry_after(got, P.date_text(offset, form), 0.0, "A date already past is 0.0.")
    judge_retry_after(seen["zero"], "0", 0.0)
    judge_retry_after(seen["long_ago"], "Sun, 06 Nov 1994 08:49:37 GMT", 0.0)


# ─────────────────────────────────────────────────────────────── step 2: error_for_response


def judge_responses(
    returned: JSON, specs: Sequence[Any], expected: Sequence[JSON], note: str = ""
) -> None:
    """Each response's answer against the expected one (None: expected_error's)."""
    answers = listed(returned, len(specs), "error_for_response of each response", "answers")
    for spec, got, want in zip(specs, answers, expected, strict=True):
        judge_response(got, spec, want, note)


PARSE_ERROR: JSON = {"kind": "ParseError", "status": None, "retry_after": None}


def test_maps_statuses_to_errors(observed: Observed) -> None:
    seen, rng = seeded(observed, "maps_statuses_to_errors")
    specs = (*P.STATUS_CASES, P.draw_transient(rng, dates=False), P.draw_permanent(rng))
    judge_response(seen["returned"][0], specs[0], None, "A 2xx holding a page is no error.")
    judge_responses(seen["returned"][1:], specs[1:], [expected_error(spec) for spec in specs[1:]])


def judge_alike(
    seen: JSON,
    rng: random.Random,
    fixed: Sequence[Any],
    draw: Callable[[random.Random], Any],
    expected: JSON,
    note: str,
) -> None:
    """Responses whose answers are all `expected`: the fixed ones and two drawn runs, each run
    exactly as long as drawn here (what binds a report of alike answers to these inputs)."""
    cases, more = P.alike(rng, fixed, draw)
    answers = listed(seen["returned"], len(cases), "answers") + listed(seen["more"], len(more), "")
    judge_responses(answers, [*cases, *more], [expected] * len(answers), note)


def test_bad_json_is_a_parse_error(observed: Observed) -> None:
    seen, rng = seeded(observed, "bad_json_is_a_parse_error")
    judge_alike(
        seen,
        rng,
        P.NOT_PAGES[:5],
        P.draw_not_page,
        PARSE_ERROR,
        "Return (not raise) ParseError when a 2xx body is not a page.",
    )


def test_every_2xx_page_is_none(observed: Observed) -> None:
    seen, rng = seeded(observed, "every_2xx_page_is_none")
    judge_alike(
        seen,
        rng,
        P.GOOD_PAGES,
        P.draw_good_page,
        None,
        "Every 2xx (200 <= status < 300) whose body is a page is None, whatever else the"
        " page holds.",
    )


def test_bodies_that_are_not_a_page_are_parse_errors(observed: Observed) -> None:
    seen, rng = seeded(observed, "bodies_that_are_not_a_page_are_parse_errors")
    judge_alike(
        seen,
        rng,
        P.NOT_PAGES,
        P.draw_not_page,
        PARSE_ERROR,
        "A page is a JSON object with a results list and a next that is null or a string;"
        " anything else (not JSON, not UTF-8, no body, another shape) is a ParseError.",
    )


def test_transient_statuses_carry_retry_after(observed: Observed) -> None:
    seen, rng = seeded(observed, "transient_statuses_carry_retry_after")
    specs = (*P.TRANSIENT_CASES, P.draw_transient(rng), P.draw_transient(rng))
    judge_responses(
        seen["returned"],
        specs,
        [expected_error(spec) for spec in specs],
        "429 is RateLimited(retry_after); 408, 500, 502, 503 and 504 are HttpStatus(status,"
        " message, retry_after), with retry_after from parse_retry_after(header, now).",
    )


def test_other_statuses_are_permanent(observed: Observed) -> None:
    seen, rng = seeded(observed, "other_statuses_are_permanent")
    specs = (*P.PERMANENT_CASES, P.draw_permanent(rng), P.draw_permanent(rng))
    judge_responses(
        seen["returned"],
        specs,
        [expected_error(spec) for spec in specs],
        "Every other status is HttpStatus(status): permanent, so with_retry raises it at"
        " once (a redirect too: httpx did not follow it).",
    )


def test_now_defaults_to_the_current_utc_time(observed: Observed) -> None:
    seen, rng = seeded(observed, "now_defaults_to_the_current_utc_time")
    offset = P.default_now_offset(rng)
    call = (
        f"error_for_response(a 429 with Retry-After an IMF date {offset} s from now), no now given"
    )
    for key, when in (("returned", ""), ("loaded_a_day_ago", ", the module loaded a day ago")):
        got = value_of(seen[key], call + when, "RateLimited")
        returned = value_of(got, call + when, "RateLimited")
        wait = returned.get("retry_after") if isinstance(returned, dict) else None
        check(
            isinstance(returned, dict)
            and returned.get("kind") == "RateLimited"
            and type(wait) is float
            and offset - 2.0 <= wait <= offset + 1e-6,
            call + when,
            described_wait(returned, offset),
            f"RateLimited with retry_after about {offset - 1} to {offset} seconds",
            "When now is None, use datetime.now(UTC): aware, in UTC whatever the machine's zone"
            " (datetime.now() and datetime.utcnow() are naive), and read at each call (a default"
            " of `now=datetime.now(UTC)` is read once, when the function is defined).",
        )


# ─────────────────────────────────────────────────────────────── step 3: the source


def source_call(query: str, script: str = "", options: str = "") -> str:
    extra = f", {options}" if options else ""
    tail = f", {script}" if script else ""
    return f"SpaceDevsSource(client, LISTING + {query!r}{extra}).launches(){tail}"


def test_follows_next_until_null(observed: Observed) -> None:
    seen, rng = seeded(observed, "follows_next_until_null")
    ids = listing_ids(rng)
    for key, limit, count in (("by_100", 100, 300), ("by_7", 7, P.BY_7)):
        call = source_call(f"?limit={limit}", f"{count} launches")
        run = seen[key]
        runs_to_the_end(run, call)
        yields(run, call, ids[:count], "Follow page['next'] until it is None.")
        requested(run, call, plain_pages(limit, count), "One request per page, in order.")


def test_retries_503_then_continues(observed: Observed) -> None:
    seen, rng = seeded(observed, "retries_503_then_continues")
    ids = listing_ids(rng)[: P.RETRIED]
    run = seen
    call = source_call("?limit=10", "the page at offset 10 answering 503 twice")
    runs_to_the_end(run, call)
    yields(run, call, ids)
    requested(
        run,
        call,
        requests((0, 1, 0.0), (10, 1, 0.0), (10, 2, 0.2), (10, 3, 0.6), (20, 1, 0.6)),
        "Each page through with_retry(self.policy, ...): 0.2 s, then 0.4 s of backoff.",
    )


def test_honors_retry_after_on_429(observed: Observed) -> None:
    seen, rng = seeded(observed, "honors_retry_after_on_429")
    ids = listing_ids(rng)[: P.RETRIED]
    run = seen
    call = source_call("?limit=10", "429 with Retry-After 5 at offset 10, 12 at offset 20")
    runs_to_the_end(run, call)
    yields(run, call, ids)
    requested(
        run,
        call,
        requests((0, 1, 0.0), (10, 1, 0.0), (10, 2, 5.0), (20, 1, 5.0), (20, 2, 17.0)),
        "Wait what Retry-After says: RateLimited(seconds) carries it to with_retry.",
    )


def test_page_deadline_cuts_a_hang(observed: Observed) -> None:
    seen, rng = seeded(observed, "page_deadline_cuts_a_hang")
    ids = listing_ids(rng)[: P.RETRIED]
    for key, timeout in (("ten", 10.0), ("four", 4.0)):
        run = seen[key]
        call = source_call(
            "?limit=10",
            "the page at offset 10 silent for 600 s once",
            f"page_timeout={timeout:g}",
        )
        runs_to_the_end(run, call)
        yields(run, call, ids)
        at = timeout + BACKOFF[0]
        requested(
            run,
            call,
            requests((0, 1, 0.0), (10, 1, 0.0), (10, 2, at), (20, 1, at)),
            "Every attempt inside asyncio.timeout(self.page_timeout); the deadline is a"
            " RequestTimeout, retried after the backoff.",
        )


def test_follows_next_with_any_page_size(observed: Observed) -> None:
    seen, rng = seeded(observed, "follows_next_with_any_page_size")
    ids = listing_ids(rng)
    for key, query, limit, count in (
        ("default", "", 10, P.SHORT),
        ("clamped", "?limit=1000", 100, 300),
        ("by_1", "?limit=1", 1, 5),
    ):
        call = source_call(query, f"{count} launches")
        run = seen[key]
        runs_to_the_end(run, call)
        yields(run, call, ids[:count])
        requested(
            run,
            call,
            plain_pages(limit, count),
            "Follow the server's next links as given: the page size is the server's call.",
        )


def test_empty_last_page_ends_the_run(observed: Observed) -> None:
    seen, rng = seeded(observed, "empty_last_page_ends_the_run")
    ids = listing_ids(rng)
    run = seen
    count = P.SHORT
    call = source_call(
        "?limit=10", f"{count} launches, the last page linking to an empty page after it"
    )
    runs_to_the_end(run, call)
    yields(run, call, ids[:count])
    requested(
        run,
        call,
        [*plain_pages(10, count), [count, 1, 0.0]],
        "An empty page with next null ends it.",
    )


def test_empty_page_with_a_next_is_followed(observed: Observed) -> None:
    seen, rng = seeded(observed, "empty_page_with_a_next_is_followed")
    ids = listing_ids(rng)
    count, far = P.SHORT, P.SHORT + 100
    call = source_call(
        "?limit=10", f"{count} launches, page 2 linking to an empty page whose next is page 3"
    )
    runs_to_the_end(seen, call)
    yields(seen, call, ids[:count])
    requested(
        seen,
        call,
        [[0, 1, 0.0], [10, 1, 0.0], [far, 1, 0.0], *plain_pages(10, count)[2:]],
        "A page with no results may still have a next: stop only when next is None.",
    )


def test_a_source_reads_again_from_the_start(observed: Observed) -> None:
    seen, rng = seeded(observed, "a_source_reads_again_from_the_start")
    ids = listing_ids(rng)[: P.SHORT]
    call = source_call("?limit=7", f"{P.SHORT} launches, iterated twice over the same source")
    runs_to_the_end(seen, call)
    yields(seen, call, ids + ids, "Each run starts again at self.url and fetches every page.")
    pages = plain_pages(7, P.SHORT)
    requested(
        seen,
        call,
        [*pages, *[[offset, 2, at] for offset, _, at in pages]],
        "Keep what one run fetched in pages() itself, not on the source: a second run is new.",
    )


def test_cancelled_run_is_not_retried(observed: Observed) -> None:
    seen, rng = seeded(observed, "cancelled_run_is_not_retried")
    ids = listing_ids(rng)
    cancel_at = P.cancel_delay(rng)
    call = source_call(
        "?limit=10", f"the page at offset 10 hanging, the reader cancelled after {cancel_at:g} s"
    )
    check(
        seen["end"] == {"cancelled": True},
        call,
        show_outcome(seen["end"]) if "ok" not in seen["end"] else "it returned",
        "the run ends cancelled (asyncio.CancelledError reaches the caller)",
        "Catch only httpx's errors in fetch_page: a cancellation is not a network error, and"
        " with_retry must never see it as one.",
    )
    yields(seen, call, ids[:10])
    requested(seen, call, [[0, 1, 0.0], [10, 1, 0.0]], "No request after the cancellation.")


def test_next_leading_back_raises_parse_error(observed: Observed) -> None:
    seen, rng = seeded(observed, "next_leading_back_raises_parse_error")
    ids = listing_ids(rng)
    for back, run in zip((0, 10), seen["runs"], strict=True):
        call = source_call("?limit=10", f"the page at offset 20 linking back to offset {back}")
        stops_with(
            run,
            call,
            "ParseError",
            note="Remember the URLs this run fetched; a next among them is a loop: raise"
            " ParseError instead of fetching it again.",
        )
        yields(run, call, ids[:30], "The pages before the loop are yielded.")
        requested(run, call, plain_pages(10, 30), "The repeated page is never requested.")


def test_retry_after_from_the_server_is_honoured(observed: Observed) -> None:
    seen, rng = seeded(observed, "retry_after_from_the_server_is_honoured")
    ids = listing_ids(rng)
    run = seen
    call = source_call(
        "?limit=10",
        "offset 10: 429 Retry-After 2, then 7; offset 20: 503 Retry-After 3; offset 30: 429"
        " Retry-After 30; offset 40: 503 Retry-After 'soon'",
    )
    runs_to_the_end(run, call)
    yields(run, call, ids[:60])
    requested(
        run,
        call,
        requests(
            (0, 1, 0.0),
            (10, 1, 0.0),
            (10, 2, 2.0),
            (10, 3, 9.0),
            (20, 1, 9.0),
            (20, 2, 12.0),
            (30, 1, 12.0),
            (30, 2, 42.0),
            (40, 1, 42.0),
            (40, 2, 42.2),
            (50, 1, 42.2),
        ),
        "Retry-After replaces the backoff, as sent (30 s too: it is not capped); a malformed"
        " one counts as none, so the backoff applies.",
    )


def test_retry_after_dates_from_the_server(observed: Observed) -> None:
    seen, rng = seeded(observed, "retry_after_dates_from_the_server")
    ids = listing_ids(rng)
    run = seen
    call = source_call(
        "?limit=10",
        "Retry-After 4 s after the response's Date: offset 10 as an IMF date, 20 as RFC 850, 30"
        " as asctime",
    )
    runs_to_the_end(run, call)
    yields(run, call, ids[:40])
    got = run["requests"]
    offsets = [entry[:2] for entry in got]
    equal(
        f"{call}: the requests (offset, its number for that page)",
        offsets,
        [[0, 1], [10, 1], [10, 2], [20, 1], [20, 2], [30, 1], [30, 2]],
    )
    for first, second in itertools.pairwise(got):
        if second[0] == first[0]:
            wait = round(second[2] - first[2], 6)
            check(
                4.0 - DATE_SLACK - PARSE_DELAY <= wait <= 4.0 + 1e-6,
                f"{call}: the wait before offset {second[0]}'s second request",
                f"{wait:g} s",
                "3 to 4 s: until the date (the server writes it to the whole second)",
                "Each date form, with a naive asctime as UTC, minus datetime.now(UTC).",
            )


def test_hang_trips_the_page_deadline(observed: Observed) -> None:
    seen, rng = seeded(observed, "hang_trips_the_page_deadline")
    ids = listing_ids(rng)
    run = seen
    call = source_call("?limit=10", "the page at offset 10 silent twice", "page_timeout=2.5")
    runs_to_the_end(run, call)
    yields(run, call, ids[:30])
    requested(
        run,
        call,
        requests((0, 1, 0.0), (10, 1, 0.0), (10, 2, 2.7), (10, 3, 5.6), (20, 1, 5.6)),
        "2.5 s deadline, 0.2 s backoff, 2.5 s deadline, 0.4 s backoff, then the page.",
    )


def test_hang_every_time_raises_request_timeout(observed: Observed) -> None:
    seen, rng = seeded(observed, "hang_every_time_raises_request_timeout")
    listing_ids(rng)  # the listing comes first; nothing of it is yielded here
    attempts, timeout = P.hang_inputs(rng)
    for run, tries, page_timeout, options in (
        (seen["fixed"], 3, 10.0, "policy=RetryPolicy(max_attempts=3)"),
        (
            seen["drawn"],
            attempts,
            timeout,
            f"policy=RetryPolicy(max_attempts={attempts}), page_timeout={timeout:g}",
        ),
    ):
        call = source_call("?limit=10", "the first page never answering", options)
        stops_with(
            run,
            call,
            "RequestTimeout",
            note="Each attempt's deadline is a RequestTimeout; after the last attempt with_retry"
            " raises it (the default page_timeout is 10 s).",
        )
        times, now = [], 0.0
        for n in range(1, tries + 1):
            times.append((0, n, round(now, 6)))
            now += page_timeout + (backoff_of(n) if n < tries else 0.0)
        requested(run, call, requests(*times))
        equal(
            f"{call}: virtual seconds until it raised",
            run["elapsed"],
            round(now, 6),
            tolerance=1e-6,
        )


def test_malformed_json_is_not_retried(observed: Observed) -> None:
    seen, rng = seeded(observed, "malformed_json_is_not_retried")
    ids = listing_ids(rng)
    for key, offset, what in (("cut_off", 10, "a page cut off"), ("html", 30, "an HTML page")):
        run = seen[key]
        call = source_call("?limit=10", f"offset {offset} answering 200 with {what}")
        stops_with(run, call, "ParseError", note="A body that is not a page is permanent.")
        yields(run, call, ids[:offset])
        requested(run, call, plain_pages(10, offset + 10), "Never repeat a ParseError.")


def test_client_error_mid_run_is_not_retried(observed: Observed) -> None:
    seen, rng = seeded(observed, "client_error_mid_run_is_not_retried")
    ids = listing_ids(rng)
    for key, offset, status in (("not_found", 20, 404), ("gone", 0, 410)):
        run = seen[key]
        call = source_call("?limit=10", f"offset {offset} answering {status}")
        stops_with(run, call, "HttpStatus", status, "A 4xx is permanent: raised at once.")
        yields(run, call, ids[:offset])
        requested(run, call, plain_pages(10, offset + 10), "Requested once, never retried.")


def test_transport_errors_become_etl_errors(observed: Observed) -> None:
    seen, rng = seeded(observed, "transport_errors_become_etl_errors")
    ids = listing_ids(rng)
    run = seen["recovered"]
    faults = ", ".join(f"#{n} {name}" for n, name in P.TRANSPORT_FAULTS.items())
    call = source_call("?limit=50", f"httpx raising on requests {faults}")
    runs_to_the_end(run, call)
    yields(run, call, ids)
    requested(
        run,
        call,
        requests(
            (0, 1, 0.0),
            (50, 1, 0.0),
            (50, 2, 0.2),
            (50, 3, 0.6),
            (100, 1, 0.6),
            (100, 2, 0.8),
            (100, 3, 1.2),
            (150, 1, 1.2),
            (150, 2, 1.4),
            (150, 3, 1.8),
            (200, 1, 1.8),
            (200, 2, 2.0),
            (200, 3, 2.4),
            (250, 1, 2.4),
        ),
        "Every httpx.TimeoutException becomes RequestTimeout; httpx.NetworkError and"
        " RemoteProtocolError become NetworkError: all transient, so retried (a GET is"
        " idempotent).",
    )
    kinds = {"ConnectError": "NetworkError", "ReadTimeout": "RequestTimeout"}
    kinds["RemoteProtocolError"] = "NetworkError"
    for name, run in zip(P.EXHAUSTING, seen["exhausted"], strict=True):
        call = source_call(
            "?limit=10", f"httpx raising {name} every time", "policy=RetryPolicy(max_attempts=2)"
        )
        stops_with(run, call, kinds[name], note=f"httpx.{name} becomes etl's {kinds[name]}.")
        requested(run, call, requests((0, 1, 0.0), (0, 2, 0.2)))


def test_page_changed_between_fetches_is_read_as_sent(observed: Observed) -> None:
    seen, rng = seeded(observed, "page_changed_between_fetches_is_read_as_sent")
    ids = listing_ids(rng)
    run = seen
    call = source_call("?limit=10", "the first page a 503, then sent again with one launch moved")
    runs_to_the_end(run, call)
    results = [r for r in P.RESULTS if r["id"] in set(ids[:20])]
    by_id = {r["id"]: r for r in results}
    first = by_id[ids[0]]
    moved = datetime.fromisoformat(first["net"].replace("Z", "+00:00")) + timedelta(days=1)
    expected = [[i, by_id[i]["net"]] for i in ids[:20]]
    expected[0] = [first["id"], moved.strftime("%Y-%m-%dT%H:%M:%SZ")]
    equal(
        f"{call}: the launches yielded (id, net)",
        run["items"],
        expected,
        say="the page as the successful attempt sent it: the first launch one day later",
        note="Yield what the attempt that succeeded returned; nothing from the failed one.",
    )


# ─────────────────────────────────────────────────────────────── step 4: ingest


def ingest_call(query: str, script: str = "", path: str = "path") -> str:
    tail = f", {script}" if script else ""
    return f"await ingest(SpaceDevsSource(client, LISTING + {query!r}), {path}){tail}"


def reports(run: JSON, call: str, fetched: int, written: int, note: str = "") -> None:
    end = end_of(run, call)
    if "ok" not in end:
        raise Fail(message(call, show_outcome(end), f"fetched={fetched}, written={written}", note))
    report = end["ok"]
    equal(
        call,
        [report.get("fetched"), report.get("written")],
        [fetched, written],
        say=f"report.fetched == {fetched} and report.written == {written} (ints)",
        note=note,
    )


def kept_ids(observed: Observed, run: JSON) -> list[JSON]:
    """The id of each line of the file the probe kept after `run`, read here as a restart
    reads it (`etl.read_jsonl`): blank lines skipped, a line that is not a row as
    ``{"bad": ...}``, and a last line without a newline counted when it parses and left out
    when it does not (the torn end of a write: never a point lost, never a row counted)."""
    ref = run.get("file") if isinstance(run, dict) else None
    data = observed.artefact(ref)
    if data is None:
        if isinstance(ref, dict) and isinstance(ref.get("files"), dict) and "" in ref["files"]:
            return []  # no file was written
        raise Fail(message("the file it wrote", "no copy of the file", "the file itself"))
    ids: list[JSON] = []
    lines = data.decode("utf-8", "replace").split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            if number == len(lines):  # no newline after it: the torn end of a write
                break
            ids.append({"bad": line[:80]})
            continue
        try:
            ids.append(row["id"])
        except (KeyError, TypeError, IndexError):
            ids.append({"bad": line[:80]})
    return ids


def file_holds(
    observed: Observed, run: JSON, call: str, expected: list[str], note: str = ""
) -> None:
    """Fail unless the file holds exactly the rows `expected`, in order: read here, from the
    copy of the file the probe kept, not from what the child reported."""
    ids = kept_ids(observed, run)
    if ids == expected:
        return
    duplicates = len(ids) - len(set(map(str, ids)))
    got = f"{len(ids)} lines" + (f", {duplicates} of them repeats" if duplicates else "")
    raise Fail(
        message(
            f"{call}: the file afterwards", got, f"{len(expected)} lines, each launch once", note
        )
    )


def test_second_run_writes_zero_new_rows(observed: Observed) -> None:
    seen, rng = seeded(observed, "second_run_writes_zero_new_rows")
    ids = listing_ids(rng)
    note = (
        "Start the sink from the file: IdempotentSink.with_seen(JsonlSink(path), keys read back)."
    )
    for key, query, path, count in (
        ("runs", "?limit=25", "path", P.SMALL),
        ("by_7", "?limit=7", "str(path)", P.BY_7),
    ):
        first, second = listed(seen[key], 2, "two runs", "runs")
        call = ingest_call(query, f"{count} launches", path=path)
        reports(first, call, count, count)
        file_holds(observed, first, call, ids[:count])
        again = call + ", again, with a new source"
        reports(second, again, count, 0, note)
        file_holds(observed, second, again, ids[:count], note)


def test_failure_mid_run_keeps_earlier_pages(observed: Observed) -> None:
    seen, rng = seeded(observed, "failure_mid_run_keeps_earlier_pages")
    ids = listing_ids(rng)
    count = P.SMALL
    call = ingest_call("?limit=10", f"{count} launches, offset 20 answering 404")
    stops_with(seen["failed"], call, "HttpStatus", 404, "Catch nothing: the caller sees it.")
    file_holds(
        observed, seen["failed"], call, ids[:20], "Load each page as it arrives, inside the loop."
    )
    again = ingest_call("?limit=10", "again, the 404 gone")
    reports(seen["rerun"], again, count, count - 20, "The 20 rows in the file are skipped.")
    file_holds(observed, seen["rerun"], again, ids[:count])


def test_two_processes_write_once(observed: Observed) -> None:
    seen, rng = seeded(observed, "two_processes_write_once")
    ids = listing_ids(rng)
    first, second = listed(seen["runs"], 2, "two processes", "runs")
    count = P.SMALL
    call = ingest_call("?limit=25", f"{count} launches, in a new process")
    for run in (first, second):
        if "child" in run:
            child = learner_text(run["child"])
            raise Fail(message(call, f"the process did not report: {child}", "a report"))
    reports(first, call, count, count)
    file_holds(observed, first, call, ids[:count])
    again = ingest_call("?limit=25", "in a second new process, the same file")
    reports(
        second,
        again,
        count,
        0,
        "A new process remembers only what is in the file: read its keys back and start"
        " the sink from them (with_seen).",
    )
    file_holds(observed, second, again, ids[:count])


def test_pages_are_written_as_they_arrive(observed: Observed) -> None:
    seen, rng = seeded(observed, "pages_are_written_as_they_arrive")
    ids = listing_ids(rng)
    run = seen
    call = ingest_call("?limit=10", f"{P.SMALL} launches")
    reports(run, call, P.SMALL, P.SMALL)
    lines = [entry[3] for entry in run["requests"]]
    equal(
        f"{call}: the lines in the file as each page was requested",
        lines,
        list(range(0, P.SMALL, 10)),
        note="await sink.load(page) for each page before asking for the next one: at most"
        " one page in memory, and a failure keeps every page before it.",
    )
    file_holds(observed, run, call, ids[: P.SMALL])


def test_failed_run_keeps_its_pages_and_the_rerun_finishes(observed: Observed) -> None:
    seen, rng = seeded(observed, "failed_run_keeps_its_pages_and_the_rerun_finishes")
    ids = listing_ids(rng)
    count, at = P.SMALL, P.BAD_JSON_AT
    failed, rerun = seen["bad_json"]
    call = ingest_call("?limit=10", f"{count} launches, offset {at} answering a page cut off")
    stops_with(failed, call, "ParseError")
    file_holds(observed, failed, call, ids[:at], "Every page before the failure stays written.")
    again = ingest_call("?limit=10", "again, the page whole")
    reports(rerun, again, count, count - at)
    file_holds(observed, rerun, again, ids[:count])
    at = P.UNAVAILABLE_AT
    failed, rerun = seen["unavailable"]
    call = ingest_call("?limit=10", f"offset {at} answering 503 every time, max_attempts=2")
    stops_with(failed, call, "HttpStatus", 503, "with_retry gives up after two attempts.")
    file_holds(observed, failed, call, ids[:at])
    again = ingest_call("?limit=10", "again, the 503 gone")
    reports(rerun, again, count, count - at)
    file_holds(observed, rerun, again, ids[:count])


def test_keys_on_disk_come_from_the_file(observed: Observed) -> None:
    seen, rng = seeded(observed, "keys_on_disk_come_from_the_file")
    ids = listing_ids(rng)
    run = seen["run"]
    count = P.SMALL
    call = ingest_call(
        "?limit=25",
        f"{count} launches, path already holding the first {P.PREFILLED} and one row not in"
        " the listing",
    )
    reports(
        run,
        call,
        count,
        count - P.PREFILLED,
        "Read the keys of every row already in the file, whoever wrote it:"
        " content_key(Launch(**row)) for row in read_jsonl(path).",
    )
    expected = [*ids[: P.PREFILLED], "not-in-the-listing", *ids[P.PREFILLED : count]]
    file_holds(observed, run, call, expected)


def test_written_counts_rows_that_reached_the_file(observed: Observed) -> None:
    seen, rng = seeded(observed, "written_counts_rows_that_reached_the_file")
    ids = listing_ids(rng)
    run = seen
    call = ingest_call("?limit=10", "a listing of 13 results in which 2 repeat earlier ones")
    reports(
        run,
        call,
        13,
        11,
        "fetched counts the rows the source yielded; written adds up what sink.load returned.",
    )
    file_holds(observed, run, call, [*ids[:11]])


def test_revised_launch_is_written_once_more(observed: Observed) -> None:
    seen, rng = seeded(observed, "revised_launch_is_written_once_more")
    ids = listing_ids(rng)
    first, second, third = listed(seen["runs"], 3, "three runs", "runs")
    count = P.SMALL
    call = ingest_call("?limit=50", f"{count} launches")
    reports(first, call, count, count)
    file_holds(observed, first, call, ids[:count])
    moved = ingest_call("?limit=50", "again, the first launch now one day later")
    reports(
        second,
        moved,
        count,
        1,
        "A launch whose content changed is a new row: its key is new, so it is written, once.",
    )
    file_holds(observed, second, moved, [*ids[:count], ids[0]], "The new version, appended.")
    third_call = ingest_call("?limit=50", "a third time, still moved")
    reports(third, third_call, count, 0)
    file_holds(observed, third, third_call, [*ids[:count], ids[0]])
