"""Build 05's probes: run in the grading child, next to the learner's exported answers.

Each probe calls the learner's code on inputs defined here (Retry-After values, responses built
by hand, fault scripts for the fixture server, files to ingest into) and returns what it saw as
plain JSON: values of exact types, errors by class name, request times on a virtual clock, the
ids in the file afterwards. No expected value lives in this file: the judges (``judges.py``, in
the parent) compute those from the specs and the fixture's own data.

Build 05's setup cell loads build 03's seams with `workbook.siblings.load_sibling`. Graded here,
the export has no notebook next to it, so importing this file registers the reference seams of
build 03 (``tests/hidden/seams/03.py``) for that: each build is graded alone, and an unfinished
build 03 costs nothing here. Probing the same answers twice gives the same observations, apart
from ``real`` seconds and the few waits that depend on the wall clock (HTTP dates have whole
seconds), which the judges read with that second of slack.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from etl import (
    EtlError,
    HttpStatus,
    Launch,
    NetworkError,
    ParseError,
    RateLimited,
    RequestTimeout,
    launch_results,
    row_to_json,
)
from etl.server import (
    IN_PROCESS_BASE_URL,
    LAUNCHES_PATH,
    Fault,
    FixtureApp,
    RetryAt,
    Script,
    http_date,
)
from grader.observe import (
    JSON,
    Clock,
    Probes,
    attempt,
    need,
    plain,
    raised,
    safe_text,
    vrun,
)
from workbook.siblings import use_reference

PROBES = Probes()
SEAMS = Path(__file__).resolve().parent.parent / "seams"
use_reference("03", SEAMS / "03.py")

LISTING = IN_PROCESS_BASE_URL + LAUNCHES_PATH
#: Parsed once, when the fork server imports this file: every worker inherits them.
RESULTS: tuple[dict[str, Any], ...] = tuple(launch_results())
#: More requests than any correct run makes: past this the probe stops the run (a loop).
MAX_REQUESTS = 400
#: Real seconds one child process of the two-process probe may take.
CHILD_SECONDS = 0.4
#: A zone far from UTC, with no daylight saving, that needs no time-zone database.
LOCAL_ZONE = "IST-5:30"
ETL_KINDS: tuple[type[EtlError], ...] = (
    HttpStatus,
    RateLimited,
    ParseError,
    NetworkError,
    RequestTimeout,
    EtlError,
)


class Runaway(BaseException):  # a BaseException: a learner's `except Exception` cannot eat it
    """Raised by the probes' transport after `MAX_REQUESTS`: the run would never end."""


def away_from_utc() -> None:
    """Put this (disposable) child in a time zone 5.5 h from UTC, so that a naive datetime
    read as local time is visibly wrong rather than right by luck on a UTC machine."""
    os.environ["TZ"] = LOCAL_ZONE
    time.tzset()


# ─────────────────────────────────────────────────────────────── inputs (shared with judges)

NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)
#: Another `now`, with a fraction of a second (dates have whole seconds; `now` need not).
NOW_FRACTION = datetime(2031, 11, 9, 23, 59, 58, 250_000, tzinfo=UTC)

#: (seconds from now, form): dates rendered from these, judged against the arithmetic.
DATE_OFFSETS: tuple[tuple[int, str], ...] = (
    (30, "imf"),
    (30, "rfc850"),
    (30, "asctime"),
    (1, "imf"),
    (3600, "asctime"),
    (86_400 * 40, "rfc850"),
    (7, "asctime"),
)
PAST_OFFSETS: tuple[tuple[int, str], ...] = ((-60, "imf"), (-1, "rfc850"), (-86_400, "asctime"))
DELAY_SECONDS: tuple[str, ...] = ("0", "7", "007", "120", "86400", " 15 ")
NOT_DELAY_SECONDS: tuple[str, ...] = (
    "²",
    "٣",
    "-5",
    "+5",
    "1.5",
    "1_0",
    "5s",
    "5 s",
    "0x10",
    "",
    "   ",
)
MALFORMED: tuple[str, ...] = (
    "soon",
    "2024-03-01T12:00:30Z",
    "Fri, 32 Mar 2024 12:00:30 GMT",
    "Fri, 01 Mar 2024 25:00:30 GMT",
    "tomorrow at noon",
    "NaN",
    "inf",
)


def date_text(offset: int, form: str, now: datetime = NOW) -> str:
    return http_date(now + timedelta(seconds=offset), form)


# Responses built by hand: (label, status, headers, body keyword arguments).
ResponseSpec = tuple[str, int, dict[str, str], dict[str, Any]]
PAGE: dict[str, Any] = {"count": 2, "next": None, "previous": None, "results": [RESULTS[0]]}
PAGE_WITH_NEXT: dict[str, Any] = {**PAGE, "next": LISTING + "?limit=1&offset=1", "extra": 1}

GOOD_PAGES: tuple[ResponseSpec, ...] = (
    ("200 with a page", 200, {}, {"json": PAGE}),
    ("200 with a page and a next link", 200, {}, {"json": PAGE_WITH_NEXT}),
    ("201 with a page", 201, {}, {"json": PAGE}),
    ("203 with a page", 203, {}, {"json": PAGE}),
    ("200 with an empty page", 200, {}, {"json": {**PAGE, "results": []}}),
)
NOT_PAGES: tuple[ResponseSpec, ...] = (
    ("200, cut off", 200, {}, {"content": b'{"count": 300, "next": null, "resu'}),
    ("200, HTML", 200, {}, {"text": "<html><body>Sign in to the Wi-Fi</body></html>"}),
    ("200, empty body", 200, {}, {"content": b""}),
    ("204, no content", 204, {}, {}),
    ("200, the JSON []", 200, {}, {"json": []}),
    ("200, the JSON null", 200, {}, {"json": None}),
    ("200, results not a list", 200, {}, {"json": {**PAGE, "results": "many"}}),
    ("200, no results", 200, {}, {"json": {"count": 0, "next": None}}),
    ("200, no next", 200, {}, {"json": {"count": 0, "results": []}}),
    ("200, next a number", 200, {}, {"json": {**PAGE, "next": 2}}),
    ("200, not UTF-8", 200, {}, {"content": b'{"next": null, "results": ["\xff\xfe"]}'}),
)
TRANSIENT_CASES: tuple[ResponseSpec, ...] = (
    ("429, Retry-After: 5", 429, {"Retry-After": "5"}, {}),
    ("429, no Retry-After", 429, {}, {}),
    ("429, Retry-After: an IMF date", 429, {"Retry-After": date_text(12, "imf")}, {}),
    ("429, Retry-After: soon", 429, {"Retry-After": "soon"}, {}),
    ("503, Retry-After: 7", 503, {"Retry-After": "7"}, {}),
    ("503, Retry-After: an asctime date", 503, {"Retry-After": date_text(9, "asctime")}, {}),
    ("503, no Retry-After", 503, {}, {}),
    ("500", 500, {}, {}),
    ("502, Retry-After: 2", 502, {"Retry-After": "2"}, {}),
    ("504", 504, {}, {}),
    ("408, Retry-After: 1", 408, {"Retry-After": "1"}, {}),
    ("503, lowercase retry-after: 4", 503, {"retry-after": "4"}, {}),
)
PERMANENT_CASES: tuple[ResponseSpec, ...] = (
    ("400", 400, {}, {"json": {"detail": "bad request"}}),
    ("401", 401, {}, {}),
    ("403", 403, {}, {}),
    ("404", 404, {}, {"json": {"detail": "Not found."}}),
    ("404, Retry-After: 5", 404, {"Retry-After": "5"}, {}),
    ("410", 410, {}, {}),
    ("422", 422, {}, {}),
    ("501", 501, {}, {}),
    ("301", 301, {"Location": LISTING + "?limit=5"}, {}),
)


def make_response(spec: ResponseSpec) -> httpx.Response:
    _, status, headers, body = spec
    return httpx.Response(status, headers=headers, request=httpx.Request("GET", LISTING), **body)


# Fault scripts for the fixture: {offset: script}. Pages are 10 launches unless noted.
LOOPS: tuple[dict[int, Script], ...] = ({20: Fault.next_to(0)}, {20: Fault.next_to(10)})
SERVER_RETRY_AFTER: dict[int, Script] = {
    10: [Fault.rate_limited(2), Fault.rate_limited(7)],
    20: [Fault.unavailable(3)],
    30: [Fault.rate_limited(30)],  # above max_delay: waited as given
    40: [Fault.unavailable("soon")],  # malformed: the backoff
}
SERVER_DATES: dict[int, Script] = {
    10: [Fault.rate_limited(RetryAt(4, "imf"))],
    20: [Fault.rate_limited(RetryAt(4, "rfc850"))],
    30: [Fault.unavailable(RetryAt(4, "asctime"))],
}
#: (request number, httpx error): raised by the probes' transport instead of sending.
TRANSPORT_FAULTS: dict[int, str] = {
    2: "ConnectError",
    3: "ReadTimeout",
    5: "RemoteProtocolError",
    6: "ConnectTimeout",
    8: "ReadError",
    9: "PoolTimeout",
    11: "WriteError",
    12: "WriteTimeout",
}
#: Errors raised on every request, with RetryPolicy(max_attempts=2).
EXHAUSTING: tuple[str, ...] = ("ConnectError", "ReadTimeout", "RemoteProtocolError")


#: Launches in the listing paged 7 at a time (ten pages, the last one short).
BY_7 = 70
#: Listing lengths where the whole of it is not needed: the probes stay fast.
SMALL, SHORT = 100, 50
#: Where the failing runs of `failed_runs` fail (10 launches a page).
BAD_JSON_AT, UNAVAILABLE_AT = 70, 30
#: Launches already in the file before the first run (with one row not in the listing).
PREFILLED = 50


def httpx_error(name: str, request: httpx.Request) -> httpx.TransportError:
    kind = getattr(httpx, name)
    error: httpx.TransportError = kind(f"scripted {name}", request=request)
    return error


# ─────────────────────────────────────────────────────────────── probe helpers


def failure(exc: BaseException) -> JSON:
    """An error as an observation, with whether it is exactly one of etl's kinds."""
    seen = raised(exc)
    if type(exc) in ETL_KINDS:
        seen["etl"] = True
        if type(exc) is HttpStatus:
            seen["status"] = plain(getattr(exc, "status", None))
    return seen


def error_fields(value: Any) -> JSON:
    """What error_for_response returned: None, or the error's kind and fields (read from
    the attributes etl's kinds set, never from a method the learner could override)."""
    if value is None:
        return None
    if type(value) not in ETL_KINDS:
        return {"kind": "other", "type": safe_text(type(value), lambda t: t.__qualname__)}
    return {
        "kind": type(value).__name__,
        "status": plain(getattr(value, "status", None)),
        "retry_after": plain(getattr(value, "retry_after_secs", None)),
    }


def classify(ns: ModuleType, spec: ResponseSpec, now: datetime | None = NOW) -> JSON:
    def call() -> JSON:
        error_for_response = need(ns, "error_for_response")
        response = make_response(spec)
        returned = (
            error_for_response(response) if now is None else error_for_response(response, now)
        )
        return error_fields(returned)

    return attempt(call)


def retry_after(ns: ModuleType, value: str | None, now: datetime = NOW) -> JSON:
    return attempt(lambda: need(ns, "parse_retry_after")(value, now))


class Recorder(httpx.AsyncBaseTransport):
    """The fixture app in-process, noting each request as it starts: its offset, its number
    for that offset, the virtual time, and (when watching a file) the lines in it then."""

    def __init__(
        self,
        app: FixtureApp,
        clock: Clock,
        *,
        faults: Callable[[int], str | None] | None = None,
        watch: Path | None = None,
    ) -> None:
        self.inner = httpx.ASGITransport(app=app)
        self.clock = clock
        self.faults = faults
        self.watch = watch
        self.requests: list[list[Any]] = []
        self._per_offset: dict[int, int] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        number = len(self.requests) + 1
        if number > MAX_REQUESTS:
            raise Runaway(f"more than {MAX_REQUESTS} requests")
        raw = request.url.params.get("offset", "0")
        offset = int(raw) if raw.isascii() and raw.isdigit() else 0
        nth = self._per_offset[offset] = self._per_offset.get(offset, 0) + 1
        entry: list[Any] = [offset, nth, self.clock.now()]
        if self.watch is not None:
            entry.append(lines_in(self.watch))
        self.requests.append(entry)
        name = self.faults(number) if self.faults else None
        if name is not None:
            raise httpx_error(name, request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def lines_in(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def file_rows(path: Path) -> JSON:
    """Each line of the file as [id, net], or {"bad": text} for a line that is not a row."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        return [{"bad": safe_text(exc)}]
    rows: list[Any] = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
            rows.append([plain(row["id"]), plain(row["net"])])
        except (ValueError, KeyError, TypeError):
            rows.append({"bad": line[:80]})
    return rows


def source_options(ns: ModuleType, policy: dict[str, Any] | None, timeout: float | None) -> Any:
    options: dict[str, Any] = {}
    if policy is not None:
        options["policy"] = need(ns, "RetryPolicy")(**policy)
    if timeout is not None:
        options["page_timeout"] = timeout
    return options


def read_source(
    ns: ModuleType,
    script: Mapping[int, Script] | None = None,
    *,
    query: str = "?limit=10",
    policy: dict[str, Any] | None = None,
    timeout: float | None = None,
    results: Sequence[Mapping[str, Any]] | None = None,
    faults: Callable[[int], str | None] | None = None,
    detail: bool = False,
) -> JSON:
    """Iterate ``SpaceDevsSource(client, LISTING + query, ...).launches()`` against a fresh
    fixture: what it yielded (ids, or [id, net]), how it ended, each request, virtual time."""
    box: dict[str, Any] = {"items": [], "requests": []}

    async def go(clock: Clock) -> JSON:
        app = FixtureApp(script, results=results)
        transport = Recorder(app, clock, faults=faults)
        box["requests"] = transport.requests
        async with httpx.AsyncClient(transport=transport, base_url=IN_PROCESS_BASE_URL) as client:
            source = need(ns, "SpaceDevsSource")(
                client, LISTING + query, **source_options(ns, policy, timeout)
            )
            try:
                async for launch in source.launches():
                    box["items"].append(item(launch, detail))
            except Exception as exc:  # Runaway and cancellation are not Exceptions: they pass
                return {"end": failure(exc)}
        return {"end": {"ok": None}}

    seen = vrun(go)
    end = seen["ok"]["end"] if "ok" in seen else {k: seen[k] for k in seen if k in _OUTCOME}
    return {
        "end": end,
        "items": box["items"],
        "requests": box["requests"],
        "elapsed": seen["elapsed"],
        "blocking": seen["blocking"],
    }


_OUTCOME = ("raised", "message", "missing")


def item(launch: Any, detail: bool) -> JSON:
    if type(launch) is not Launch:
        return {"not_a_launch": plain(launch)}
    return [launch.id, launch.net] if detail else launch.id


def run_ingest(
    ns: ModuleType,
    path: Path | str,
    script: Mapping[int, Script] | None = None,
    *,
    query: str = "?limit=10",
    policy: dict[str, Any] | None = None,
    results: Sequence[Mapping[str, Any]] | None = None,
    watch: bool = False,
) -> JSON:
    """One run of ``ingest(source, path)`` with a fresh fixture, client and source: the
    report, each request (with the file's line count when it started, if `watch`), and the
    file's rows afterwards."""
    box: dict[str, Any] = {"requests": []}
    where = Path(path)

    async def go(clock: Clock) -> JSON:
        app = FixtureApp(script, results=results)
        transport = Recorder(app, clock, watch=where if watch else None)
        box["requests"] = transport.requests
        async with httpx.AsyncClient(transport=transport, base_url=IN_PROCESS_BASE_URL) as client:
            source = need(ns, "SpaceDevsSource")(
                client, LISTING + query, **source_options(ns, policy, None)
            )
            try:
                report = await need(ns, "ingest")(source, path)
            except Exception as exc:
                return {"end": failure(exc)}
        return {
            "end": {
                "ok": {
                    "fetched": plain(getattr(report, "fetched", None)),
                    "written": plain(getattr(report, "written", None)),
                }
            }
        }

    seen = vrun(go)
    end = seen["ok"]["end"] if "ok" in seen else {k: seen[k] for k in seen if k in _OUTCOME}
    return {"end": end, "requests": box["requests"], "rows": file_rows(where)}


def fresh_file(name: str) -> Path:
    """A path in the child's scratch folder, with nothing at it yet."""
    path = Path.cwd() / name
    path.unlink(missing_ok=True)
    return path


def in_a_child(work: Callable[[], JSON]) -> JSON:
    """Run `work` in a forked child process and return its observation: a separate process,
    sharing nothing with this one but the files on disk."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read_end)
            try:
                data = json.dumps(work()).encode()
            except BaseException as exc:
                data = json.dumps({"child": f"{type(exc).__name__}: {safe_text(exc)}"}).encode()
            while data:
                data = data[os.write(write_end, data) :]
        finally:
            os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + CHILD_SECONDS
    try:
        while True:
            left = deadline - time.monotonic()
            ready = select.select([read_end], [], [], max(left, 0.0))[0] if left > 0 else []
            if not ready:
                return {"child": f"did not finish within {CHILD_SECONDS:g} s"}
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    try:
        seen: JSON = json.loads(b"".join(chunks))
    except ValueError:
        return {"child": "its report was not JSON"}
    return seen


def prefill(path: Path, rows: Sequence[Launch]) -> None:
    """Write rows the way etl.JsonlSink does, as another run would have left them."""
    with path.open("a", encoding="utf-8") as out:
        out.writelines(row_to_json(row) + "\n" for row in rows)


def launches_from(results: Sequence[Mapping[str, Any]]) -> list[Launch]:
    return [Launch.from_api(result) for result in results]


#: A listing with repeats: the same launch twice on one page and again on the next.
def repeating_results() -> list[dict[str, Any]]:
    first = list(RESULTS[:10])
    return [*first[:5], first[0], *first[5:], first[1], RESULTS[10]]


# ─────────────────────────────────────────────────────────────── step 1: parse_retry_after


@PROBES.add("retry_after_reads_seconds_and_dates")
def seconds_and_dates(ns: ModuleType) -> JSON:
    away_from_utc()
    return {
        "seconds": [retry_after(ns, "120"), retry_after(ns, "45")],
        "dates": [retry_after(ns, date_text(s, form)) for s, form in DATE_OFFSETS[:3]],
        "past": retry_after(ns, date_text(-60, "imf")),
        "none": retry_after(ns, None),
    }


@PROBES.add("malformed_retry_after_is_none")
def malformed(ns: ModuleType) -> JSON:
    return {"values": [retry_after(ns, value) for value in MALFORMED + NOT_DELAY_SECONDS]}


@PROBES.add("retry_after_reads_all_three_date_forms")
def three_forms(ns: ModuleType) -> JSON:
    away_from_utc()
    return {
        "now": [retry_after(ns, date_text(s, form)) for s, form in DATE_OFFSETS],
        "fraction": [
            retry_after(ns, date_text(s, form, NOW_FRACTION), NOW_FRACTION)
            for s, form in DATE_OFFSETS
        ],
    }


@PROBES.add("delay_seconds_are_ascii_digits_only")
def delay_seconds(ns: ModuleType) -> JSON:
    return {
        "digits": [retry_after(ns, value) for value in DELAY_SECONDS],
        "not_digits": [retry_after(ns, value) for value in NOT_DELAY_SECONDS],
    }


@PROBES.add("retry_after_in_the_past_is_zero")
def in_the_past(ns: ModuleType) -> JSON:
    away_from_utc()
    return {
        "past": [retry_after(ns, date_text(s, form)) for s, form in PAST_OFFSETS],
        "zero": retry_after(ns, "0"),
        "long_ago": retry_after(ns, "Sun, 06 Nov 1994 08:49:37 GMT"),
    }


# ─────────────────────────────────────────────────────────────── step 2: error_for_response


@PROBES.add("maps_statuses_to_errors")
def statuses(ns: ModuleType) -> JSON:
    chosen = (GOOD_PAGES[0], TRANSIENT_CASES[0], TRANSIENT_CASES[6], TRANSIENT_CASES[4])
    return {"returned": [classify(ns, spec) for spec in (*chosen, PERMANENT_CASES[3])]}


@PROBES.add("bad_json_is_a_parse_error")
def bad_json(ns: ModuleType) -> JSON:
    return {"returned": [classify(ns, spec) for spec in NOT_PAGES[:5]]}


@PROBES.add("every_2xx_page_is_none")
def good_pages(ns: ModuleType) -> JSON:
    return {"returned": [classify(ns, spec) for spec in GOOD_PAGES]}


@PROBES.add("bodies_that_are_not_a_page_are_parse_errors")
def not_pages(ns: ModuleType) -> JSON:
    return {"returned": [classify(ns, spec) for spec in NOT_PAGES]}


@PROBES.add("transient_statuses_carry_retry_after")
def transient(ns: ModuleType) -> JSON:
    away_from_utc()
    return {"returned": [classify(ns, spec) for spec in TRANSIENT_CASES]}


@PROBES.add("other_statuses_are_permanent")
def permanent(ns: ModuleType) -> JSON:
    return {"returned": [classify(ns, spec) for spec in PERMANENT_CASES]}


@PROBES.add("now_defaults_to_the_current_utc_time")
def default_now(ns: ModuleType) -> JSON:
    away_from_utc()
    later = http_date(datetime.now(UTC) + timedelta(seconds=60))
    spec: ResponseSpec = ("429, Retry-After 60 s from now", 429, {"Retry-After": later}, {})
    return {"returned": classify(ns, spec, now=None)}


# ─────────────────────────────────────────────────────────────── step 3: the source


@PROBES.add("follows_next_until_null")
def follows_next(ns: ModuleType) -> JSON:
    return {
        "by_100": read_source(ns, query="?limit=100"),
        "by_7": read_source(ns, query="?limit=7", results=RESULTS[:BY_7]),
    }


@PROBES.add("retries_503_then_continues")
def retries_503(ns: ModuleType) -> JSON:
    return read_source(ns, {100: [Fault.unavailable(), Fault.unavailable()]}, query="?limit=100")


@PROBES.add("honors_retry_after_on_429")
def honors_429(ns: ModuleType) -> JSON:
    script: dict[int, Script] = {100: [Fault.rate_limited(5)], 200: [Fault.rate_limited(12)]}
    return read_source(ns, script, query="?limit=100")


@PROBES.add("page_deadline_cuts_a_hang")
def deadline(ns: ModuleType) -> JSON:
    script: dict[int, Script] = {100: [Fault.hang(600)]}
    return {
        "ten": read_source(ns, script, query="?limit=100", timeout=10.0),
        "four": read_source(ns, script, query="?limit=100", timeout=4.0),
    }


@PROBES.add("follows_next_with_any_page_size")
def any_page_size(ns: ModuleType) -> JSON:
    return {
        "default": read_source(ns, query="", results=RESULTS[:SHORT]),
        "clamped": read_source(ns, query="?limit=1000"),
        "by_1": read_source(ns, query="?limit=1", results=RESULTS[:5]),
    }


@PROBES.add("empty_last_page_ends_the_run")
def empty_last_page(ns: ModuleType) -> JSON:
    last = SHORT - 10
    return read_source(ns, {last: [Fault.next_to(SHORT)]}, results=RESULTS[:SHORT])


@PROBES.add("next_leading_back_raises_parse_error")
def leading_back(ns: ModuleType) -> JSON:
    return {"runs": [read_source(ns, script, results=RESULTS[:40]) for script in LOOPS]}


@PROBES.add("retry_after_from_the_server_is_honoured")
def server_retry_after(ns: ModuleType) -> JSON:
    return read_source(ns, SERVER_RETRY_AFTER, results=RESULTS[:60])


@PROBES.add("retry_after_dates_from_the_server")
def server_dates(ns: ModuleType) -> JSON:
    away_from_utc()
    return read_source(ns, SERVER_DATES, results=RESULTS[:40])


@PROBES.add("hang_trips_the_page_deadline")
def hang_twice(ns: ModuleType) -> JSON:
    return read_source(ns, {10: [Fault.hang(), Fault.hang()]}, timeout=2.5, results=RESULTS[:30])


@PROBES.add("hang_every_time_raises_request_timeout")
def hang_always(ns: ModuleType) -> JSON:
    return read_source(ns, {0: Fault.hang()}, policy={"max_attempts": 3}, results=RESULTS[:10])


@PROBES.add("malformed_json_is_not_retried")
def malformed_json(ns: ModuleType) -> JSON:
    html = Fault.bad_json(b"<html>Service temporarily unavailable</html>")
    return {
        "cut_off": read_source(ns, {10: Fault.bad_json()}, results=RESULTS[:40]),
        "html": read_source(ns, {30: html}, results=RESULTS[:40]),
    }


@PROBES.add("client_error_mid_run_is_not_retried")
def client_error(ns: ModuleType) -> JSON:
    return {
        "not_found": read_source(ns, {20: Fault.error(404)}, results=RESULTS[:40]),
        "gone": read_source(ns, {0: Fault.error(410, retry_after="5")}, results=RESULTS[:10]),
    }


@PROBES.add("transport_errors_become_etl_errors")
def transport_errors(ns: ModuleType) -> JSON:
    return {
        "recovered": read_source(ns, query="?limit=50", faults=TRANSPORT_FAULTS.get),
        "exhausted": [
            read_source(
                ns,
                policy={"max_attempts": 2},
                faults=lambda _n, name=name: name,
                results=RESULTS[:10],
            )
            for name in EXHAUSTING
        ],
    }


@PROBES.add("page_changed_between_fetches_is_read_as_sent")
def changed_between_fetches(ns: ModuleType) -> JSON:
    script: dict[int, Script] = {0: [Fault.unavailable(), Fault.revised()]}
    return read_source(ns, script, results=RESULTS[:20], detail=True)


# ─────────────────────────────────────────────────────────────── step 4: ingest


@PROBES.add("second_run_writes_zero_new_rows")
def second_run(ns: ModuleType) -> JSON:
    path = fresh_file("twice.jsonl")
    by_7 = fresh_file("twice_by_7.jsonl")
    return {
        "runs": [
            run_ingest(ns, path, query="?limit=25", results=RESULTS[:SMALL]) for _ in range(2)
        ],
        "by_7": [
            run_ingest(ns, str(by_7), query="?limit=7", results=RESULTS[:BY_7]) for _ in range(2)
        ],
    }


@PROBES.add("failure_mid_run_keeps_earlier_pages")
def failure_mid_run(ns: ModuleType) -> JSON:
    path = fresh_file("stopped.jsonl")
    return {
        "failed": run_ingest(ns, path, {20: Fault.error(404)}, results=RESULTS[:SMALL]),
        "rerun": run_ingest(ns, path, results=RESULTS[:SMALL]),
    }


@PROBES.add("two_processes_write_once")
def two_processes(ns: ModuleType) -> JSON:
    path = fresh_file("two_processes.jsonl")

    def one_run() -> JSON:
        return run_ingest(ns, path, query="?limit=25", results=RESULTS[:SMALL])

    return {"runs": [in_a_child(one_run) for _ in range(2)]}


@PROBES.add("pages_are_written_as_they_arrive")
def as_they_arrive(ns: ModuleType) -> JSON:
    return run_ingest(ns, fresh_file("arriving.jsonl"), results=RESULTS[:SMALL], watch=True)


@PROBES.add("failed_run_keeps_its_pages_and_the_rerun_finishes")
def failed_runs(ns: ModuleType) -> JSON:
    bad = fresh_file("bad_json.jsonl")
    unavailable = fresh_file("unavailable.jsonl")
    listing = RESULTS[:SMALL]
    return {
        "bad_json": [
            run_ingest(ns, bad, {BAD_JSON_AT: Fault.bad_json()}, results=listing),
            run_ingest(ns, bad, results=listing),
        ],
        "unavailable": [
            run_ingest(
                ns,
                unavailable,
                {UNAVAILABLE_AT: Fault.unavailable()},
                policy={"max_attempts": 2},
                results=listing,
            ),
            run_ingest(ns, unavailable, results=listing),
        ],
    }


def stranger() -> Launch:
    first = launches_from(RESULTS[:1])[0]
    return dataclasses.replace(first, id="not-in-the-listing", name="Vostok 1")


@PROBES.add("keys_on_disk_come_from_the_file")
def keys_on_disk(ns: ModuleType) -> JSON:
    path = fresh_file("prefilled.jsonl")
    prefill(path, [*launches_from(RESULTS[:PREFILLED]), stranger()])
    return {"run": run_ingest(ns, path, query="?limit=25", results=RESULTS[:SMALL])}


@PROBES.add("written_counts_rows_that_reached_the_file")
def written_counts(ns: ModuleType) -> JSON:
    path = fresh_file("repeating.jsonl")
    return run_ingest(ns, path, results=repeating_results())


@PROBES.add("revised_launch_is_written_once_more")
def revised(ns: ModuleType) -> JSON:
    path = fresh_file("revised.jsonl")
    listing = RESULTS[:SMALL]
    return {
        "runs": [
            run_ingest(ns, path, query="?limit=50", results=listing),
            run_ingest(ns, path, {0: [Fault.revised()]}, query="?limit=50", results=listing),
            run_ingest(ns, path, {0: [Fault.revised()]}, query="?limit=50", results=listing),
        ]
    }
