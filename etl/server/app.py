"""`FixtureApp`: one ASGI app serving the shipped launches as Launch Library 2 pages::

    GET /2.3.0/launches/?limit=10&offset=20
    -> {"count": 300, "next": "http://HOST/2.3.0/launches/?limit=10&offset=30",
        "previous": "http://HOST/2.3.0/launches/?limit=10&offset=10", "results": [...]}

It serves two ways with the same code:

- in-process, through ``httpx.ASGITransport`` (see `in_process_client`): no sockets, so it runs
  on virtual time, and a scripted hang of an hour costs nothing. ``ASGITransport`` ignores
  httpx's own timeouts: only ``asyncio.timeout`` around the call cuts a hang short;
- over real HTTP on 127.0.0.1, under uvicorn: `etl.server.serving.BackgroundServer` for a
  notebook or a test, ``python -m etl.server`` for a learner with a browser or curl.

One app is one server, with its own script, counters, request log and listing (which
`Fault.inserted` grows): a fresh app with the same script answers a repeated run with the same
responses (dates aside: they follow `clock`).

Every reply is JSON. An error (a scripted 429 or 503, an unknown path) carries an object with a
``detail``, as the real API's errors do; a ``limit`` or ``offset`` that is not a whole number in
range gets a 400 whose ``detail`` says which and why (the real API quietly serves its defaults).

The app only serves. Parsing Retry-After, mapping statuses to errors and following ``next``
links is the client's job (build 05).
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx

from etl.data import launch_results
from etl.server.dates import RetryAt, http_date
from etl.server.faults import Fault, FaultPlan, Script
from etl.server.limits import RateLimit, Throttle, retry_after_header

#: The path Launch Library 2 serves launches under (API version 2.3.0).
LAUNCHES_PATH = "/2.3.0/launches/"
#: The real API. A source written against the fixture works unchanged against it.
REAL_API_URL = "https://ll.thespacedevs.com/2.3.0/launches/"
#: The made-up host `in_process_client` talks to; no name lookup ever happens.
IN_PROCESS_BASE_URL = "http://fixture"
#: Launch Library 2's page size when ``limit`` is absent, and its ceiling (larger is clamped).
DEFAULT_LIMIT = 10
MAX_LIMIT = 100

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


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
    delay: float | None = None
    """Seconds a `Fault.slow_tail` held this request before answering (None for others)."""

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

    What it serves is a function of (offset, limit, the request's number for that offset,
    the launches inserted so far) and, for Date and HTTP-date Retry-After headers only,
    `clock`: a repeated run against a fresh app with the same script sees the same responses.
    `results` is the listing as it stands, inserted launches included.

    With a `rate_limit`, well-formed requests for launches beyond it get 429 and Retry-After
    before any script is consulted (a refused request advances no page's count); its window
    slides on the event loop's clock, virtual in-process under `workbook.vtime`.
    """

    def __init__(
        self,
        faults: FaultPlan | Mapping[int, Script] | None = None,
        *,
        results: Sequence[Mapping[str, Any]] | None = None,
        clock: Callable[[], datetime] = _utc_now,
        on_request: Callable[[LoggedRequest], None] | None = None,
        rate_limit: RateLimit | None = None,
    ) -> None:
        self.plan = faults if isinstance(faults, FaultPlan) else FaultPlan(faults)
        self.results: list[dict[str, Any]] = (
            # A JSON round trip is the app's own deep copy (and ~8x faster than copy.deepcopy).
            launch_results()
            if results is None
            else json.loads(json.dumps([dict(r) for r in results]))
        )
        self.clock = clock
        self.on_request = on_request
        self.throttle = None if rate_limit is None else Throttle(rate_limit)
        self.log: list[LoggedRequest] = []
        self._counts: dict[int, int] = {}
        self._inserted = 0

    @property
    def count(self) -> int:
        """How many launches the listing holds (the pages' ``count``)."""
        return len(self.results)

    def fetches(self, offset: int) -> int:
        """How many requests the page at `offset` has received."""
        return self._counts.get(offset, 0)

    def reset(self) -> None:
        """Forget the log and the per-page counters, and take inserted launches out again:
        scripts start again from request 1, on the listing the app started with, and a rate
        limit's window starts empty."""
        self.log.clear()
        if self.throttle is not None:
            self.throttle.reset()
        self._counts.clear()
        del self.results[: self._inserted]
        self._inserted = 0

    def _insert(self, fault: Fault) -> None:
        # New launches at the top, each a day before the one below it, so a listing sorted by
        # ``net`` stays sorted. Numbered across the app's life: every one has its own id.
        top = self.results[0] if self.results else launch_results()[0]
        new: list[dict[str, Any]] = []
        for back in range(fault.launches, 0, -1):
            number = self._inserted + len(new) + 1
            launch = _shifted(top, days=-back)
            launch["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{REAL_API_URL}#inserted-{number}"))
            launch["name"] = f"Inserted launch {number}"
            launch["mission"] = None
            new.append(launch)
        self.results[:0] = new
        self._inserted += len(new)

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
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
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
        try:
            limit = _int_param(params, "limit", DEFAULT_LIMIT, minimum=1)
            offset = _int_param(params, "offset", 0, minimum=0)
        except ValueError as exc:
            # Refused before it counts as a page request: no fault script advances.
            return _json(400, {"detail": str(exc)})
        limit = min(limit, MAX_LIMIT)
        entry.offset, entry.limit = offset, limit
        if self.throttle is not None:
            wait = self.throttle.admit(asyncio.get_running_loop().time())
            if wait is not None:
                entry.fault = "throttled"
                retry_after = retry_after_header(wait)
                response = _json(429, _error_detail(429, retry_after))
                response.headers.append(("retry-after", retry_after))
                return response
        # Counted before any await, so concurrent requests still get distinct numbers.
        nth = self._counts[offset] = self._counts.get(offset, 0) + 1
        fault = self.plan.fault_for(offset, nth)
        entry.nth = nth
        entry.fault = None if fault is None else str(fault)
        if fault is not None and fault.kind == "inserted":
            # Also before any await: the listing changes between two requests, never during one.
            self._insert(fault)

        if fault is not None and fault.kind == "error":
            response = _json(fault.status, _error_detail(fault.status, fault.retry_after))
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
        if fault is not None and fault.kind == "slow":
            entry.delay = fault.delay(offset, nth)
        if (
            fault is not None
            and fault.kind in ("hang", "slow")
            and not await _wait_unless_gone(
                fault.seconds if entry.delay is None else entry.delay, receive
            )
        ):
            return None

        results = self.results[offset : offset + limit]
        if fault is not None and fault.kind == "revised" and results:
            results = [_shifted(results[0], days=1), *results[1:]]
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


def _int_param(params: Mapping[str, str], name: str, default: int, *, minimum: int) -> int:
    """`params[name]` as a whole number of at least `minimum`, `default` when absent.

    Raises ValueError with the reason a client is told: a value that is not ASCII digits
    (``abc``, ``-1``, ``1.5``, ``²``, empty) or is below `minimum`. Launch Library 2 (Django
    REST framework) quietly serves its defaults instead, which hides a client's bug; the
    fixture says so. A limit above `MAX_LIMIT` is still clamped, as the real API does.
    """
    raw = params.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()):
        raise ValueError(f"{name} must be a whole number of at least {minimum}, not {raw!r}.")
    value = int(raw)
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value}.")
    return value


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


def _shifted(result: dict[str, Any], *, days: int) -> dict[str, Any]:
    """A copy of `result` whose ``net`` is `days` later (earlier when negative)."""
    moved = copy.deepcopy(result)
    net = datetime.fromisoformat(moved["net"].replace("Z", "+00:00"))
    moved["net"] = (net + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return moved


def _error_detail(status: int, retry_after: str | RetryAt | None) -> dict[str, Any]:
    """The error body: JSON with a `detail`, as Launch Library 2 (Django REST framework)
    sends it, never a page, so an error can't pass for data in curl or in a careless client."""
    if status != 429:
        return {"detail": f"Scripted fault: HTTP {status}."}
    # DRF's throttle says when to come back whenever it knows.
    if isinstance(retry_after, RetryAt):
        wait: int | None = retry_after.seconds
    elif retry_after is not None and retry_after.isascii() and retry_after.isdigit():
        wait = int(retry_after)
    else:
        wait = None
    if wait is None:
        return {"detail": "Request was throttled."}
    unit = "second" if wait == 1 else "seconds"
    return {"detail": f"Request was throttled. Expected available in {wait} {unit}."}


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
