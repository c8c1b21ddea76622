"""A stand-in for the Launch Library 2 API that misbehaves on cue.

`FixtureApp` is one ASGI app serving the shipped launches as Launch Library 2 pages::

    GET /2.3.0/launches/?limit=10&offset=20
    -> {"count": 300, "next": "http://HOST/2.3.0/launches/?limit=10&offset=30",
        "previous": "http://HOST/2.3.0/launches/?limit=10&offset=10", "results": [...]}

It serves two ways with the same code:

- in-process, through ``httpx.ASGITransport`` (see `in_process_client`): no sockets, so it runs
  on virtual time, and a scripted hang of an hour costs nothing. ``ASGITransport`` ignores
  httpx's own timeouts: only ``asyncio.timeout`` around the call cuts a hang short;
- over real HTTP on 127.0.0.1, under uvicorn: `BackgroundServer` for a notebook or a test,
  ``python -m etl.server`` for a learner with a browser or curl.

Faults are scripted per page and per request, so every run of a test sees the same sequence:
``FixtureApp({20: [Fault.unavailable(), None, Fault.revised()]})`` answers the first request for
``offset=20`` with 503, the second normally, the third with a revised page, and every later one
normally. A repeat of the same request is counted, never guessed: the app keeps a request log.

The app only serves. Parsing Retry-After, mapping statuses to errors and following ``next``
links is the client's job (build 05).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode

import httpx
import uvicorn

from etl.data import launch_results

#: The path Launch Library 2 serves launches under (API version 2.3.0).
LAUNCHES_PATH = "/2.3.0/launches/"
#: The real API. A source written against the fixture works unchanged against it.
REAL_API_URL = "https://ll.thespacedevs.com/2.3.0/launches/"
#: The made-up host `in_process_client` talks to; no name lookup ever happens.
IN_PROCESS_BASE_URL = "http://fixture"
#: Launch Library 2's page size when ``limit`` is absent or unusable, and its ceiling.
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
#: How long a scripted hang lasts unless told otherwise: far longer than any sane deadline.
HANG_SECONDS = 3600.0
#: The body of `Fault.bad_json`: a page cut off mid-stream, as a dropped proxy connection leaves it.
TRUNCATED_JSON = b'{"count": 300, "next": null, "previous": null, "results": [{"id": "5d08'

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
DateForm = Literal["imf", "rfc850", "asctime"]
FaultKind = Literal["error", "hang", "bad_json", "revised", "next_to"]

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_LONG_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(when: datetime, form: DateForm = "imf") -> str:
    """`when` (timezone-aware) as an HTTP-date in one of RFC 9110's three forms.

    ``imf`` (``Sun, 06 Nov 1994 08:49:37 GMT``) is the one senders must produce; ``rfc850``
    (``Sunday, 06-Nov-94 08:49:37 GMT``) and ``asctime`` (``Sun Nov  6 08:49:37 1994``) are
    obsolete forms a recipient must still accept. Spelled out by hand, not with ``strftime``,
    because ``%a`` and ``%b`` follow the machine's locale and HTTP does not.
    """
    if when.tzinfo is None:
        raise ValueError("http_date needs a timezone-aware datetime")
    t = when.astimezone(UTC)
    clock = f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    month = _MONTHS[t.month - 1]
    if form == "imf":
        return f"{_DAYS[t.weekday()]}, {t.day:02d} {month} {t.year} {clock} GMT"
    if form == "rfc850":
        return f"{_LONG_DAYS[t.weekday()]}, {t.day:02d}-{month}-{t.year % 100:02d} {clock} GMT"
    if form == "asctime":
        return f"{_DAYS[t.weekday()]} {month} {t.day:>2} {clock} {t.year}"
    raise ValueError(f"unknown HTTP-date form {form!r}")


@dataclass(frozen=True)
class RetryAt:
    """A Retry-After given as an HTTP-date `seconds` after the response's own Date header.

    Rendered when the response is sent, from the app's clock truncated to the second, so a
    client that subtracts the response's Date gets exactly `seconds`.
    """

    seconds: int
    form: DateForm = "imf"

    def render(self, now: datetime) -> str:
        return http_date(now + timedelta(seconds=self.seconds), self.form)

    def __str__(self) -> str:
        return f"{'date' if self.form == 'imf' else self.form}:{self.seconds}"


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour for one request. Build them with the class methods."""

    kind: FaultKind
    status: int = 200
    retry_after: str | RetryAt | None = None
    seconds: float = HANG_SECONDS
    next_offset: int = 0
    body: bytes = TRUNCATED_JSON

    @classmethod
    def error(cls, status: int, retry_after: str | int | RetryAt | None = None) -> Fault:
        """Answer `status` with a small JSON error body (and Retry-After, when given).

        `retry_after` is sent as given: an int or digit string is delay-seconds, a `RetryAt`
        becomes an HTTP-date, and any other string goes out verbatim (to test a client's
        handling of a malformed header).
        """
        if not 100 <= status <= 599:
            raise ValueError(f"not an HTTP status: {status}")
        value = str(retry_after) if isinstance(retry_after, int) else retry_after
        return cls("error", status=status, retry_after=value)

    @classmethod
    def unavailable(cls, retry_after: str | int | RetryAt | None = None) -> Fault:
        """503 Service Unavailable, optionally with Retry-After."""
        return cls.error(503, retry_after)

    @classmethod
    def rate_limited(cls, retry_after: str | int | RetryAt | None = 1) -> Fault:
        """429 Too Many Requests, with Retry-After (1 second unless told otherwise)."""
        return cls.error(429, retry_after)

    @classmethod
    def hang(cls, seconds: float = HANG_SECONDS) -> Fault:
        """Say nothing for `seconds` (virtual seconds in-process), then answer normally.

        Over real HTTP the hang ends early if the client hangs up.
        """
        if seconds < 0:
            raise ValueError("a hang cannot last negative time")
        return cls("hang", seconds=seconds)

    @classmethod
    def bad_json(cls, body: bytes = TRUNCATED_JSON) -> Fault:
        """200 with a JSON content type and a body that is not the expected JSON."""
        return cls("bad_json", body=body)

    @classmethod
    def revised(cls) -> Fault:
        """The normal page, except that its first launch has slipped by a day (a new ``net``).

        Script it on a later request for the same page to get a page that changes between
        fetches: same launch id, different content.
        """
        return cls("revised")

    @classmethod
    def next_to(cls, offset: int) -> Fault:
        """The normal page, but its ``next`` link points at `offset` (same limit).

        ``next_to(0)`` on a later page sends a client back to the start; on the last page,
        ``next_to(count)`` leads to an empty final page whose ``next`` is null.
        """
        if offset < 0:
            raise ValueError("offset must be >= 0")
        return cls("next_to", next_offset=offset)

    def __str__(self) -> str:
        if self.kind == "error":
            return str(self.status) + ("" if self.retry_after is None else f"@{self.retry_after}")
        if self.kind == "hang":
            return "hang" if self.seconds == HANG_SECONDS else f"hang@{self.seconds:g}"
        if self.kind == "bad_json":
            return "badjson"
        if self.kind == "revised":
            return "revised"
        return f"next@{self.next_offset}"

    @classmethod
    def parse(cls, spec: str) -> Fault | None:
        """The inverse of ``str(fault)``; ``ok`` (or ``-``) means "answer normally" (None).

        ``503``, ``503@5``, ``429@date:5``, ``429@rfc850:5``, ``429@asctime:5``, ``429@soon``,
        ``hang``, ``hang@30``, ``badjson``, ``revised``, ``next@0``.
        """
        text = spec.strip()
        head, _, arg = text.partition("@")
        try:
            if text in ("ok", "-"):
                return None
            if head.isdigit() and head.isascii():
                return cls.error(int(head), _parse_retry_after(arg) if "@" in text else None)
            if head == "hang":
                return cls.hang(float(arg)) if arg else cls.hang()
            if head == "next" and arg:
                return cls.next_to(int(arg))
            if text == "badjson":
                return cls.bad_json()
            if text == "revised":
                return cls.revised()
        except ValueError as exc:
            raise ValueError(f"bad fault {spec!r}: {exc}") from None
        raise ValueError(
            f"bad fault {spec!r}: expected ok, a status (503, 429@5, 429@date:5), hang[@S], "
            "badjson, revised or next@OFFSET"
        )


def _parse_retry_after(arg: str) -> str | RetryAt:
    form, _, seconds = arg.partition(":")
    if seconds and form in ("date", "rfc850", "asctime"):
        date_form: DateForm = "imf" if form == "date" else form  # type: ignore[assignment]
        return RetryAt(int(seconds), date_form)
    return arg


Script = Fault | Sequence[Fault | None]


class FaultPlan:
    """Which request gets which fault: a script per page, keyed by the page's offset.

    A sequence scripts requests in order (the first request for that offset gets item 0;
    ``None`` answers normally; requests past the end answer normally). A single `Fault`
    applies to every request for that offset. Offsets not in the plan always answer normally.
    """

    def __init__(self, script: Mapping[int, Script] | None = None) -> None:
        self._script: dict[int, Script] = {}
        for offset, entry in (script or {}).items():
            if not isinstance(entry, Fault):
                entry = tuple(entry)
                if any(item is not None and not isinstance(item, Fault) for item in entry):
                    raise TypeError(f"offset {offset}: script items must be Fault or None")
            self._script[int(offset)] = entry

    def fault_for(self, offset: int, nth: int) -> Fault | None:
        """The fault for the `nth` request (1-based) for the page at `offset`, if any."""
        entry = self._script.get(offset)
        if entry is None or isinstance(entry, Fault):
            return entry
        return entry[nth - 1] if nth <= len(entry) else None

    @classmethod
    def parse(cls, specs: Sequence[str]) -> FaultPlan:
        """Build a plan from command-line specs, one per page.

        ``OFFSET=F1,F2,...`` scripts requests in order (``20=ok,503@2`` fails the second
        request for offset 20); ``OFFSET=*F`` applies F to every request (``40=*404``).
        """
        script: dict[int, Script] = {}
        for spec in specs:
            where, sep, what = spec.partition("=")
            if not sep or not where.strip().isdigit() or not what.strip():
                raise ValueError(f"bad fault plan {spec!r}: expected OFFSET=FAULT[,FAULT...]")
            offset = int(where)
            if offset in script:
                raise ValueError(f"bad fault plan {spec!r}: offset {offset} scripted twice")
            what = what.strip()
            if what.startswith("*"):
                always = Fault.parse(what[1:])
                if always is None:
                    raise ValueError(f"bad fault plan {spec!r}: '*ok' is the default")
                script[offset] = always
            else:
                script[offset] = [Fault.parse(item) for item in what.split(",")]
        return cls(script)

    def describe(self) -> list[str]:
        """One line per scripted page, in the `parse` syntax."""
        lines = []
        for offset, entry in sorted(self._script.items()):
            if isinstance(entry, Fault):
                lines.append(f"{offset}=*{entry}")
            else:
                lines.append(f"{offset}=" + ",".join(str(f) if f else "ok" for f in entry))
        return lines

    def __repr__(self) -> str:
        return f"FaultPlan.parse({self.describe()!r})"


@dataclass
class LoggedRequest:
    """One request the app received. `status` is None while unanswered, and stays None
    when the client gave up first (a hang it did not wait out)."""

    number: int
    method: str
    path: str
    offset: int | None
    limit: int | None
    nth: int | None
    """Which request for this page it was (1 for the first), counted per offset."""
    fault: str | None
    status: int | None = None

    def __str__(self) -> str:
        where = self.path if self.offset is None else f"offset={self.offset} (#{self.nth})"
        answer = "no answer" if self.status is None else str(self.status)
        note = f" [{self.fault}]" if self.fault else ""
        return f"{self.number:>3} {self.method} {where} -> {answer}{note}"


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Response:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    date: datetime | None = None


class FixtureApp:
    """The ASGI app. One instance is one server: its own script, counters and request log.

    What it serves is a function of (offset, limit, the request's number for that offset) and,
    for Date and HTTP-date Retry-After headers only, `clock`: a repeated run against a fresh
    app with the same script sees the same responses.
    """

    def __init__(
        self,
        faults: FaultPlan | Mapping[int, Script] | None = None,
        *,
        results: Sequence[Mapping[str, Any]] | None = None,
        clock: Callable[[], datetime] = _utc_now,
        on_request: Callable[[LoggedRequest], None] | None = None,
    ) -> None:
        self.plan = faults if isinstance(faults, FaultPlan) else FaultPlan(faults)
        self.results: list[dict[str, Any]] = (
            launch_results() if results is None else [copy.deepcopy(dict(r)) for r in results]
        )
        self.clock = clock
        self.on_request = on_request
        self.log: list[LoggedRequest] = []
        self._counts: dict[int, int] = {}

    @property
    def count(self) -> int:
        """How many launches the listing holds (the pages' ``count``)."""
        return len(self.results)

    def fetches(self, offset: int) -> int:
        """How many requests the page at `offset` has received."""
        return self._counts.get(offset, 0)

    def reset(self) -> None:
        """Forget the log and the per-page counters: scripts start again from request 1."""
        self.log.clear()
        self._counts.clear()

    def _now(self) -> datetime:
        # HTTP dates have whole seconds; truncate once so every header agrees.
        return self.clock().astimezone(UTC).replace(microsecond=0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise RuntimeError(f"FixtureApp serves HTTP only, not {scope['type']!r}")
        await _read_body(receive)
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        path: str = scope["path"]
        entry = LoggedRequest(len(self.log) + 1, scope["method"], path, None, None, None, None)
        self.log.append(entry)
        try:
            await self._respond(scope, receive, send, query, entry)
        finally:
            if self.on_request is not None:
                self.on_request(entry)

    async def _respond(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        query: list[tuple[str, str]],
        entry: LoggedRequest,
    ) -> None:
        path: str = scope["path"]
        # With or without the trailing slash, so a client never meets a redirect here.
        if path.rstrip("/") + "/" == LAUNCHES_PATH and scope["method"] == "GET":
            response = await self._launches(scope, query, entry, receive)
        elif path.rstrip("/") + "/" == LAUNCHES_PATH:
            response = _json(405, {"detail": f'Method "{scope["method"]}" not allowed.'})
            response.headers.append(("allow", "GET"))
        elif path == "/":
            response = _json(200, {"launches": _url(scope, LAUNCHES_PATH, [])})
        else:
            response = _json(404, {"detail": "Not found."})
        if response is None:  # the client hung up during a hang: nobody to answer
            return
        response.headers.append(("content-length", str(len(response.body))))
        response.headers.append(("date", http_date(response.date or self._now())))
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": [
                    (k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers
                ],
            }
        )
        await send({"type": "http.response.body", "body": response.body})
        entry.status = response.status

    async def _launches(
        self,
        scope: Scope,
        query: list[tuple[str, str]],
        entry: LoggedRequest,
        receive: Receive,
    ) -> _Response | None:
        params = dict(query)
        limit = _int_param(params.get("limit"), DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT)
        offset = _int_param(params.get("offset"), 0, minimum=0, maximum=None)
        # Counted before any await, so concurrent requests still get distinct numbers.
        nth = self._counts[offset] = self._counts.get(offset, 0) + 1
        fault = self.plan.fault_for(offset, nth)
        entry.offset, entry.limit, entry.nth = offset, limit, nth
        entry.fault = None if fault is None else str(fault)

        if fault is not None and fault.kind == "error":
            response = _json(fault.status, _error_detail(fault.status))
            # One clock reading for Date and Retry-After, so their difference is exact.
            now = response.date = self._now()
            if fault.retry_after is not None:
                value = fault.retry_after
                response.headers.append(
                    ("retry-after", value.render(now) if isinstance(value, RetryAt) else value)
                )
            return response
        if fault is not None and fault.kind == "bad_json":
            return _Response(200, fault.body, [("content-type", "application/json")])
        if (
            fault is not None
            and fault.kind == "hang"
            and not await _wait_unless_gone(fault.seconds, receive)
        ):
            return None

        results = self.results[offset : offset + limit]
        if fault is not None and fault.kind == "revised" and results:
            results = [_slipped(results[0]), *results[1:]]
        next_offset: int | None = offset + limit if offset + limit < self.count else None
        if fault is not None and fault.kind == "next_to":
            next_offset = fault.next_offset
        page = {
            "count": self.count,
            "next": None if next_offset is None else _page_url(scope, query, limit, next_offset),
            "previous": (
                None if offset == 0 else _page_url(scope, query, limit, max(offset - limit, 0))
            ),
            "results": results,
        }
        return _json(200, page)


def _int_param(raw: str | None, default: int, *, minimum: int, maximum: int | None) -> int:
    # Like Django REST framework (which Launch Library 2 runs on): unusable values fall back
    # to the default rather than failing, and a too-large limit is clamped.
    try:
        value = int(raw) if raw is not None and raw.isascii() else default
    except ValueError:
        return default
    if value < minimum:
        return default
    return value if maximum is None else min(value, maximum)


def _page_url(scope: Scope, query: list[tuple[str, str]], limit: int, offset: int) -> str:
    kept = [(k, v) for k, v in query if k not in ("limit", "offset")]
    # Django REST framework leaves offset out of the link back to the first page.
    return _url(
        scope,
        LAUNCHES_PATH,
        [*kept, ("limit", str(limit))] + ([("offset", str(offset))] if offset else []),
    )


def _url(scope: Scope, path: str, query: list[tuple[str, str]]) -> str:
    host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), None)
    if host is None:
        server_host, port = scope.get("server") or ("localhost", None)
        host = server_host if port is None else f"{server_host}:{port}"
    base = f"{scope.get('scheme', 'http')}://{host}{scope.get('root_path', '')}{path}"
    return f"{base}?{urlencode(query)}" if query else base


def _slipped(result: dict[str, Any]) -> dict[str, Any]:
    revised = copy.deepcopy(result)
    net = datetime.fromisoformat(revised["net"].replace("Z", "+00:00"))
    revised["net"] = (net + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return revised


def _error_detail(status: int) -> dict[str, Any]:
    if status == 429:
        return {"detail": "Request was throttled."}
    return {"detail": f"Scripted fault: HTTP {status}."}


def _json(status: int, payload: Any) -> _Response:
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    return _Response(status, body, [("content-type", "application/json")])


async def _read_body(receive: Receive) -> None:
    # A GET has no body, but ASGI wants the request drained before the response.
    message = await receive()
    while message.get("type") == "http.request" and message.get("more_body", False):
        message = await receive()


async def _wait_unless_gone(seconds: float, receive: Receive) -> bool:
    """Sleep `seconds`; False if the client disconnected first (real HTTP only: in-process,
    ``receive`` blocks until the response is complete, so the sleep always wins)."""
    gone = asyncio.ensure_future(receive())
    try:
        done, _ = await asyncio.wait({gone}, timeout=seconds)
    finally:
        gone.cancel()
    return not done


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def in_process_client(app: FixtureApp, **kwargs: Any) -> httpx.AsyncClient:
    """An httpx client wired straight to `app`: no sockets, works on virtual time.

    Its timeouts do nothing here (``ASGITransport`` ignores them); bound a call with
    ``asyncio.timeout``.
    """
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=IN_PROCESS_BASE_URL, **kwargs
    )


def _uvicorn_config(app: FixtureApp) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        lifespan="on",
        log_level="warning",
        log_config=None,  # leave the host process's logging (a Jupyter kernel's) untouched
        access_log=False,
        date_header=False,  # the app sends its own Date, from the clock its Retry-At uses
        server_header=False,
        timeout_graceful_shutdown=1,
    )


class BackgroundServer:
    """`app` served over real HTTP on `host` by uvicorn in a daemon thread.

    ``port=0`` picks a free port. Use as a context manager, or `start` then `stop`; `stop` is
    safe to call twice.
    """

    def __init__(self, app: FixtureApp | None = None, host: str = "127.0.0.1", port: int = 0):
        self.app = app if app is not None else FixtureApp()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host, self.port = self._sock.getsockname()[:2]
        self._server = uvicorn.Server(_uvicorn_config(self.app))
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            daemon=True,
            name=f"fixture-server-{self.port}",
        )

    @property
    def url(self) -> str:
        """The server's root, e.g. ``http://127.0.0.1:54321``."""
        return f"http://{self.host}:{self.port}"

    @property
    def launches_url(self) -> str:
        """The first page of launches."""
        return self.url + LAUNCHES_PATH

    def start(self, timeout: float = 10.0) -> BackgroundServer:
        """Start serving; return once the server accepts connections."""
        self._thread.start()
        # uvicorn offers no "started" event, only a flag; startup takes milliseconds.
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up and self._thread.is_alive():
            if self._server.started:
                return self
            time.sleep(0.005)
        self.stop()
        raise RuntimeError(f"fixture server on {self.url} did not start")

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and wait for the thread to finish."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._sock.close()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"BackgroundServer({self.url!r}, running={self.running})"


@contextlib.contextmanager
def serve_in_background(app: FixtureApp | None = None, port: int = 0) -> Iterator[BackgroundServer]:
    """``with serve_in_background(app) as server: ... server.launches_url ...``"""
    with BackgroundServer(app, port=port) as server:
        yield server


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m etl.server``: serve the fixture until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m etl.server",
        description="Serve the shipped launches as Launch Library 2 pages, with scripted faults.",
        epilog="Example: python -m etl.server --fault 10=503@2,ok --fault 20=*404",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="OFFSET=FAULT[,FAULT...]",
        help="script the requests for one page (repeatable); FAULT is ok, 503, 503@5, "
        "429@date:5, hang, hang@30, badjson, revised, next@0; OFFSET=*FAULT for every request",
    )
    parser.add_argument("--launches", type=int, default=None, help="serve only the first N")
    parser.add_argument("--quiet", action="store_true", help="do not print each request")
    args = parser.parse_args(argv)
    try:
        plan = FaultPlan.parse(args.fault)
    except ValueError as exc:
        parser.error(str(exc))
    results = launch_results()[: args.launches] if args.launches is not None else None

    def echo(entry: LoggedRequest) -> None:
        print(entry, flush=True)

    app = FixtureApp(plan, results=results, on_request=None if args.quiet else echo)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        print(f"cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    host, port = sock.getsockname()[:2]
    print(f"Serving {app.count} launches at http://{host}:{port}{LAUNCHES_PATH}", flush=True)
    for line in plan.describe():
        print(f"  scripted: {line}", flush=True)
    print("Press Ctrl-C to stop.", flush=True)
    config = _uvicorn_config(app)
    # uvicorn shuts down gracefully on Ctrl-C, then re-raises the signal for the caller.
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(config).run(sockets=[sock])
    print("Stopped.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
