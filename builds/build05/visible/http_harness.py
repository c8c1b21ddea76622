"""The HTTP harness of build 05's visible checks: the fixture server in-process, on virtual time.

A check reads the learner's `SpaceDevsSource` (or runs their `ingest`) against a `FixtureApp`
of its own, through ``httpx.ASGITransport`` (no socket is opened), optionally with scripted
transport failures (`Flaky`), and says what came back in the one feedback vocabulary. It
knows the fixture's own launches and the literal outcome of each scenario, nothing of how a
build answers: this module ships to learners and holds no reference implementation. Every
run builds its own server, client and files, and keeps nothing: a repeat gives the same
verdict.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from etl import HttpStatus, Launch, MemorySink, ParseError, RateLimited, launch_results
from etl.server import IN_PROCESS_BASE_URL, LAUNCHES_PATH, FixtureApp
from workbook.checking.feedback import show
from workbook.checks import Said, expect, outcome_of

#: The fixture's listing, in-process (a made-up host: no socket is opened).
LISTING = IN_PROCESS_BASE_URL + LAUNCHES_PATH
NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)
NOW_TEXT = "now = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)"
#: More launches than any listing of the fixture holds: a source still yielding past this
#: follows a loop, and the check stops it.
RUNAWAY = 1000
#: A zone 5.5 h from UTC, without daylight saving, in POSIX form (no zone database needed).
AWAY_FROM_UTC = "IST-5:30"


def launch_ids() -> list[str]:
    return [result["id"] for result in launch_results()]


def response(status: int, **kwargs: Any) -> httpx.Response:
    """A response built by hand, as if to a GET of the listing."""
    return httpx.Response(status, request=httpx.Request("GET", LISTING), **kwargs)


@contextmanager
def away_from_utc() -> Iterator[None]:
    """The process's local time zone 5.5 h from UTC for the block, then as it was: a naive
    datetime read as local time is then visibly wrong, not right by luck on a UTC machine.
    (Where `time.tzset` does not exist, Windows, the zone stays as it is.)"""
    if not hasattr(time, "tzset"):
        yield
        return
    before = os.environ.get("TZ")
    os.environ["TZ"] = AWAY_FROM_UTC
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def describe_error(value: Any) -> Said:
    """What `error_for_response` returned, with the fields the checks compare."""
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


# ───────────────────────────────────────────────────────────── the source


class Flaky(httpx.AsyncBaseTransport):
    """The fixture app in-process, except that the requests numbered in `faults` (from 1)
    raise that httpx error instead of being sent: a refused connection, a read timeout, a
    response broken off mid-way."""

    def __init__(self, app: FixtureApp, faults: dict[int, type[httpx.TransportError]]) -> None:
        self.inner = httpx.ASGITransport(app=app)
        self.faults = faults
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        kind = self.faults.get(self.requests)
        if kind is not None:
            raise kind(f"scripted {kind.__name__}", request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def build03_ready(ns: Any) -> None:
    """Say so when the step cannot run because build 03's seams are still stubs."""
    try:
        ns.RetryPolicy()
        ns.IdempotentSink(MemorySink())
    except NotImplementedError as exc:
        raise NotImplementedError(
            f"build 03 first: this step runs on its RetryPolicy and IdempotentSink ({exc})"
        ) from None


def client_for(app: FixtureApp, faults: dict[int, type[httpx.TransportError]] | None = None) -> Any:
    transport = httpx.ASGITransport(app=app) if faults is None else Flaky(app, faults)
    return httpx.AsyncClient(transport=transport, base_url=IN_PROCESS_BASE_URL)


async def read_all(
    ns: Any,
    app: FixtureApp,
    url: str,
    *args: Any,
    faults: dict[int, type[httpx.TransportError]] | None = None,
    **options: Any,
) -> tuple[bool, Any, list[Any], float, float]:
    """Iterate ``SpaceDevsSource(client, url, *args, **options).launches()``, stopping after
    `RUNAWAY` launches: (ok, error, launches, virtual seconds, real seconds)."""
    build03_ready(ns)
    loop = asyncio.get_running_loop()
    start, real = loop.time(), time.perf_counter()
    got: list[Any] = []
    async with client_for(app, faults) as client:
        source = ns.SpaceDevsSource(client, url, *args, **options)

        async def drain() -> None:
            async for launch in source.launches():
                got.append(launch)
                if len(got) > RUNAWAY:
                    break

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
    if isinstance(error, httpx.TransportError):
        return (
            "httpx's own errors are not EtlErrors, so with_retry lets them through: a GET may"
            " be repeated, so turn httpx.TimeoutException into RequestTimeout, and"
            " httpx.NetworkError and httpx.RemoteProtocolError into NetworkError."
        )
    if isinstance(error, ValueError):
        return "A body that is not a page must reach with_retry as the ParseError it is."
    return ""


def expect_every_launch(
    call: str, ok: bool, error: Any, got: list[Any], count: int | None = None
) -> None:
    """Fail unless the run ended without an error, yielding the fixture's first `count`
    launches (all of them by default), each once, in order, as `etl.Launch` rows."""
    expect(ok, call, Said.of(ok, error), "every launch, without an error", _failure_note(error))
    wrong = next((item for item in got if type(item) is not Launch), None)
    expect(
        wrong is None,
        f"{call}: an item yielded",
        wrong,
        "etl.Launch rows: Launch.from_api(result) for each result",
    )
    ids, expected = [launch.id for launch in got], launch_ids()[:count]
    expect(
        ids == expected,
        f"{call}: the launches yielded",
        Said(f"{len(ids)} launches" + ("" if ids[:1] == expected[:1] else ", in another order")),
        f"all {len(expected)} launches of the listing, each once, in order",
        note="Follow page['next'] until it is None, yielding each page's results.",
    )


def expect_stopped(
    call: str, ok: bool, error: Any, got: list[Any], kind: type[Exception], count: int, note: str
) -> None:
    """Fail unless the run raised `kind` after yielding exactly its first `count` launches."""
    expect(
        not ok and type(error) is kind and len(got) == count,
        call,
        Said(f"{'ended without an error' if ok else show(error)} after {len(got)} launches"),
        f"raises {kind.__name__} after the first {count} launches",
        note,
    )


# ───────────────────────────────────────────────────────────── the ingest


async def ingest_once(ns: Any, path: Path, app: FixtureApp, url: str) -> tuple[bool, Any]:
    """One run, with its own client and source (as a new process would make them)."""
    build03_ready(ns)
    async with client_for(app) as client:
        source = ns.SpaceDevsSource(client, url)
        return await outcome_of(ns.ingest(source, path))


def report_of(ok: bool, value: Any) -> Said:
    if not ok:
        return Said.of(ok, value)
    fetched, written = getattr(value, "fetched", "?"), getattr(value, "written", "?")
    return Said(f"fetched={fetched!r}, written={written!r}")


def counts(value: Any) -> tuple[Any, Any]:
    return getattr(value, "fetched", None), getattr(value, "written", None)
