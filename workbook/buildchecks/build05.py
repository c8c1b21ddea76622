"""Visible checks of build 05: Retry-After, responses to errors, the paginated source, the ingest,
with a check for every known bug of the hidden suite and every Predict answer of the notebook.

Each check takes the learner's namespace (the kernel's globals, or the module exported from the
notebook) and, when something is off, says the call it made, what came back and what it
expected. The source and ingest checks talk to the fixture server in-process, through
``httpx.ASGITransport``, on virtual time (`http_harness`): a 5 s Retry-After or a 10 s page
deadline costs microseconds. Every check builds its own server, client and temporary file, and
keeps nothing: running one twice gives the same verdict. Two move the process's time zone
5.5 h from UTC for the length of one call, then put it back.

Expected values here are plain properties (the fixture's own launches, waits from the policy's
formula), never a reference implementation: this module ships to learners.
"""

from __future__ import annotations

import asyncio
import functools
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from etl import EtlError, HttpStatus, ParseError, RateLimited, launch_results, read_jsonl
from etl.server import Fault, FixtureApp, http_date
from workbook.buildchecks.http_harness import (
    LISTING,
    NOW,
    NOW_TEXT,
    away_from_utc,
    counts,
    describe_error,
    expect_every_launch,
    expect_stopped,
    ingest_once,
    read_all,
    report_of,
    requests_for,
    response,
)
from workbook.checks import Checks, Said, expect, expect_equal, outcome
from workbook.learnertests import Sabotage

CHECKS = Checks("05")
#: Real seconds a check may take: on virtual time its waits cost microseconds.
SOURCE_REAL_SECONDS = 1.0


# ───────────────────────────────────────────────────────── step 1: parse_retry_after


def _date_note(value: str, ok: bool, got: Any) -> str:
    if not ok and isinstance(got, TypeError):
        return (
            "The asctime form names no zone: parsedate_to_datetime returns a naive datetime."
            " HTTP dates are UTC: make it aware with .replace(tzinfo=UTC) before subtracting."
        )
    if ok and got is None:
        return "That is an HTTP-date: read it with parsedate_to_datetime, then subtract now."
    if ok and isinstance(got, float) and abs(got) > 600:
        return (
            "Off by hours: is a naive datetime being read as local time (.astimezone(),"
            " .timestamp())? HTTP dates are UTC: .replace(tzinfo=UTC)."
        )
    return "Seconds from now to the date: (when - now).total_seconds(), never below 0.0."


@CHECKS.add(step="retry_after")
def retry_after_reads_seconds_and_dates(ns: Any) -> None:
    ok, got = outcome(lambda: ns.parse_retry_after("120", NOW))
    expect(
        ok and type(got) is float and got == 120.0,
        f'parse_retry_after("120", now), {NOW_TEXT}',
        Said.of(ok, got),
        "returned 120.0 (delay-seconds, as a float)",
        note="ASCII digits are a number of seconds: float(int(text)).",
    )
    later = NOW + timedelta(seconds=30)
    for form in ("imf", "rfc850", "asctime"):
        value = http_date(later, form)
        ok, got = outcome(functools.partial(ns.parse_retry_after, value, NOW))
        expect(
            ok and type(got) is float and got == 30.0,
            f"parse_retry_after({value!r}, now), {NOW_TEXT}",
            Said.of(ok, got),
            f"returned 30.0 (the {form} form of an HTTP-date, 30 s after now)",
            note=_date_note(value, ok, got),
        )
    earlier = http_date(NOW - timedelta(seconds=60))
    ok, got = outcome(lambda: ns.parse_retry_after(earlier, NOW))
    expect(
        ok and type(got) is float and got == 0.0,
        f"parse_retry_after({earlier!r}, now), {NOW_TEXT}",
        Said.of(ok, got),
        "returned 0.0 (a date already past means: ask again now)",
        note="Never negative: max(0.0, seconds).",
    )
    ok, got = outcome(lambda: ns.parse_retry_after(None, NOW))
    expect(ok and got is None, "parse_retry_after(None, now)", Said.of(ok, got), "returned None")


MALFORMED = (
    ("", "an empty header"),
    ("soon", "not a number, not a date"),
    ("-5", "int() reads the sign; delay-seconds has none"),
    ("1.5", "delay-seconds is a whole number"),
    ("²", '"²".isdigit() is True, and int("²") raises ValueError'),
    ("٣", "int() reads Arabic-Indic digits; HTTP only ASCII ones"),
    ("2024-03-01T12:00:30Z", "ISO 8601 is not an HTTP-date"),
)


@CHECKS.add(step="retry_after")
def malformed_retry_after_is_none(ns: Any) -> None:
    for value, why in MALFORMED:
        ok, got = outcome(functools.partial(ns.parse_retry_after, value, NOW))
        note = f"{why}. A malformed Retry-After is as good as none: return None."
        if not ok and isinstance(got, ValueError):
            note += " (parsedate_to_datetime raises ValueError on what it cannot read.)"
        elif ok and value in ("²", "٣"):
            note += " Test text.isascii() and text.isdigit()."
        expect(
            ok and got is None, f"parse_retry_after({value!r}, now)", Said.of(ok, got), "None", note
        )


@CHECKS.add(step="retry_after")
def retry_after_dates_ignore_the_local_zone(ns: Any) -> None:
    now = datetime(2025, 7, 14, 8, 30, 0, tzinfo=UTC)
    for form in ("imf", "rfc850", "asctime"):
        value = http_date(now + timedelta(seconds=45), form)
        with away_from_utc():
            ok, got = outcome(functools.partial(ns.parse_retry_after, value, now))
        expect(
            ok and type(got) is float and got == 45.0,
            f"parse_retry_after({value!r}, now), now = datetime(2025, 7, 14, 8, 30, 0,"
            " tzinfo=UTC), on a machine whose local time is 5.5 h ahead of UTC",
            Said.of(ok, got),
            "returned 45.0, whatever the machine's time zone",
            note="Every HTTP-date is UTC: make a naive one aware with .replace(tzinfo=UTC), never"
            " .astimezone(UTC), which reads it as the machine's local time.",
        )


# ───────────────────────────────────────────────────────── step 2: error_for_response

PAGE: dict[str, Any] = {"count": 0, "next": None, "previous": None, "results": []}


@CHECKS.add(step="errors")
def maps_statuses_to_errors(ns: Any) -> None:
    ok, got = outcome(lambda: ns.error_for_response(response(200, json=PAGE), NOW))
    expect(
        ok and got is None,
        "error_for_response(200 with a page of results, now)",
        Said.of(ok, got),
        "None: a 2xx holding a page is no error",
    )
    cases: list[tuple[str, httpx.Response, type[EtlError], int | None, bool, float | None, str]] = [
        (
            '429 with Retry-After: "5"',
            response(429, headers={"Retry-After": "5"}),
            RateLimited,
            None,
            True,
            5.0,
            "429 is RateLimited(retry_after), with parse_retry_after of the header.",
        ),
        (
            "503 without Retry-After",
            response(503),
            HttpStatus,
            503,
            True,
            None,
            "The other transient statuses are HttpStatus(status, message, retry_after).",
        ),
        (
            '503 with Retry-After: "7"',
            response(503, headers={"Retry-After": "7"}),
            HttpStatus,
            503,
            True,
            7.0,
            "A 503 may carry Retry-After too: pass it as HttpStatus's retry_after_secs.",
        ),
        (
            "404",
            response(404),
            HttpStatus,
            404,
            False,
            None,
            "Any other status is HttpStatus(status): a 404 will be a 404 again.",
        ),
    ]
    for name, made, kind, status, transient, wait, note in cases:
        ok, error = outcome(functools.partial(ns.error_for_response, made, NOW))
        right = (
            ok
            and type(error) is kind
            and (status is None or getattr(error, "status", None) == status)
            and error.is_transient() is transient
            and error.retry_after() == wait
        )
        expected = f"{kind.__name__}" + (f", status={status}" if status else "")
        expected += f", transient={transient}, retry_after={wait!r}"
        expect(
            bool(right),
            f"error_for_response({name}, now)",
            describe_error(error) if ok else Said.of(ok, error),
            expected,
            note,
        )


@CHECKS.add(step="errors")
def bad_json_is_a_parse_error(ns: Any) -> None:
    bodies: tuple[tuple[str, dict[str, Any]], ...] = (
        ("a page cut off mid-way", {"content": b'{"count": 300, "next": null, "resu'}),
        ("an HTML page", {"text": "<html>Please sign in to the Wi-Fi</html>"}),
        ("the JSON [] (not a page)", {"json": []}),
    )
    for name, body in bodies:
        made = response(200, **body)
        ok, got = outcome(functools.partial(ns.error_for_response, made, NOW))
        note = "The body must be a page: a JSON object with a results list and a next."
        if not ok and type(got) is ParseError:
            note = "Return the error, don't raise it: fetch_page is what raises."
        elif not ok and isinstance(got, ValueError):
            note = (
                "response.json() raised: catch ValueError (json's errors are ValueErrors) and"
                " return ParseError instead of raising."
            )
        elif ok and got is not None:
            note = (
                "Make it a ParseError, which is permanent: asking again gets the same broken"
                " bytes, and the next run resumes after the pages already written."
            )
        expect(
            ok and type(got) is ParseError,
            f"error_for_response(200 with {name}, now)",
            describe_error(got) if ok else Said.of(ok, got),
            "ParseError (returned, not raised)",
            note,
        )


@CHECKS.add(step="errors")
def any_2xx_with_a_page_is_none(ns: Any) -> None:
    page = {"count": 1, "next": None, "previous": None, "results": launch_results()[:1]}
    for status in (201, 203):
        made = response(status, json=page)
        ok, got = outcome(functools.partial(ns.error_for_response, made, NOW))
        expect(
            ok and got is None,
            f"error_for_response({status} with a page of results, now)",
            describe_error(got) if ok else Said.of(ok, got),
            "None: every 2xx holding a page is a page",
            note="Success is any status from 200 to 299: `200 <= status < 300`.",
        )


@CHECKS.add(step="errors")
def now_defaults_to_the_utc_clock(ns: Any) -> None:
    later = http_date(datetime.now(UTC) + timedelta(seconds=120))
    made = response(503, headers={"Retry-After": later})
    with away_from_utc():
        ok, got = outcome(lambda: ns.error_for_response(made))
    wait = got.retry_after() if ok and isinstance(got, EtlError) else None
    expect(
        isinstance(wait, float) and 100.0 < wait <= 120.0,
        "error_for_response(503 with Retry-After: an HTTP-date 120 s from now), no `now`"
        " given, on a machine whose local time is 5.5 h ahead of UTC",
        describe_error(got) if ok else Said.of(ok, got),
        "HttpStatus, retry_after about 120.0",
        note="With no `now`, use the current time in UTC, aware: datetime.now(UTC), not"
        " datetime.now() (naive local time, hours off wherever the zone is not UTC).",
    )


# ───────────────────────────────────────────────────────── step 3: SpaceDevsSource


@CHECKS.add(step="source")
async def follows_next_until_null(ns: Any) -> None:
    app = FixtureApp()
    call = 'SpaceDevsSource(client, LISTING + "?limit=100").launches(), 300 launches'
    ok, error, got, _, _ = await read_all(ns, app, LISTING + "?limit=100")
    expect_every_launch(call, ok, error, got)
    expect_equal(
        f"{call}: the pages requested (offsets)",
        [entry.offset for entry in app.log],
        [0, 100, 200],
        note="One request per page: start at the URL given, then each page's next.",
    )


@CHECKS.add(step="source")
async def retries_503_then_continues(ns: Any) -> None:
    app = FixtureApp({100: [Fault.unavailable()]})
    call = "launches(), the page at offset 100 answering 503 once (no Retry-After)"
    ok, error, got, waited, real = await read_all(ns, app, LISTING + "?limit=100")
    expect_every_launch(call, ok, error, got)
    expect_equal(
        f"{call}: requests for that page",
        requests_for(app, 100),
        2,
        note="Fetch each page through with_retry(self.policy, ...): a 503 is transient.",
    )
    expect(
        real < SOURCE_REAL_SECONDS, f"{call}: real seconds", round(real, 2), "well under a second"
    )
    expect(
        abs(waited - 0.2) < 1e-6,
        f"{call}: seconds waited (virtual)",
        round(waited, 6),
        "0.2: the policy's first backoff",
    )


@CHECKS.add(step="source")
async def honors_retry_after_on_429(ns: Any) -> None:
    app = FixtureApp({100: [Fault.rate_limited(5)]})
    call = "launches(), the page at offset 100 answering 429 with Retry-After: 5 once"
    ok, error, got, waited, _ = await read_all(ns, app, LISTING + "?limit=100")
    expect_every_launch(call, ok, error, got)
    expect_equal(f"{call}: requests for that page", requests_for(app, 100), 2)
    expect(
        abs(waited - 5.0) < 1e-6,
        f"{call}: seconds waited (virtual)",
        round(waited, 6),
        "5.0: what the server asked for",
        note="error_for_response turns the 429 into RateLimited(5.0); with_retry waits that.",
    )


@CHECKS.add(step="source")
async def page_deadline_cuts_a_hang(ns: Any) -> None:
    for offset, size, count, timeout in ((100, 100, 300, 10.0), (60, 30, 90, 1.5)):
        app = FixtureApp({offset: [Fault.hang(600)]}, results=launch_results()[:count])
        call = f"launches(), {size} a page, the page at offset {offset} silent for 600 s once,"
        call += f" page_timeout={timeout}"
        url = f"{LISTING}?limit={size}"
        ok, error, got, waited, real = await read_all(ns, app, url, page_timeout=timeout)
        expect_every_launch(call, ok, error, got, count)
        expect(
            real < SOURCE_REAL_SECONDS, f"{call}: real seconds", round(real, 2), "well under 1 s"
        )
        expect(
            abs(waited - timeout - 0.2) < 1e-6,
            f"{call}: seconds waited (virtual)",
            round(waited, 6),
            f"{timeout + 0.2:g}: the {timeout:g} s deadline, then the 0.2 s backoff, then the page",
            note=(
                "The request was waited out: httpx's timeouts do nothing under ASGITransport."
                " Wrap client.get in `async with asyncio.timeout(self.page_timeout):`."
                if waited >= 600
                else "Bound each attempt with asyncio.timeout(self.page_timeout), the timeout"
                " given, inside fetch_page."
            ),
        )


@CHECKS.add(step="source")
async def retries_with_the_policy_given(ns: Any) -> None:
    app = FixtureApp(
        {50: [Fault.unavailable(), Fault.unavailable()]}, results=launch_results()[:150]
    )
    policy = ns.RetryPolicy(max_attempts=2, base_delay=1.5, max_delay=1.5)
    call = (
        "SpaceDevsSource(client, LISTING + '?limit=50', RetryPolicy(max_attempts=2,"
        " base_delay=1.5, max_delay=1.5)).launches(), the page at offset 50 answering 503 twice"
    )
    ok, error, got, waited, _ = await read_all(ns, app, LISTING + "?limit=50", policy)
    note = "Fetch every page with with_retry(self.policy, ...): the policy given, not a new one."
    expect_stopped(call, ok, error, got, HttpStatus, 50, note)
    expect_equal(f"{call}: requests for that page", requests_for(app, 50), 2)
    expect(abs(waited - 1.5) < 1e-6, f"{call}: seconds waited", round(waited, 6), "1.5")


@CHECKS.add(step="source")
async def httpx_failures_are_retried(ns: Any) -> None:
    faults: dict[int, type[httpx.TransportError]] = {
        2: httpx.ConnectError,
        4: httpx.ReadTimeout,
        6: httpx.RemoteProtocolError,
    }
    call = (
        "launches(), 50 a page, requests 2, 4 and 6 raising httpx.ConnectError,"
        " httpx.ReadTimeout and httpx.RemoteProtocolError"
    )
    ok, error, got, _, _ = await read_all(ns, FixtureApp(), LISTING + "?limit=50", faults=faults)
    expect_every_launch(call, ok, error, got)


@CHECKS.add(step="source")
async def next_leading_back_is_a_parse_error(ns: Any) -> None:
    app = FixtureApp({40: [Fault.next_to(20)]}, results=launch_results()[:80])
    call = "launches(), 20 a page, the page at offset 40 linking back to offset 20"
    ok, error, got, _, _ = await read_all(ns, app, LISTING + "?limit=20")
    note = (
        "Keep the URLs this run has fetched; when next names one of them again, raise"
        " ParseError: the listing loops, and following it would never end."
    )
    expect_stopped(call, ok, error, got, ParseError, 60, note)


@CHECKS.add(step="source")
async def requests_at_the_predicted_times(ns: Any) -> None:
    # Step 3's Predict: requested at 0 s, 0.2 s and 3.2 s; the run ends at 3.2 s.
    times: list[float] = []
    loop = asyncio.get_running_loop()

    def log_time(entry: Any) -> None:
        if entry.offset == 10:
            times.append(round(loop.time(), 6))

    script = {10: [Fault.unavailable(), Fault.unavailable(retry_after=3)]}
    app = FixtureApp(script, results=launch_results()[:50], on_request=log_time)
    call = (
        "launches(), 10 a page, the page at offset 10 answering 503, then 503 with"
        " Retry-After: 3, then normally"
    )
    ok, error, got, waited, _ = await read_all(ns, app, LISTING + "?limit=10")
    expect_every_launch(call, ok, error, got, 50)
    expect_equal(f"{call}: when that page was requested (virtual s)", times, [0.0, 0.2, 3.2])
    expect(abs(waited - 3.2) < 1e-6, f"{call}: when the run ended", round(waited, 6), "3.2")
    app = FixtureApp({20: [Fault.bad_json()]}, results=launch_results()[:50])
    call = "launches(), 10 a page, the page at offset 20 cut off mid-way (status 200)"
    ok, error, got, _, _ = await read_all(ns, app, LISTING + "?limit=10")
    note = "Step 2's Predict: a cut-off page is a ParseError, which with_retry never repeats."
    expect_stopped(call, ok, error, got, ParseError, 20, note)
    expect_equal(f"{call}: requests for that page", requests_for(app, 20), 1, note=note)


# ───────────────────────────────────────────────────────── step 4: ingest


@CHECKS.add(step="ingest")
async def second_run_writes_zero_new_rows(ns: Any) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "launches.jsonl"
        url = LISTING + "?limit=100"
        ok, report = await ingest_once(ns, path, FixtureApp(), url)
        call = "await ingest(source, path), an empty file, 300 launches"
        expect(
            ok and counts(report) == (300, 300),
            call,
            report_of(ok, report),
            "fetched=300, written=300",
        )
        ok, report = await ingest_once(ns, path, FixtureApp(), url)
        call = "await ingest(source, path) again, with a new source and the same file"
        expect(
            ok and counts(report) == (300, 0),
            call,
            report_of(ok, report),
            "fetched=300, written=0",
            note="Start the sink from the file: IdempotentSink.with_seen(JsonlSink(path),"
            " the content_key of each row read_jsonl(path) gives back).",
        )
        lines = read_jsonl(path)
        expect_equal(
            "the number of lines in the file after both runs",
            len(lines),
            300,
            note="Each launch once, however many runs it took.",
        )


@CHECKS.add(step="ingest")
async def failure_mid_run_keeps_earlier_pages(ns: Any) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "launches.jsonl"
        url = LISTING + "?limit=10"
        ok, outcome_ = await ingest_once(ns, path, FixtureApp({20: Fault.error(404)}), url)
        call = "await ingest(source, path), 10 launches a page, the page at offset 20 a 404"
        expect(
            not ok and type(outcome_) is HttpStatus and outcome_.status == 404,
            call,
            report_of(ok, outcome_),
            "raises the HttpStatus(404) (catch nothing: the caller must see it)",
        )
        expect_equal(
            f"{call}: lines in the file afterwards",
            len(read_jsonl(path)),
            20,
            note="Load each page as it arrives (await sink.load(page) inside the loop), so"
            " the pages before the failure stay written.",
        )
        ok, report = await ingest_once(ns, path, FixtureApp(), url)
        call = "await ingest(source, path) again, the 404 gone"
        expect(
            ok and counts(report) == (300, 280),
            call,
            report_of(ok, report),
            "fetched=300, written=280 (the 20 already in the file are skipped)",
        )
        expect_equal("lines in the file after both runs", len(read_jsonl(path)), 300)


# ───────────────────────────────────────────────── the learner's own tests (teststep)

#: Test-writing steps: the learner's test -> the seams it tests (the ones mutated).
LEARNER_TESTS: dict[str, tuple[str, ...]] = {"test_second_run_writes_nothing": ("ingest",)}
#: Seed 002's "remove the key" for `ingest`: the second run starts from an empty memory.
SABOTAGE = [
    Sabotage(
        "ingest_forgets_the_file",
        "ingest ignores the keys already in the file",
        "class IdempotentSink(IdempotentSink):\n"
        "    @classmethod\n"
        "    def with_seen(cls, inner, keys):\n"
        "        return cls(inner)\n",
    ),
]
