"""Visible checks of build 05, step 3: the paginated `SpaceDevsSource`, read through the fixture
server in-process on virtual time (`http_harness`); `build05` registers them after step 2's.

Kept apart from `build05` so that neither module outgrows the house limit. Every check builds
its own server and client and keeps nothing: running one twice gives the same verdict. Expected
values are the fixture's own launches and waits from the policy's formula, never a reference
implementation: this module ships to learners.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import httpx

from builds.build05.visible.http_harness import (
    LISTING,
    build03_ready,
    client_for,
    expect_every_launch,
    expect_stopped,
    read_all,
    requests_for,
)
from etl import HttpStatus, ParseError, launch_results
from etl.server import Fault, FixtureApp
from workbook.checking.feedback import show
from workbook.checks import Checks, Said, expect, expect_equal

SOURCE = Checks("05")
#: Real seconds a check may take: on virtual time its waits cost microseconds.
SOURCE_REAL_SECONDS = 1.0
#: Launches (and launches a page) of the listings the source and ingest checks read: three
#: pages show every paging bug, and 60 launches, not the fixture's 300, keep the whole-build
#: self-check under a second (each launch is served, parsed and keyed in real time).
LAUNCHES, PAGE_SIZE = 60, 20
PAGED = f"{LISTING}?limit={PAGE_SIZE}"


@functools.cache
def _fixture() -> tuple[dict[str, Any], ...]:
    return tuple(launch_results())


def served(count: int) -> list[dict[str, Any]]:
    """The fixture's first `count` launches. Read once: a `FixtureApp` copies what it is
    given, so no check can change what the next one is served."""
    return list(_fixture()[:count])


def listing(**script: Any) -> FixtureApp:
    """A fixture server of the first `LAUNCHES` launches, with `script`'s faults."""
    return FixtureApp(script.pop("faults", None), results=served(LAUNCHES), **script)


@SOURCE.add(step="source")
async def follows_next_until_null(ns: Any) -> None:
    app = listing()
    call = (
        f'SpaceDevsSource(client, LISTING + "?limit={PAGE_SIZE}").launches(), {LAUNCHES} launches'
    )
    ok, error, got, _, _ = await read_all(ns, app, PAGED)
    expect_every_launch(call, ok, error, got, LAUNCHES)
    expect_equal(
        f"{call}: the pages requested (offsets)",
        [entry.offset for entry in app.log],
        [0, PAGE_SIZE, 2 * PAGE_SIZE],
        note="One request per page: start at the URL given, then each page's next.",
    )


@SOURCE.add(step="source")
async def retries_503_then_continues(ns: Any) -> None:
    app = listing(faults={PAGE_SIZE: [Fault.unavailable()]})
    call = f"launches(), the page at offset {PAGE_SIZE} answering 503 once (no Retry-After)"
    ok, error, got, waited, real = await read_all(ns, app, PAGED)
    expect_every_launch(call, ok, error, got, LAUNCHES)
    expect_equal(
        f"{call}: requests for that page",
        requests_for(app, PAGE_SIZE),
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


@SOURCE.add(step="source")
async def honors_retry_after_on_429(ns: Any) -> None:
    app = listing(faults={PAGE_SIZE: [Fault.rate_limited(5)]})
    call = f"launches(), the page at offset {PAGE_SIZE} answering 429 with Retry-After: 5 once"
    ok, error, got, waited, _ = await read_all(ns, app, PAGED)
    expect_every_launch(call, ok, error, got, LAUNCHES)
    expect_equal(f"{call}: requests for that page", requests_for(app, PAGE_SIZE), 2)
    expect(
        abs(waited - 5.0) < 1e-6,
        f"{call}: seconds waited (virtual)",
        round(waited, 6),
        "5.0: what the server asked for",
        note="error_for_response turns the 429 into RateLimited(5.0); with_retry waits that.",
    )


@SOURCE.add(step="source")
async def page_deadline_cuts_a_hang(ns: Any) -> None:
    # page_timeout not given: the default's 10 s deadline; then one given.
    for offset, size, count, given in ((20, 20, LAUNCHES, None), (60, 30, 90, 1.5)):
        app = FixtureApp({offset: [Fault.hang(600)]}, results=served(count))
        call = f"launches(), {size} a page, the page at offset {offset} silent for 600 s once,"
        call += " page_timeout not given (10 s)" if given is None else f" page_timeout={given}"
        url = f"{LISTING}?limit={size}"
        timeout = 10.0 if given is None else given
        options: dict[str, Any] = {} if given is None else {"page_timeout": given}
        ok, error, got, waited, real = await read_all(ns, app, url, **options)
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
                " given (10.0 by default: page_timeout: float = 10.0), inside fetch_page."
            ),
        )


@SOURCE.add(step="source")
async def empty_page_is_not_the_end(ns: Any) -> None:
    far = LAUNCHES + 40  # past the end: a page with no results, whose next leads back on
    app = listing(faults={PAGE_SIZE: [Fault.next_to(far)], far: [Fault.next_to(2 * PAGE_SIZE)]})
    call = f"launches(), {LAUNCHES} launches, {PAGE_SIZE} a page, the page at offset {PAGE_SIZE}"
    call += f" linking to an empty page (offset {far}) whose next leads to offset {2 * PAGE_SIZE}"
    ok, error, got, _, _ = await read_all(ns, app, PAGED)
    expect_every_launch(call, ok, error, got, LAUNCHES)


@SOURCE.add(step="source")
async def a_cancelled_run_is_not_retried(ns: Any) -> None:
    build03_ready(ns)
    app = listing(faults={PAGE_SIZE: [Fault.hang(600)]})
    call = f"launches() in a task, the page at offset {PAGE_SIZE} silent for 600 s once,"
    call += " the task cancelled at t = 2.5 s (page_timeout=10.0); 60 s later"
    async with client_for(app) as client:
        source = ns.SpaceDevsSource(client, PAGED, page_timeout=10.0)

        async def read() -> None:
            async for _ in source.launches():
                pass

        task = asyncio.ensure_future(read())
        await asyncio.sleep(2.5)
        task.cancel()
        await asyncio.wait([task], timeout=60.0)
        if (
            task.done()
            and not task.cancelled()
            and isinstance(stub := task.exception(), NotImplementedError)
        ):
            raise stub  # still a stub: not done, rather than failed
        ended = "cancelled" if task.cancelled() else "still running" if not task.done() else ""
        ended = ended or (show(task.exception()) if task.exception() else "finished")
    expect(
        ended == "cancelled" and requests_for(app, PAGE_SIZE) == 1,
        call,
        Said(f"{ended}, that page requested {requests_for(app, PAGE_SIZE)}x"),
        "cancelled, that page requested once",
        note="asyncio.CancelledError is not an Exception: catch only the httpx errors you map"
        " (no `except BaseException`, no bare `except:`), so a cancelled run stops.",
    )


@SOURCE.add(step="source")
async def retries_with_the_policy_given(ns: Any) -> None:
    app = FixtureApp({50: [Fault.unavailable(), Fault.unavailable()]}, results=served(150))
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


@SOURCE.add(step="source")
async def httpx_failures_are_retried(ns: Any) -> None:
    faults: dict[int, type[httpx.TransportError]] = {
        2: httpx.ConnectError,
        4: httpx.ReadTimeout,
        6: httpx.RemoteProtocolError,
    }
    call = (
        f"launches(), {LAUNCHES} launches, 10 a page, requests 2, 4 and 6 raising"
        " httpx.ConnectError, httpx.ReadTimeout and httpx.RemoteProtocolError"
    )
    ok, error, got, _, _ = await read_all(ns, listing(), LISTING + "?limit=10", faults=faults)
    expect_every_launch(call, ok, error, got, LAUNCHES)


@SOURCE.add(step="source")
async def next_leading_back_is_a_parse_error(ns: Any) -> None:
    app = FixtureApp({40: [Fault.next_to(20)]}, results=served(80))
    call = "launches(), 20 a page, the page at offset 40 linking back to offset 20"
    ok, error, got, _, _ = await read_all(ns, app, LISTING + "?limit=20")
    note = (
        "Keep the URLs this run has fetched; when next names one of them again, raise"
        " ParseError: the listing loops, and following it would never end."
    )
    expect_stopped(call, ok, error, got, ParseError, 60, note)
    expect_equal(
        f"{call}: requests for the page at offset 20",
        requests_for(app, 20),
        1,
        note="Raise the ParseError instead of fetching the repeated URL: check the URL against"
        " those fetched before requesting it.",
    )


@SOURCE.add(step="source")
async def requests_at_the_predicted_times(ns: Any) -> None:
    # Step 3's Predict: requested at 0 s, 0.2 s and 3.2 s; the run ends at 3.2 s.
    times: list[float] = []
    loop = asyncio.get_running_loop()

    def log_time(entry: Any) -> None:
        if entry.offset == 10:
            times.append(round(loop.time(), 6))

    script = {10: [Fault.unavailable(), Fault.unavailable(retry_after=3)]}
    app = FixtureApp(script, results=served(50), on_request=log_time)
    call = (
        "launches(), 10 a page, the page at offset 10 answering 503, then 503 with"
        " Retry-After: 3, then normally"
    )
    ok, error, got, waited, _ = await read_all(ns, app, LISTING + "?limit=10")
    expect_every_launch(call, ok, error, got, 50)
    expect_equal(f"{call}: when that page was requested (virtual s)", times, [0.0, 0.2, 3.2])
    expect(abs(waited - 3.2) < 1e-6, f"{call}: when the run ended", round(waited, 6), "3.2")
    app = FixtureApp({20: [Fault.bad_json()]}, results=served(50))
    call = "launches(), 10 a page, the page at offset 20 cut off mid-way (status 200)"
    ok, error, got, _, _ = await read_all(ns, app, LISTING + "?limit=10")
    note = "Step 2's Predict: a cut-off page is a ParseError, which with_retry never repeats."
    expect_stopped(call, ok, error, got, ParseError, 20, note)
    expect_equal(f"{call}: requests for that page", requests_for(app, 20), 1, note=note)
