"""Build 05's probes: run in the grading child, next to the learner's exported answers.

Each probe calls the learner's code on inputs defined here (Retry-After values, responses built by
hand, fault scripts for the fixture server, files to ingest into) and returns what it saw as plain
JSON: values of exact types, errors by class name and by the class they really are, request times on
a virtual clock; the files ingested into are kept (`grader.suites.observe.keep`) for the parent to
read itself. No expected value lives in this file: the judges (``judges.py``, in the parent) compute
those from the specs and the fixture's own data. Every probe is seeded: the fixture serves the
launches in an order drawn per submission from its own exported text (`listing`), and the parsing
probes add values drawn the same way (``draw_*``), so the parent, drawing them again, judges what
these inputs must give, not what some other run reported.

Build 05's setup cell loads build 03's seams with `workbook.siblings.load_sibling`. Graded here,
the export has no notebook next to it, so importing this file registers the reference seams of
build 03 (``builds/build03/hidden/seams.py``) for that: each build is graded alone, and an
unfinished build 03 costs nothing here. Probing the same answers twice gives the same
observations, apart from ``real`` seconds and the few waits that depend on the wall clock
(HTTP dates have whole seconds), which the judges read with that second of slack.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import random
import select
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

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
    DateForm,
    Fault,
    FixtureApp,
    RetryAt,
    Script,
    http_date,
)
from grader.suites.observe import (
    JSON,
    Clock,
    Probes,
    attempt,
    file_state,
    keep,
    need,
    plain,
    raised,
    safe_text,
    scratch_path,
    source_of,
    suite_salt,
    tick,
    vrun,
)
from workbook.shared.export import run_exported
from workbook.shared.modules import fresh_module, registered
from workbook.siblings import use_reference

PROBES = Probes(suite_salt(__file__))
#: Build 03's reference seams: ``builds/build03/hidden/seams.py``, beside this build's folder.
SEAMS = Path(__file__).resolve().parents[2] / "build03" / "hidden" / "seams.py"
use_reference("03", SEAMS)

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
DATE_OFFSETS: tuple[tuple[int, DateForm], ...] = (
    (30, "imf"),
    (30, "rfc850"),
    (30, "asctime"),
    (1, "imf"),
    (3600, "asctime"),
    (86_400 * 40, "rfc850"),
    (7, "asctime"),
)
PAST_OFFSETS: tuple[tuple[int, DateForm], ...] = (
    (-60, "imf"),
    (-1, "rfc850"),
    (-86_400, "asctime"),
)
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
    "Sun, 06 Nov 99999999999 08:49:37 GMT",  # parsedate_to_datetime raises OverflowError
)


def date_text(offset: int, form: DateForm, now: datetime = NOW) -> str:
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
    ("200 with only results and next", 200, {}, {"json": {"next": None, "results": []}}),
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
    ("200, nested past the recursion limit", 200, {}, {"content": b"[" * 100_000 + b"]" * 100_000}),
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
    # 3xx is not 2xx even with a page for a body: `< 300`, not `<= 300`.
    ("300, a page for a body", 300, {}, {"json": {"count": 0, "next": None, "results": []}}),
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


#: Launches in the listing paged 7 at a time (six pages, the last one short).
BY_7 = 38
#: Listing lengths where the whole of it is not needed: the probes stay fast.
SMALL, SHORT = 40, 30
#: Where the failing runs of `failed_runs` fail (10 launches a page).
BAD_JSON_AT, UNAVAILABLE_AT = 30, 20
#: The listing the retry probes page through 10 at a time: pages at offsets 0, 10 and 20.
RETRIED = 30
#: Launches already in the file before the first run (with one row not in the listing).
PREFILLED = 20


def always(name: str) -> Callable[[int], str | None]:
    """A transport fault script raising `name` on every request."""
    return lambda _number: name


def httpx_error(name: str, request: httpx.Request) -> httpx.TransportError:
    kind = getattr(httpx, name)
    error: httpx.TransportError = kind(f"scripted {name}", request=request)
    return error


# ─────────────────────────────────────────────────────────────── probe helpers


def failure(exc: BaseException) -> JSON:
    """An error as an observation (its class name and the etl kinds it really is), with the
    status of an HttpStatus."""
    seen = raised(exc)
    if isinstance(exc, HttpStatus):
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


#: The file each recorder watches, by the recorder's id (a str made without pathlib).
WATCHED: dict[int, str | None] = {}


class Recorder(httpx.AsyncBaseTransport):
    """The fixture app in-process, noting each request as it starts: its offset, its number
    for that offset, the virtual time, and (when watching a file) its state then: the
    parent puts its ledger's time and line count in place of the child's."""

    def __init__(
        self,
        app: FixtureApp,
        clock: Clock,
        *,
        faults: Callable[[int], str | None] | None = None,
        watch: str | None = None,
    ) -> None:
        self.inner = httpx.ASGITransport(app=app)
        self.clock = clock
        self.faults = faults
        # Kept here, not on the recorder a learner's code can reach through its client (and
        # point at a decoy, or at a state function of its own): hunting this module down
        # with gc is the residual the README names.
        WATCHED[id(self)] = watch
        self.requests: list[list[Any]] = []
        self._per_offset: dict[int, int] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        number = len(self.requests) + 1
        if number > MAX_REQUESTS:
            raise Runaway(f"more than {MAX_REQUESTS} requests")
        raw = request.url.params.get("offset", "0")
        offset = int(raw) if raw.isascii() and raw.isdigit() else 0
        nth = self._per_offset[offset] = self._per_offset.get(offset, 0) + 1
        # The parent takes the request (offset, number, time) from its ledger, and counts the
        # file's lines itself, in the kept file, up to the size and digest the file had now.
        watch = WATCHED.get(id(self))
        tick("request", value=[offset, nth, file_state(watch) if watch is not None else None])
        entry: list[Any] = [offset, nth, self.clock.now()]
        if watch is not None:
            entry.append(None)  # the lines in the file then: counted by the parent
        self.requests.append(entry)
        name = self.faults(number) if self.faults else None
        if name is not None:
            raise httpx_error(name, request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


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
    results: Sequence[Mapping[str, Any]],
    faults: Callable[[int], str | None] | None = None,
    detail: bool = False,
    runs: int = 1,
    clock: Callable[[], datetime] | None = None,
) -> JSON:
    """Iterate ``SpaceDevsSource(client, LISTING + query, ...).launches()`` against a fresh
    fixture (`runs` times over, the same source object): what it yielded (ids, or [id, net]),
    how it ended, each request, virtual time. `clock`: the fixture's wall clock (its Date
    headers), instead of the real one."""
    box: dict[str, Any] = {"items": [], "requests": []}
    wall = clock or (lambda: datetime.now(UTC))

    async def go(virtual: Clock) -> JSON:
        app = FixtureApp(script, results=results, clock=wall)
        transport = Recorder(app, virtual, faults=faults)
        box["requests"] = transport.requests
        async with httpx.AsyncClient(transport=transport, base_url=IN_PROCESS_BASE_URL) as client:
            source = need(ns, "SpaceDevsSource")(
                client, LISTING + query, **source_options(ns, policy, timeout)
            )
            try:
                for _ in range(runs):
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
        "vrun": seen["vrun"],  # the parent puts its ledger's times in place of these
    }


_OUTCOME = ("raised", "message", "missing", "is")


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
    results: Sequence[Mapping[str, Any]],
    watch: str | None = None,
    name: str,
) -> JSON:
    """One run of ``ingest(source, path)`` with a fresh fixture, client and source: the
    report, each request (with the state of the file `watch` names in the scratch folder
    when it started: `path`'s own name), and the file afterwards, kept as `name`."""
    box: dict[str, Any] = {"requests": []}
    where = Path(path)

    async def go(clock: Clock) -> JSON:
        app = FixtureApp(script, results=results)
        transport = Recorder(app, clock, watch=scratch_path(watch) if watch else None)
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
    return {
        "end": end,
        "requests": box["requests"],
        "file": keep(where, name),
        "vrun": seen["vrun"],
    }


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


def repeating_results(listing: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A listing with repeats: the same launch twice on one page and again on the next."""
    first = list(listing[:10])
    return [*first[:5], first[0], *first[5:], first[1], listing[10]]


# ─────────────────────────────────────────────────────────────── seeded inputs (shared)


def listing(rng: random.Random) -> list[dict[str, Any]]:
    """The fixture's launches in an order drawn for the submission: what its listing serves."""
    return [RESULTS[i] for i in rng.sample(range(len(RESULTS)), len(RESULTS))]


def draw_delay(rng: random.Random) -> str:
    """A delay-seconds value: ASCII digits."""
    return str(rng.randint(1, 10**6))


def draw_dates(rng: random.Random, count: int, low: int, high: int) -> list[tuple[int, DateForm]]:
    """(seconds from now, form) pairs in ``[low, high]``."""
    forms: tuple[DateForm, ...] = ("imf", "rfc850", "asctime")
    return [(rng.randint(low, high), rng.choice(forms)) for _ in range(count)]


def draw_now(rng: random.Random) -> datetime:
    """A `now` with a fraction of a second, within about 30 years of 2024 (RFC 850 dates
    have two-digit years, read as 1969 to 2068)."""
    seconds = rng.randint(-(10**9), 10**9)
    return NOW + timedelta(seconds=seconds, microseconds=rng.randrange(10**6))


#: How many inputs of one kind a probe draws, in two runs of these bounds: where every right
#: answer is the same (None, ParseError, 0.0), how many there are in each run is what binds a
#: report to these inputs (another submission's report has both counts right ~1 in 12,000).
DRAWN = (10, 120)


def draw_malformed(rng: random.Random) -> str:
    """A Retry-After that is neither form (a decimal, a sign, a unit, words, an ISO date)."""
    number = rng.randint(1, 10**5)
    return rng.choice(
        (
            f"{number}.{rng.randint(0, 99)}",
            f"-{number}",
            f"+{number}",
            f"{number}s",
            f"{number} seconds",
            f"in {number} minutes",
            f"2024-03-01T12:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z",
            "".join(rng.choice("soonlatermañana") for _ in range(rng.randint(1, 12))),
        )
    )


def draw_good_page(rng: random.Random) -> ResponseSpec:
    """A 2xx holding a page: a few of the fixture's launches, a next link or none, and
    fields a page may carry besides."""
    status = rng.choice((200, 201, 202, 203, 206))
    page: dict[str, Any] = {
        "count": rng.randint(0, 10**4),
        "next": None if rng.random() < 0.5 else f"{LISTING}?offset={rng.randint(1, 999)}",
        "results": [RESULTS[i] for i in rng.sample(range(len(RESULTS)), rng.randint(0, 3))],
    }
    if rng.random() < 0.5:
        page[f"extra_{rng.randint(0, 99)}"] = rng.randint(0, 99)
    return (f"{status} with a drawn page", status, {}, {"json": page})


def draw_not_page(rng: random.Random) -> ResponseSpec:
    """A 2xx whose body is no page: cut off, another JSON value, no results, a bad next."""
    _, status, _, body = draw_good_page(rng)
    text = json.dumps(body["json"], separators=(",", ":"))
    how = rng.choice(("cut", "value", "no results", "next", "results"))
    if how == "cut":  # every proper prefix of a JSON object's text is no JSON at all
        return (
            f"{status}, cut off",
            status,
            {},
            {"content": text[: rng.randint(1, len(text) - 1)]},
        )
    if how == "value":
        value: JSON = rng.choice(([], None, rng.randint(0, 99), "page", [{"results": []}]))
        return (f"{status}, another JSON value", status, {}, {"json": value})
    page = dict(body["json"])
    if how == "no results":
        del page["results"]
    elif how == "next":
        page["next"] = rng.randint(0, 99)
    else:
        page["results"] = "many"
    return (f"{status}, {how} wrong", status, {}, {"json": page})


def drawn(rng: random.Random, draw: Callable[[random.Random], Any]) -> list[Any]:
    return [draw(rng) for _ in range(rng.randint(*DRAWN))]


def alike(
    rng: random.Random, fixed: Sequence[ResponseSpec], draw: Callable[[random.Random], Any]
) -> tuple[list[ResponseSpec], list[ResponseSpec]]:
    """The fixed responses and a first run of drawn ones; a second run of drawn ones."""
    return [*fixed, *drawn(rng, draw)], drawn(rng, draw)


def classify_alike(
    ns: ModuleType,
    rng: random.Random,
    fixed: Sequence[ResponseSpec],
    draw: Callable[[random.Random], Any],
) -> JSON:
    cases, more = alike(rng, fixed, draw)
    return {
        "returned": [classify(ns, spec) for spec in cases],
        "more": [classify(ns, spec) for spec in more],
    }


def draw_transient(rng: random.Random, dates: bool = True) -> ResponseSpec:
    """A transient status with a drawn Retry-After: seconds, or (`dates`) a date half the time
    (only where the test's fixed responses hold dates too)."""
    status = rng.choice((429, 503, 502, 500, 504, 408))
    date = dates and rng.random() < 0.5
    header = date_text(rng.randint(1, 9999), "imf") if date else draw_delay(rng)
    return (f"{status}, Retry-After: a drawn value", status, {"Retry-After": header}, {})


def draw_permanent(rng: random.Random) -> ResponseSpec:
    status = rng.choice([s for s in range(400, 600) if s not in (408, 429, 500, 502, 503, 504)])
    return (f"{status}, a drawn status", status, {}, {})


# ─────────────────────────────────────────────────────────────── step 1: parse_retry_after


@PROBES.seeded("retry_after_reads_seconds_and_dates")
def seconds_and_dates(ns: ModuleType, rng: random.Random) -> JSON:
    away_from_utc()
    delay, dates = draw_delay(rng), draw_dates(rng, 2, 1, 10**6)
    return {
        "seconds": [retry_after(ns, v) for v in ("120", "45", delay)],
        "dates": [retry_after(ns, date_text(s, form)) for s, form in (*DATE_OFFSETS[:3], *dates)],
        "past": retry_after(ns, date_text(-60, "imf")),
        "none": retry_after(ns, None),
    }


@PROBES.seeded("malformed_retry_after_is_none")
def malformed(ns: ModuleType, rng: random.Random) -> JSON:
    values = [*MALFORMED, *NOT_DELAY_SECONDS, *drawn(rng, draw_malformed)]
    more = drawn(rng, draw_malformed)
    return {
        "values": [retry_after(ns, value) for value in values],
        "more": [retry_after(ns, value) for value in more],
    }


@PROBES.seeded("retry_after_reads_all_three_date_forms")
def three_forms(ns: ModuleType, rng: random.Random) -> JSON:
    away_from_utc()
    now, dates = draw_now(rng), draw_dates(rng, 6, 0, 10**7)
    naive_now, naive_dates = naive_inputs(rng)
    return {
        "now": [retry_after(ns, date_text(s, form)) for s, form in DATE_OFFSETS],
        "fraction": [
            retry_after(ns, date_text(s, form, NOW_FRACTION), NOW_FRACTION)
            for s, form in DATE_OFFSETS
        ],
        "drawn": [retry_after(ns, date_text(s, form, now), now) for s, form in dates],
        "naive_now": [
            retry_after(ns, date_text(s, form, naive_now), naive_now.replace(tzinfo=None))
            for s, form in naive_dates
        ],
    }


def naive_inputs(rng: random.Random) -> tuple[datetime, list[tuple[int, DateForm]]]:
    """A `now` (given naive, meaning UTC as every HTTP date does) and dates after it, in all
    three forms: a naive `now` minus an aware date is a TypeError unless one is made aware."""
    forms: tuple[DateForm, ...] = ("imf", "rfc850", "asctime")
    return draw_now(rng), [(rng.randint(1, 10**6), form) for form in forms]


@PROBES.seeded("delay_seconds_are_ascii_digits_only")
def delay_seconds(ns: ModuleType, rng: random.Random) -> JSON:
    digits = (*DELAY_SECONDS, draw_delay(rng), f" {draw_delay(rng)} ")
    return {
        "digits": [retry_after(ns, value) for value in digits],
        "not_digits": [retry_after(ns, value) for value in NOT_DELAY_SECONDS],
    }


@PROBES.seeded("retry_after_in_the_past_is_zero")
def in_the_past(ns: ModuleType, rng: random.Random) -> JSON:
    away_from_utc()
    past = draw_dates(rng, rng.randint(*DRAWN), -(10**8), -1)
    more = draw_dates(rng, rng.randint(*DRAWN), -(10**8), -1)
    return {
        "past": [retry_after(ns, date_text(s, form)) for s, form in (*PAST_OFFSETS, *past)],
        "more": [retry_after(ns, date_text(s, form)) for s, form in more],
        "zero": retry_after(ns, "0"),
        "long_ago": retry_after(ns, "Sun, 06 Nov 1994 08:49:37 GMT"),
    }


# ─────────────────────────────────────────────────────────────── step 2: error_for_response

STATUS_CASES = (
    GOOD_PAGES[0],
    TRANSIENT_CASES[0],
    TRANSIENT_CASES[6],
    TRANSIENT_CASES[4],
    PERMANENT_CASES[3],
)


@PROBES.seeded("maps_statuses_to_errors")
def statuses(ns: ModuleType, rng: random.Random) -> JSON:
    cases = (*STATUS_CASES, draw_transient(rng, dates=False), draw_permanent(rng))
    return {"returned": [classify(ns, spec) for spec in cases]}


@PROBES.seeded("bad_json_is_a_parse_error")
def bad_json(ns: ModuleType, rng: random.Random) -> JSON:
    return classify_alike(ns, rng, NOT_PAGES[:5], draw_not_page)


@PROBES.seeded("every_2xx_page_is_none")
def good_pages(ns: ModuleType, rng: random.Random) -> JSON:
    return classify_alike(ns, rng, GOOD_PAGES, draw_good_page)


@PROBES.seeded("bodies_that_are_not_a_page_are_parse_errors")
def not_pages(ns: ModuleType, rng: random.Random) -> JSON:
    return classify_alike(ns, rng, NOT_PAGES, draw_not_page)


@PROBES.seeded("transient_statuses_carry_retry_after")
def transient(ns: ModuleType, rng: random.Random) -> JSON:
    away_from_utc()
    cases = (*TRANSIENT_CASES, draw_transient(rng), draw_transient(rng))
    return {"returned": [classify(ns, spec) for spec in cases]}


@PROBES.seeded("other_statuses_are_permanent")
def permanent(ns: ModuleType, rng: random.Random) -> JSON:
    cases = (*PERMANENT_CASES, draw_permanent(rng), draw_permanent(rng))
    return {"returned": [classify(ns, spec) for spec in cases]}


def default_now_offset(rng: random.Random) -> int:
    return rng.randint(30, 100_000)


@PROBES.seeded("now_defaults_to_the_current_utc_time")
def default_now(ns: ModuleType, rng: random.Random) -> JSON:
    """On a stopped clock, so every wait is the same on every run: the module run again and
    called at the whole second the date counts from; then run again while the clock reads a
    day earlier and called at that second, which a default read at load time cannot pass."""
    away_from_utc()
    offset = default_now_offset(rng)
    at = datetime.now(UTC).replace(microsecond=0)
    later = http_date(at + timedelta(seconds=offset))
    spec: ResponseSpec = ("429, Retry-After a date from now", 429, {"Retry-After": later}, {})

    def called(loaded_at: datetime) -> JSON:
        _Stopped.AT[0] = loaded_at
        try:
            module = run_again(ns, _Stopped)
            _Stopped.AT[0] = at
            return classify(module, spec, now=None)
        finally:
            _Stopped.AT[0] = None

    return {
        "returned": attempt(lambda: called(at)),
        "loaded_a_day_ago": attempt(lambda: called(at - timedelta(days=1))),
    }


class _Stopped(datetime):
    """`datetime` whose ``now`` (and ``utcnow``) read the instant `AT` while it is set, as
    instances of this class (what ``datetime`` names in a module run under it)."""

    AT: ClassVar[list[datetime | None]] = [None]

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        at = cls.AT[0]
        if at is None:
            return super().now(tz)
        return cls.fromtimestamp(at.timestamp(), tz)  # naive: local time, as datetime.now()

    @classmethod
    def utcnow(cls) -> Any:
        at = cls.AT[0]
        when = datetime.now(UTC) if at is None else at
        return cls.fromtimestamp(when.timestamp(), UTC).replace(tzinfo=None)


def run_again(ns: ModuleType, clock: type[datetime]) -> ModuleType:
    """The submission's module run again, its ``from datetime import datetime`` (or
    ``datetime.datetime``) given `clock`, a `datetime` whose ``now`` the probe controls."""
    text = source_of(ns)
    if text is None:
        raise RuntimeError("the submission's source is gone")
    shim = fresh_module("datetime")
    shim.__dict__.update(vars(sys.modules["datetime"]))
    shim.datetime = clock  # type: ignore[attr-defined]
    again = fresh_module(f"{ns.__name__}_again", f"{ns.__file__}#again")
    with registered(shim):
        run_exported(again, text, again.__file__ or "")
    return again


# ─────────────────────────────────────────────────────────────── step 3: the source


@PROBES.seeded("follows_next_until_null")
def follows_next(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)
    return {
        "by_100": read_source(ns, query="?limit=100", results=served),
        "by_7": read_source(ns, query="?limit=7", results=served[:BY_7]),
    }


@PROBES.seeded("retries_503_then_continues")
def retries_503(ns: ModuleType, rng: random.Random) -> JSON:
    script: dict[int, Script] = {10: [Fault.unavailable(), Fault.unavailable()]}
    return read_source(ns, script, results=listing(rng)[:RETRIED])


@PROBES.seeded("honors_retry_after_on_429")
def honors_429(ns: ModuleType, rng: random.Random) -> JSON:
    script: dict[int, Script] = {10: [Fault.rate_limited(5)], 20: [Fault.rate_limited(12)]}
    return read_source(ns, script, results=listing(rng)[:RETRIED])


@PROBES.seeded("page_deadline_cuts_a_hang")
def deadline(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)[:RETRIED]
    script: dict[int, Script] = {10: [Fault.hang(600)]}
    return {
        "ten": read_source(ns, script, timeout=10.0, results=served),
        "four": read_source(ns, script, timeout=4.0, results=served),
    }


@PROBES.seeded("follows_next_with_any_page_size")
def any_page_size(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)
    return {
        "default": read_source(ns, query="", results=served[:SHORT]),
        "clamped": read_source(ns, query="?limit=1000", results=served),
        "by_1": read_source(ns, query="?limit=1", results=served[:5]),
    }


@PROBES.seeded("empty_last_page_ends_the_run")
def empty_last_page(ns: ModuleType, rng: random.Random) -> JSON:
    last = SHORT - 10
    return read_source(ns, {last: [Fault.next_to(SHORT)]}, results=listing(rng)[:SHORT])


def empty_page_detour() -> dict[int, Script]:
    """The page at offset 10 links past the end, to an empty page whose next leads back to
    offset 20: a page with no results that is not the last."""
    far = SHORT + 100
    return {10: [Fault.next_to(far)], far: [Fault.next_to(20)]}


@PROBES.seeded("empty_page_with_a_next_is_followed")
def empty_page_with_next(ns: ModuleType, rng: random.Random) -> JSON:
    return read_source(ns, empty_page_detour(), results=listing(rng)[:SHORT])


@PROBES.seeded("a_source_reads_again_from_the_start")
def read_twice(ns: ModuleType, rng: random.Random) -> JSON:
    return read_source(ns, query="?limit=7", results=listing(rng)[:SHORT], runs=2)


def cancel_delay(rng: random.Random) -> float:
    """When the caller cancels the run: while the page at offset 10 hangs (deadline 600 s)."""
    return rng.randint(1, 500) / 2


@PROBES.seeded("cancelled_run_is_not_retried")
def cancelled_run(ns: ModuleType, rng: random.Random) -> JSON:
    """Read a listing whose second page never answers, and cancel the reader after
    `cancel_delay` seconds: the run must end cancelled, with no request after the hang."""
    served, cancel_at = listing(rng)[:SHORT], cancel_delay(rng)
    box: dict[str, Any] = {"items": [], "requests": []}

    async def go(clock: Clock) -> JSON:
        transport = Recorder(FixtureApp({10: Fault.hang()}, results=served), clock)
        box["requests"] = transport.requests
        async with httpx.AsyncClient(transport=transport, base_url=IN_PROCESS_BASE_URL) as client:
            source = need(ns, "SpaceDevsSource")(
                client, LISTING + "?limit=10", **source_options(ns, None, 600.0)
            )

            async def read() -> None:
                async for launch in source.launches():
                    box["items"].append(item(launch, False))

            task = asyncio.ensure_future(read())
            await asyncio.sleep(cancel_at)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                return {"end": {"cancelled": True}}
            except Exception as exc:
                return {"end": failure(exc)}
        return {"end": {"ok": None}}

    seen = vrun(go)
    end = seen["ok"]["end"] if "ok" in seen else {k: seen[k] for k in seen if k in _OUTCOME}
    return {"end": end, "items": box["items"], "requests": box["requests"], "vrun": seen["vrun"]}


@PROBES.seeded("next_leading_back_raises_parse_error")
def leading_back(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)[:40]
    return {"runs": [read_source(ns, script, results=served) for script in LOOPS]}


@PROBES.seeded("retry_after_from_the_server_is_honoured")
def server_retry_after(ns: ModuleType, rng: random.Random) -> JSON:
    return read_source(ns, SERVER_RETRY_AFTER, results=listing(rng)[:60])


@PROBES.seeded("retry_after_dates_from_the_server")
def server_dates(ns: ModuleType, rng: random.Random) -> JSON:
    """On a stopped clock: the module and the fixture's Date header read one instant (a whole
    second), so every wait from a date is the same on every run. On the real clock a
    default `now` read when the module loaded (the bug of the test before) passed here or
    not by whether a second boundary fell between the load and this probe."""
    away_from_utc()
    at = datetime.now(UTC).replace(microsecond=0)
    _Stopped.AT[0] = at
    try:
        stopped = run_again(ns, _Stopped)
        return read_source(stopped, SERVER_DATES, results=listing(rng)[:40], clock=lambda: at)
    finally:
        _Stopped.AT[0] = None


@PROBES.seeded("hang_trips_the_page_deadline")
def hang_twice(ns: ModuleType, rng: random.Random) -> JSON:
    script: dict[int, Script] = {10: [Fault.hang(), Fault.hang()]}
    return read_source(ns, script, timeout=2.5, results=listing(rng)[:30])


def hang_inputs(rng: random.Random) -> tuple[int, float]:
    """max_attempts and page_timeout of the drawn run of the silent first page."""
    return rng.randint(2, 5), float(rng.randint(2, 40)) / 2


@PROBES.seeded("hang_every_time_raises_request_timeout")
def hang_always(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)[:10]
    attempts, timeout = hang_inputs(rng)
    script: dict[int, Script] = {0: Fault.hang()}
    return {
        "fixed": read_source(ns, script, policy={"max_attempts": 3}, results=served),
        "drawn": read_source(
            ns, script, policy={"max_attempts": attempts}, timeout=timeout, results=served
        ),
    }


@PROBES.seeded("malformed_json_is_not_retried")
def malformed_json(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)[:40]
    html = Fault.bad_json(b"<html>Service temporarily unavailable</html>")
    return {
        "cut_off": read_source(ns, {10: Fault.bad_json()}, results=served),
        "html": read_source(ns, {30: html}, results=served),
    }


@PROBES.seeded("client_error_mid_run_is_not_retried")
def client_error(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)
    return {
        "not_found": read_source(ns, {20: Fault.error(404)}, results=served[:40]),
        "gone": read_source(ns, {0: Fault.error(410, retry_after="5")}, results=served[:10]),
    }


@PROBES.seeded("transport_errors_become_etl_errors")
def transport_errors(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)
    return {
        "recovered": read_source(
            ns, query="?limit=50", faults=TRANSPORT_FAULTS.get, results=served
        ),
        "exhausted": [
            read_source(
                ns,
                policy={"max_attempts": 2},
                faults=always(name),
                results=served[:10],
            )
            for name in EXHAUSTING
        ],
    }


@PROBES.seeded("page_changed_between_fetches_is_read_as_sent")
def changed_between_fetches(ns: ModuleType, rng: random.Random) -> JSON:
    script: dict[int, Script] = {0: [Fault.unavailable(), Fault.revised()]}
    return read_source(ns, script, results=listing(rng)[:20], detail=True)


# ─────────────────────────────────────────────────────────────── step 4: ingest


@PROBES.seeded("second_run_writes_zero_new_rows")
def second_run(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)
    path = fresh_file("twice.jsonl")
    by_7 = fresh_file("twice_by_7.jsonl")
    name = "second_run_writes_zero_new_rows"
    return {
        "runs": [
            run_ingest(ns, path, query="?limit=25", results=served[:SMALL], name=f"{name}.{n}")
            for n in range(2)
        ],
        "by_7": [
            run_ingest(
                ns, str(by_7), query="?limit=7", results=served[:BY_7], name=f"{name}.by_7.{n}"
            )
            for n in range(2)
        ],
    }


@PROBES.seeded("failure_mid_run_keeps_earlier_pages")
def failure_mid_run(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)[:SMALL]
    path = fresh_file("stopped.jsonl")
    name = "failure_mid_run_keeps_earlier_pages"
    return {
        "failed": run_ingest(
            ns, path, {20: Fault.error(404)}, results=served, name=f"{name}.failed"
        ),
        "rerun": run_ingest(ns, path, results=served, name=f"{name}.rerun"),
    }


@PROBES.seeded("two_processes_write_once")
def two_processes(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)[:SMALL]
    path = fresh_file("two_processes.jsonl")

    def one_run(n: int) -> JSON:
        return run_ingest(
            ns, path, query="?limit=25", results=served, name=f"two_processes_write_once.{n}"
        )

    return {"runs": [in_a_child(partial(one_run, n)) for n in range(2)]}


@PROBES.seeded("pages_are_written_as_they_arrive")
def as_they_arrive(ns: ModuleType, rng: random.Random) -> JSON:
    path = fresh_file(ARRIVING)
    served = listing(rng)[:SMALL]
    name = "pages_are_written_as_they_arrive"
    return run_ingest(ns, path, results=served, watch=ARRIVING, name=name)


#: The file `as_they_arrive` watches, named as a str: its path is made without pathlib.
ARRIVING = "arriving.jsonl"


@PROBES.seeded("failed_run_keeps_its_pages_and_the_rerun_finishes")
def failed_runs(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)[:SMALL]
    bad = fresh_file("bad_json.jsonl")
    unavailable = fresh_file("unavailable.jsonl")
    name = "failed_run_keeps_its_pages_and_the_rerun_finishes"
    return {
        "bad_json": [
            run_ingest(
                ns, bad, {BAD_JSON_AT: Fault.bad_json()}, results=served, name=f"{name}.bad.0"
            ),
            run_ingest(ns, bad, results=served, name=f"{name}.bad.1"),
        ],
        "unavailable": [
            run_ingest(
                ns,
                unavailable,
                {UNAVAILABLE_AT: Fault.unavailable()},
                policy={"max_attempts": 2},
                results=served,
                name=f"{name}.unavailable.0",
            ),
            run_ingest(ns, unavailable, results=served, name=f"{name}.unavailable.1"),
        ],
    }


def stranger(served: Sequence[Mapping[str, Any]]) -> Launch:
    first = launches_from(served[:1])[0]
    return dataclasses.replace(first, id="not-in-the-listing", name="Vostok 1")


@PROBES.seeded("keys_on_disk_come_from_the_file")
def keys_on_disk(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)[:SMALL]
    path = fresh_file("prefilled.jsonl")
    prefill(path, [*launches_from(served[:PREFILLED]), stranger(served)])
    run = run_ingest(
        ns, path, query="?limit=25", results=served, name="keys_on_disk_come_from_the_file"
    )
    return {"run": run}


@PROBES.seeded("written_counts_rows_that_reached_the_file")
def written_counts(ns: ModuleType, rng: random.Random) -> JSON:
    path = fresh_file("repeating.jsonl")
    served = repeating_results(listing(rng))
    return run_ingest(ns, path, results=served, name="written_counts_rows_that_reached_the_file")


@PROBES.seeded("revised_launch_is_written_once_more")
def revised(ns: ModuleType, rng: random.Random) -> JSON:
    served = listing(rng)[:SMALL]
    path = fresh_file("revised.jsonl")
    name = "revised_launch_is_written_once_more"
    moved: dict[int, Script] = {0: [Fault.revised()]}
    return {
        "runs": [
            run_ingest(ns, path, query="?limit=50", results=served, name=f"{name}.0"),
            run_ingest(ns, path, moved, query="?limit=50", results=served, name=f"{name}.1"),
            run_ingest(ns, path, moved, query="?limit=50", results=served, name=f"{name}.2"),
        ]
    }
