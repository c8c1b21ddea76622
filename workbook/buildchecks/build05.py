"""Visible checks of build 05: Retry-After, responses to errors, the paginated source, the ingest.

Each check takes the learner's namespace (the kernel's globals, or the module exported from the
notebook) and, when something is off, says the call it made, what came back and what it
expected. The source and ingest checks talk to the fixture server in-process, through
``httpx.ASGITransport``, on virtual time: a 5 s Retry-After or a 10 s page deadline costs
microseconds. Every check builds its own server, client and temporary file, and keeps nothing:
running one twice gives the same verdict.

Expected values here are plain properties (the fixture's own launches, waits from the policy's
formula), never a reference implementation: this module ships to learners.
"""

from __future__ import annotations

import asyncio
import functools
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from etl import (
    EtlError,
    HttpStatus,
    Launch,
    MemorySink,
    ParseError,
    RateLimited,
    launch_results,
    read_jsonl,
)
from etl.server import (
    IN_PROCESS_BASE_URL,
    LAUNCHES_PATH,
    Fault,
    FixtureApp,
    http_date,
    in_process_client,
)
from workbook.checks import Checks, Said, expect, expect_equal, outcome, outcome_of

CHECKS = Checks("05")

#: The fixture's listing, in-process (a made-up host: no socket is opened).
LISTING = IN_PROCESS_BASE_URL + LAUNCHES_PATH
NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)
NOW_TEXT = "now = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)"
#: Real seconds a check may take: on virtual time its waits cost microseconds.
SOURCE_REAL_SECONDS = 1.0


def launch_ids() -> list[str]:
    return [result["id"] for result in launch_results()]


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


# ───────────────────────────────────────────────────────── step 2: error_for_response

PAGE: dict[str, Any] = {"count": 0, "next": None, "previous": None, "results": []}


def response(status: int, **kwargs: Any) -> httpx.Response:
    """A response built by hand, as if to a GET of the listing."""
    return httpx.Response(status, request=httpx.Request("GET", LISTING), **kwargs)


def _describe_error(value: Any) -> Said:
    if value is None:
        return Said("returned None")
    if isinstance(value, BaseException) and not isinstance(
        value, HttpStatus | RateLimited | ParseError
    ):
        return Said(f"returned {type(value).__name__}({str(value)!r})")
    parts = [f"{type(value).__name__}"]
    status = getattr(value, "status", None)
    if status is not None:
        parts.append(f"status={status}")
    if hasattr(value, "is_transient"):
        parts.append(f"transient={value.is_transient()}")
        parts.append(f"retry_after={value.retry_after()!r}")
    return Said("returned " + ", ".join(parts))


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
            _describe_error(error) if ok else Said.of(ok, error),
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
            _describe_error(got) if ok else Said.of(ok, got),
            "ParseError (returned, not raised)",
            note,
        )


# ───────────────────────────────────────────────────────── step 3: SpaceDevsSource


def build03_ready(ns: Any) -> None:
    """Say so when the step cannot run because build 03's seams are still stubs."""
    try:
        ns.RetryPolicy()
        ns.IdempotentSink(MemorySink())
    except NotImplementedError as exc:
        raise NotImplementedError(
            f"build 03 first: this step runs on its RetryPolicy and IdempotentSink ({exc})"
        ) from None


async def read_all(
    ns: Any, app: FixtureApp, url: str, **options: Any
) -> tuple[bool, Any, list[Any], float, float]:
    """Iterate ``source.launches()``: (ok, error, launches, virtual seconds, real seconds)."""
    build03_ready(ns)
    loop = asyncio.get_running_loop()
    start, real = loop.time(), time.perf_counter()
    got: list[Any] = []
    async with in_process_client(app) as client:
        source = ns.SpaceDevsSource(client, url, **options)

        async def drain() -> None:
            async for launch in source.launches():
                got.append(launch)

        ok, error = await outcome_of(drain())
    return ok, error, got, loop.time() - start, time.perf_counter() - real


def requests_for(app: FixtureApp, offset: int) -> int:
    return sum(entry.offset == offset for entry in app.log)


def _failure_note(error: Any) -> str:
    if isinstance(error, RuntimeError) and "reuse" in str(error):
        return (
            "with_retry calls op() once per attempt, and a coroutine can be awaited once: give"
            " it functools.partial(self.fetch_page, url), which makes a new one per call."
        )
    if isinstance(error, TimeoutError):
        return (
            "asyncio.timeout raises the built-in TimeoutError, not an EtlError, so with_retry"
            " let it through: catch it around the `async with` and raise RequestTimeout."
        )
    if isinstance(error, ValueError):
        return "A body that is not a page must reach with_retry as the ParseError it is."
    return ""


def expect_every_launch(call: str, ok: bool, error: Any, got: list[Any]) -> None:
    expect(ok, call, Said.of(ok, error), "every launch, without an error", _failure_note(error))
    wrong = next((item for item in got if type(item) is not Launch), None)
    expect(
        wrong is None,
        f"{call}: an item yielded",
        wrong,
        "etl.Launch rows: Launch.from_api(result) for each result",
    )
    ids, expected = [launch.id for launch in got], launch_ids()
    expect(
        ids == expected,
        f"{call}: the launches yielded",
        Said(f"{len(ids)} launches" + ("" if ids[:1] == expected[:1] else ", in another order")),
        f"all {len(expected)} launches of the listing, each once, in order",
        note="Follow page['next'] until it is None, yielding each page's results.",
    )


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
    app = FixtureApp({100: [Fault.hang(600)]})
    call = "launches(), the page at offset 100 silent for 600 s once, page_timeout=10.0"
    ok, error, got, waited, real = await read_all(
        ns, app, LISTING + "?limit=100", page_timeout=10.0
    )
    expect_every_launch(call, ok, error, got)
    expect(
        real < SOURCE_REAL_SECONDS, f"{call}: real seconds", round(real, 2), "well under a second"
    )
    expect(
        abs(waited - 10.2) < 1e-6,
        f"{call}: seconds waited (virtual)",
        round(waited, 6),
        "10.2: the 10 s deadline, then the 0.2 s backoff, then the page",
        note=(
            "The request was waited out: httpx's timeouts do nothing under ASGITransport."
            " Wrap client.get in `async with asyncio.timeout(self.page_timeout):`."
            if waited >= 600
            else ""
        ),
    )


# ───────────────────────────────────────────────────────── step 4: ingest


async def ingest_once(ns: Any, path: Path, app: FixtureApp, url: str) -> tuple[bool, Any]:
    """One run, with its own client and source (as a new process would make them)."""
    build03_ready(ns)
    async with in_process_client(app) as client:
        source = ns.SpaceDevsSource(client, url)
        return await outcome_of(ns.ingest(source, path))


def report_of(ok: bool, value: Any) -> Said:
    if not ok:
        return Said.of(ok, value)
    fetched, written = getattr(value, "fetched", "?"), getattr(value, "written", "?")
    return Said(f"fetched={fetched!r}, written={written!r}")


def counts(value: Any) -> tuple[Any, Any]:
    return getattr(value, "fetched", None), getattr(value, "written", None)


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
