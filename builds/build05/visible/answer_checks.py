"""Visible checks of build 05: Retry-After, responses to errors, the paginated source, the ingest,
with a check for every known bug of the hidden suite and every Predict answer of the notebook.

Each check takes the learner's namespace (the kernel's globals, or the module exported from the
notebook) and, when something is off, says the call it made, what came back and what it
expected. The source and ingest checks talk to the fixture server in-process, through
``httpx.ASGITransport``, on virtual time (`http_harness`): a 5 s Retry-After or a 10 s page
deadline costs microseconds. Step 3's checks live in `build05_source`, registered here in the
notebook's order. Every check builds its own server, client and temporary file, and keeps
nothing: running one twice gives the same verdict. Three move the process's time zone 5.5 h
from UTC for the length of one call, then put it back.

Expected values here are plain properties (the fixture's own launches, waits from the policy's
formula), never a reference implementation: this module ships to learners.
"""

from __future__ import annotations

import functools
import inspect
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from builds.build05.visible.http_harness import (
    LISTING,
    NOW,
    NOW_TEXT,
    away_from_utc,
    build03_ready,
    client_for,
    counts,
    describe_error,
    ingest_once,
    report_of,
    response,
)
from builds.build05.visible.paged_source import LAUNCHES, PAGED, SOURCE, listing
from etl import EtlError, HttpStatus, ParseError, RateLimited, launch_results, read_jsonl
from etl.server import Fault, FixtureApp, http_date
from etl.server.dates import DateForm
from workbook.checks import Checks, Said, expect, expect_equal, outcome, outcome_of

CHECKS = Checks("05")


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
    for value in ("120", " 120 "):
        ok, got = outcome(functools.partial(ns.parse_retry_after, value, NOW))
        expect(
            ok and type(got) is float and got == 120.0,
            f"parse_retry_after({value!r}, now), {NOW_TEXT}",
            Said.of(ok, got),
            "returned 120.0 (delay-seconds, as a float)",
            note="ASCII digits are a number of seconds: float(int(text)), once the spaces"
            " around the value are stripped (value.strip()).",
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
    ("Sun, 06 Nov 99999999999 08:49:37 GMT", "a year no machine integer holds"),
)


@CHECKS.add(step="retry_after")
def malformed_retry_after_is_none(ns: Any) -> None:
    for value, why in MALFORMED:
        ok, got = outcome(functools.partial(ns.parse_retry_after, value, NOW))
        note = f"{why}. A malformed Retry-After is as good as none: return None."
        if not ok and isinstance(got, ValueError):
            note += " (parsedate_to_datetime raises ValueError on what it cannot read.)"
        elif not ok and isinstance(got, OverflowError):
            note += " (parsedate_to_datetime raises OverflowError for a year that large.)"
        elif ok and value in ("²", "٣"):
            note += " Test text.isascii() and text.isdigit()."
        expect(
            ok and got is None, f"parse_retry_after({value!r}, now)", Said.of(ok, got), "None", note
        )


ZONE_NOTE = (
    "Every HTTP-date is UTC: make a naive one aware with .replace(tzinfo=UTC), never"
    " .astimezone(UTC), which reads it as the machine's local time."
)
NAIVE_NOW_NOTE = (
    "A naive now is UTC too: if now.tzinfo is None, now = now.replace(tzinfo=UTC); aware minus"
    " naive raises TypeError, which with_retry lets through."
)


@CHECKS.add(step="retry_after")
def retry_after_dates_ignore_the_local_zone(ns: Any) -> None:
    now = datetime(2025, 7, 14, 8, 30, 0, tzinfo=UTC)
    forms: tuple[DateForm, ...] = ("imf", "rfc850", "asctime")
    cases = [(now, 45, form, ZONE_NOTE) for form in forms]
    cases.append((now.replace(tzinfo=None), 75, "imf", NAIVE_NOW_NOTE))
    for at, seconds, form, note in cases:
        value = http_date(now + timedelta(seconds=seconds), form)
        with away_from_utc():
            ok, got = outcome(functools.partial(ns.parse_retry_after, value, at))
        shown = ", tzinfo=UTC)" if at.tzinfo else ") (naive: UTC)"
        expect(
            ok and type(got) is float and got == float(seconds),
            f"parse_retry_after({value!r}, now), now = datetime(2025, 7, 14, 8, 30, 0{shown},"
            " on a machine whose local time is 5.5 h ahead of UTC",
            Said.of(ok, got),
            f"returned {float(seconds)}, whatever the machine's time zone",
            note=note,
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
            "429 with Retry-After: an IMF date 12 s after now",
            response(429, headers={"Retry-After": http_date(NOW + timedelta(seconds=12))}),
            RateLimited,
            None,
            True,
            12.0,
            "A Retry-After date counts from the now given: parse_retry_after(header, now).",
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
        ("JSON nested 100,000 deep", {"content": b"[" * 100_000 + b"]" * 100_000}),
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
        elif not ok and isinstance(got, RecursionError):
            note = (
                "response.json() raised RecursionError (JSON nested deeper than Python's"
                " recursion limit): catch it too, and return ParseError."
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
    cases: tuple[tuple[int, dict[str, Any], str, str], ...] = (
        (201, page, "a page of results", "Success is any status from 200 to 299."),
        (203, page, "a page of results", "Success is any status from 200 to 299."),
        (
            200,
            {"next": None, "results": []},
            "a page holding only results [] and next null",
            "A page needs only a results list and a next (null or a string).",
        ),
        (
            200,
            {**page, "next": LISTING + "?offset=1", "cursor": "b2Zmc2V0PTE="},
            "a page with a key besides count, next, previous and results",
            "Keys a page carries besides results and next change nothing.",
        ),
    )
    for status, body, what, note in cases:
        made = response(status, json=body)
        ok, got = outcome(functools.partial(ns.error_for_response, made, NOW))
        expect(
            ok and got is None,
            f"error_for_response({status} with {what}, now)",
            describe_error(got) if ok else Said.of(ok, got),
            "None: every 2xx holding a page is a page",
            note=note,
        )


@CHECKS.add(step="errors")
def now_defaults_to_the_utc_clock(ns: Any) -> None:
    default = inspect.signature(ns.error_for_response).parameters.get("now")
    expect(
        default is not None and not isinstance(default.default, datetime),
        "inspect.signature(error_for_response): the default of `now`",
        default.default if default is not None else Said("no parameter `now`"),
        "None (read the clock inside the function)",
        note="A default is computed once, when the def runs: now=datetime.now(UTC) in the"
        " signature is the time the cell ran, for ever. Default to None; then"
        " `if now is None: now = datetime.now(UTC)`.",
    )
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

for _check in SOURCE:  # registered here, so the checks run in the notebook's order
    CHECKS.register(_check.name, _check)


# ───────────────────────────────────────────────────────── step 4: ingest


async def ingest_at_str(ns: Any, path: str, app: FixtureApp, url: str) -> tuple[bool, Any]:
    """`ingest_once`, with the file's path given as a str (the signature takes either)."""
    build03_ready(ns)
    async with client_for(app) as client:
        return await outcome_of(ns.ingest(ns.SpaceDevsSource(client, url), path))


@CHECKS.add(step="ingest")
async def second_run_writes_zero_new_rows(ns: Any) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "launches.jsonl"
        ok, report = await ingest_once(ns, path, listing(), PAGED)
        call = f"await ingest(source, path), an empty file, {LAUNCHES} launches"
        expect(
            ok and counts(report) == (LAUNCHES, LAUNCHES),
            call,
            report_of(ok, report),
            f"fetched={LAUNCHES}, written={LAUNCHES}",
        )
        ok, report = await ingest_at_str(ns, str(path), listing(), PAGED)
        call = "await ingest(source, str(path)) again, with a new source and the same file"
        call += " (its path given as a str this time)"
        expect(
            ok and counts(report) == (LAUNCHES, 0),
            call,
            report_of(ok, report),
            f"fetched={LAUNCHES}, written=0",
            note="Start the sink from the file: IdempotentSink.with_seen(JsonlSink(path),"
            " the content_key of each row read_jsonl(path) gives back). path may be a str"
            " or a Path: Path(path) takes either.",
        )
        lines = read_jsonl(path)
        expect_equal(
            "the number of lines in the file after both runs",
            len(lines),
            LAUNCHES,
            note="Each launch once, however many runs it took.",
        )
        ok, report = await ingest_once(ns, path, listing(faults={0: [Fault.revised()]}), PAGED)
        call = "await ingest(source, path) a third time, the first launch now a day later"
        expect(
            ok and counts(report) == (LAUNCHES, 1),
            call,
            report_of(ok, report),
            f"fetched={LAUNCHES}, written=1 (the launch whose content changed)",
            note="A launch whose content changed has a new content key: it is a new row,"
            " written once beside the old one. Skip by content key, never by id.",
        )


@CHECKS.add(step="ingest")
async def failure_mid_run_keeps_earlier_pages(ns: Any) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "launches.jsonl"
        url = LISTING + "?limit=10"
        ok, outcome_ = await ingest_once(ns, path, listing(faults={20: Fault.error(404)}), url)
        call = f"await ingest(source, path), {LAUNCHES} launches, 10 a page, a 404 at offset 20"
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
        ok, report = await ingest_once(ns, path, listing(), url)
        call = "await ingest(source, path) again, the 404 gone"
        expect(
            ok and counts(report) == (LAUNCHES, LAUNCHES - 20),
            call,
            report_of(ok, report),
            f"fetched={LAUNCHES}, written={LAUNCHES - 20} (the 20 already in the file are skipped)",
        )
        expect_equal("lines in the file after both runs", len(read_jsonl(path)), LAUNCHES)
