"""The fixture Launch Library 2 app (`etl.server.app`), served in-process (virtual time): pages,
every scripted fault as a response, and the request log."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pytest

import etl
from etl.server import (
    DEFAULT_LIMIT,
    LAUNCHES_PATH,
    MAX_LIMIT,
    Fault,
    FixtureApp,
    RateLimit,
    RetryAt,
    in_process_client,
)

FROZEN = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)
PAGE = "http://fixture/2.3.0/launches/"


def frozen() -> datetime:
    return FROZEN


async def get(app: FixtureApp, query: str = "", **kwargs: Any) -> httpx.Response:
    async with in_process_client(app, **kwargs) as client:
        return await client.get(LAUNCHES_PATH + query)


async def get_all(app: FixtureApp, *queries: str) -> list[httpx.Response]:
    async with in_process_client(app) as client:
        return [await client.get(LAUNCHES_PATH + query) for query in queries]


# --- pagination ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_walking_next_links_yields_every_launch_once_in_order() -> None:
    app = FixtureApp()
    seen: list[dict[str, Any]] = []
    async with in_process_client(app) as client:
        url: str | None = PAGE + "?limit=70"
        while url is not None:
            page = (await client.get(url)).json()
            assert page["count"] == 300
            seen.extend(page["results"])
            url = page["next"]
    assert seen == etl.launch_results()
    assert [entry.offset for entry in app.log] == [0, 70, 140, 210, 280]


@pytest.mark.asyncio
async def test_links_are_absolute_and_null_at_the_ends() -> None:
    first, second, last = await get_all(
        FixtureApp(), "?limit=10", "?limit=10&offset=10", "?limit=10&offset=290"
    )
    assert first.json()["previous"] is None
    assert first.json()["next"] == PAGE + "?limit=10&offset=10"
    # Like Django REST framework, the link back to the first page carries no offset.
    assert second.json()["previous"] == PAGE + "?limit=10"
    assert last.json()["next"] is None
    assert last.json()["previous"] == PAGE + "?limit=10&offset=280"
    assert len(last.json()["results"]) == 10


@pytest.mark.asyncio
async def test_previous_from_an_unaligned_offset_never_goes_below_zero() -> None:
    page = (await get(FixtureApp(), "?limit=10&offset=5")).json()
    assert page["previous"] == PAGE + "?limit=10"
    assert page["next"] == PAGE + "?limit=10&offset=15"


@pytest.mark.asyncio
async def test_links_use_the_host_the_client_asked_for_and_keep_other_params() -> None:
    app = FixtureApp()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://ll.example:8443") as c:
        page = (await c.get(LAUNCHES_PATH + "?mode=list&limit=5&offset=5")).json()
    assert page["next"] == "https://ll.example:8443/2.3.0/launches/?mode=list&limit=5&offset=10"
    assert page["previous"] == "https://ll.example:8443/2.3.0/launches/?mode=list&limit=5"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("query", "limit", "offset"),
    [
        ("", DEFAULT_LIMIT, 0),
        ("?limit=1000", MAX_LIMIT, 0),  # clamped, as the real API does
        ("?limit=3&offset=7", 3, 7),
        ("?limit=007&offset=0", 7, 0),
        ("?mode=list&offset=5", DEFAULT_LIMIT, 5),
    ],
)
async def test_limits_and_offsets_in_range_are_served(query: str, limit: int, offset: int) -> None:
    app = FixtureApp()
    page = (await get(app, query)).json()
    assert page["results"] == etl.launch_results()[offset : offset + limit]
    assert (app.log[0].limit, app.log[0].offset) == (limit, offset)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ("?offset=abc", "offset must be a whole number of at least 0, not 'abc'."),
        ("?offset=-3", "offset must be a whole number of at least 0, not '-3'."),
        ("?offset=", "offset must be a whole number of at least 0, not ''."),
        ("?offset=1.5", "offset must be a whole number of at least 0, not '1.5'."),
        ("?limit=-1", "limit must be a whole number of at least 1, not '-1'."),
        ("?limit=0", "limit must be at least 1, not 0."),
        ("?limit=ten&offset=10", "limit must be a whole number of at least 1, not 'ten'."),
        # '²' is a digit to str.isdigit, not to HTTP.
        ("?limit=%C2%B2", "limit must be a whole number of at least 1, not '²'."),
    ],
)
async def test_bad_query_values_get_400_with_the_reason(query: str, detail: str) -> None:
    """Refused, not quietly served as offset 0: a client's bug shows at once. A refusal is
    no page request, so it never advances a page's fault script."""
    app = FixtureApp({0: [Fault.unavailable()]})
    refused, first = await get_all(app, query, "")
    assert refused.status_code == 400
    assert refused.headers["content-type"] == "application/json"
    assert refused.json() == {"detail": detail}
    assert first.status_code == 503 and app.fetches(0) == 1
    assert str(app.log[0]) == "  1 GET /2.3.0/launches/ -> 400"


@pytest.mark.asyncio
async def test_past_the_end_is_an_empty_page_not_an_error() -> None:
    response = await get(FixtureApp(), "?limit=10&offset=300")
    assert response.status_code == 200
    assert response.json() == {
        "count": 300,
        "next": None,
        "previous": PAGE + "?limit=10&offset=290",
        "results": [],
    }


@pytest.mark.asyncio
async def test_results_can_be_replaced_and_the_app_does_not_share_them() -> None:
    mine = etl.launch_results()[:3]
    app = FixtureApp(results=mine)
    mine[0]["name"] = "changed after the app was built"
    page = (await get(app)).json()
    assert page["count"] == 3
    assert page["results"] == etl.launch_results()[:3]


@pytest.mark.asyncio
async def test_other_paths_and_methods() -> None:
    app = FixtureApp()
    async with in_process_client(app) as client:
        index = await client.get("/")
        slashless = await client.get("/2.3.0/launches?limit=1")
        missing = await client.get("/2.3.0/agencies/")
        post = await client.post(LAUNCHES_PATH, json={"id": "x"})
    assert index.json() == {"launches": PAGE}
    assert len(slashless.json()["results"]) == 1
    assert missing.status_code == 404
    assert (post.status_code, post.headers["allow"]) == (405, "GET")
    assert [e.status for e in app.log] == [200, 200, 404, 405]
    assert [e.offset for e in app.log] == [None, 0, None, None]


# --- scripted faults ----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_script_is_per_page_and_per_request_number() -> None:
    app = FixtureApp({20: [None, Fault.unavailable(), None]})
    responses = await get_all(
        app, "?offset=20", "?offset=20", "?offset=0", "?offset=20", "?offset=20"
    )
    assert [r.status_code for r in responses] == [200, 503, 200, 200, 200]
    assert [(e.offset, e.nth) for e in app.log] == [(20, 1), (20, 2), (0, 1), (20, 3), (20, 4)]
    assert app.fetches(20) == 4 and app.fetches(0) == 1 and app.fetches(40) == 0


@pytest.mark.asyncio
async def test_a_single_fault_applies_to_every_request_a_permanent_4xx() -> None:
    app = FixtureApp({10: Fault.error(404)})
    responses = await get_all(app, "?offset=0", "?offset=10", "?offset=10", "?offset=10")
    assert [r.status_code for r in responses] == [200, 404, 404, 404]
    assert "retry-after" not in responses[1].headers


@pytest.mark.asyncio
async def test_503_with_and_without_retry_after() -> None:
    app = FixtureApp({0: [Fault.unavailable(), Fault.unavailable(retry_after=7)]})
    bare, told = await get_all(app, "", "")
    assert bare.status_code == told.status_code == 503
    assert "retry-after" not in bare.headers
    assert told.headers["retry-after"] == "7"
    assert bare.json() == {"detail": "Scripted fault: HTTP 503."}


@pytest.mark.asyncio
async def test_429_with_retry_after_as_delay_seconds() -> None:
    response = await get(FixtureApp({0: [Fault.rate_limited(5)]}))
    assert response.status_code == 429
    assert response.headers["retry-after"] == "5"
    assert response.json() == {"detail": "Request was throttled. Expected available in 5 seconds."}


@pytest.mark.asyncio
async def test_429_with_retry_after_as_an_http_date_counted_from_the_date_header() -> None:
    clock_with_fraction = FROZEN + timedelta(microseconds=600_000)
    app = FixtureApp({0: [Fault.rate_limited(RetryAt(5))]}, clock=lambda: clock_with_fraction)
    response = await get(app)
    assert response.headers["retry-after"] == "Fri, 01 Mar 2024 12:00:05 GMT"
    assert response.headers["date"] == "Fri, 01 Mar 2024 12:00:00 GMT"
    gap = parsedate_to_datetime(response.headers["retry-after"]) - parsedate_to_datetime(
        response.headers["date"]
    )
    assert gap == timedelta(seconds=5)
    assert response.json() == {"detail": "Request was throttled. Expected available in 5 seconds."}


@pytest.mark.asyncio
async def test_a_malformed_retry_after_goes_out_verbatim() -> None:
    response = await get(FixtureApp({0: [Fault.rate_limited("soon")]}))
    assert response.headers["retry-after"] == "soon"
    assert response.json() == {"detail": "Request was throttled."}


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_hang_is_cut_short_only_by_asyncio_timeout() -> None:
    app = FixtureApp({0: [Fault.hang()]})
    loop = asyncio.get_running_loop()
    async with in_process_client(app) as client:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(10):
                await client.get(LAUNCHES_PATH)
        assert loop.time() == pytest.approx(10)
        retry = await client.get(LAUNCHES_PATH)
    assert retry.status_code == 200
    assert [(e.nth, e.status, e.fault) for e in app.log] == [(1, None, "hang"), (2, 200, None)]


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_asgi_transport_ignores_httpx_timeouts() -> None:
    # The fact build 05 rests on: httpx's timeout=1 does not stop an in-process hang.
    app = FixtureApp({0: [Fault.hang(3600)]})
    loop = asyncio.get_running_loop()
    response = await get(app, timeout=1)
    assert response.status_code == 200
    assert loop.time() == pytest.approx(3600)


@pytest.mark.asyncio
async def test_bad_json_is_a_200_that_does_not_parse() -> None:
    response = await get(FixtureApp({0: [Fault.bad_json()]}))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    with pytest.raises(json.JSONDecodeError):
        response.json()


@pytest.mark.asyncio
async def test_a_revised_page_changes_one_launch_between_fetches() -> None:
    app = FixtureApp({0: [None, Fault.revised()]})
    first, second, third = (r.json()["results"] for r in await get_all(app, "", "", ""))
    assert first == third == etl.launch_results()[:10]
    assert second[1:] == first[1:]
    assert second[0]["id"] == first[0]["id"]
    assert {k for k in first[0] if first[0][k] != second[0][k]} == {"net"}
    assert (first[0]["net"], second[0]["net"]) == ("2023-01-05T05:45:00Z", "2023-01-06T05:45:00Z")


@pytest.mark.asyncio
async def test_inserted_launches_stay_at_the_top_and_shift_every_later_page() -> None:
    original = etl.launch_results()[:30]
    app = FixtureApp({10: [Fault.inserted(3)]}, results=original)
    first, second, again = (r.json() for r in await get_all(app, "", "?offset=10", "?offset=10"))
    assert (first["count"], second["count"], again["count"]) == (30, 33, 33)
    assert first["results"] == original[:10]
    # The page at offset 10 starts with the three launches that ended the page before.
    assert second["results"] == again["results"] == original[7:17]
    assert [e.fault for e in app.log] == [None, "inserted@3", None]
    new = app.results[:3]
    assert app.results[3:] == original
    assert [r["name"] for r in new] == [f"Inserted launch {n}" for n in (1, 2, 3)]
    assert len({r["id"] for r in app.results}) == 33
    # Each a day before the one below it: a listing sorted by net stays sorted.
    assert [r["net"][:10] for r in new] == ["2023-01-02", "2023-01-03", "2023-01-04"]
    assert all(isinstance(etl.Launch.from_api(r), etl.Launch) for r in new)
    # The same script in a fresh app inserts the same launches, ids included.
    twin = FixtureApp({10: Fault.inserted(3)}, results=original)
    await get_all(twin, "?offset=10")
    assert twin.results == app.results
    app.reset()
    assert app.results == original and app.count == 30


@pytest.mark.asyncio
async def test_every_request_a_single_inserted_fault_hits_inserts_again() -> None:
    app = FixtureApp({0: Fault.inserted()}, results=etl.launch_results()[:5])
    pages = [r.json() for r in await get_all(app, "", "")]
    assert [p["count"] for p in pages] == [6, 7]
    assert [r["name"] for r in pages[1]["results"][:2]] == [
        "Inserted launch 2",
        "Inserted launch 1",
    ]


@pytest.mark.asyncio
async def test_next_can_point_back_to_an_earlier_page() -> None:
    app = FixtureApp({20: [Fault.next_to(0)]})
    page = (await get(app, "?limit=10&offset=20")).json()
    assert page["next"] == PAGE + "?limit=10"
    assert page["results"] == etl.launch_results()[20:30]


@pytest.mark.asyncio
async def test_an_empty_last_page_by_pointing_the_last_next_at_the_end() -> None:
    app = FixtureApp({290: [Fault.next_to(300)]})
    pages = []
    async with in_process_client(app) as client:
        url: str | None = PAGE + "?limit=10&offset=280"
        while url is not None:
            pages.append((await client.get(url)).json())
            url = pages[-1]["next"]
    assert [len(p["results"]) for p in pages] == [10, 10, 0]


@pytest.mark.asyncio
async def test_the_log_records_every_request_and_reset_starts_the_script_again() -> None:
    seen = []
    app = FixtureApp({0: [Fault.unavailable(1)]}, on_request=seen.append)
    await get_all(app, "?limit=5", "?limit=5")
    assert [str(e) for e in app.log] == [
        "  1 GET offset=0 (#1) -> 503 [503@1]",
        "  2 GET offset=0 (#2) -> 200",
    ]
    assert seen == app.log
    app.reset()
    assert app.log == [] and app.fetches(0) == 0
    assert (await get(app)).status_code == 503


@pytest.mark.asyncio
async def test_two_apps_with_the_same_script_answer_identically() -> None:
    script = {0: [Fault.unavailable(1), None, Fault.revised()]}
    runs = []
    for _ in range(2):
        responses = await get_all(FixtureApp(script, clock=frozen), "", "", "")
        runs.append([(r.status_code, dict(r.headers), r.content) for r in responses])
    assert runs[0] == runs[1]


# --- the slow tail, and a rate limit, on virtual time -------------------------------------------


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_slow_tail_answers_each_request_after_its_own_delay() -> None:
    fault = Fault.slow_tail(median=0.05, tail=0.0)
    app = FixtureApp({0: fault})
    loop = asyncio.get_running_loop()
    took = []
    async with in_process_client(app) as client:
        for _ in range(5):
            start = loop.time()
            assert (await client.get(LAUNCHES_PATH)).status_code == 200
            took.append(loop.time() - start)
    assert took == pytest.approx([fault.delay(0, n) for n in range(1, 6)], abs=1e-5)
    assert [e.delay for e in app.log] == [fault.delay(0, n) for n in range(1, 6)]
    assert {e.fault for e in app.log} == {"slow@0.05:0:30:0"}


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_stall_in_the_slow_tail_is_cut_short_by_asyncio_timeout() -> None:
    app = FixtureApp({0: Fault.slow_tail(tail=1.0, stall=30.0)})
    loop = asyncio.get_running_loop()
    async with in_process_client(app) as client:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.25):
                await client.get(LAUNCHES_PATH)
    assert loop.time() == pytest.approx(0.25)
    assert [(e.status, e.delay) for e in app.log] == [(None, 30.0)]


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_rate_limit_refuses_the_excess_with_retry_after_and_counts_no_page() -> None:
    app = FixtureApp({0: [Fault.unavailable(), None]}, rate_limit=RateLimit(2))
    async with in_process_client(app) as client:
        burst = [await client.get(LAUNCHES_PATH) for _ in range(4)]
        await asyncio.sleep(1.0)
        later = await client.get(LAUNCHES_PATH)
    assert [r.status_code for r in burst] == [503, 200, 429, 429]
    assert burst[2].headers["retry-after"] == "1"
    assert burst[2].json() == {"detail": "Request was throttled. Expected available in 1 second."}
    assert later.status_code == 200
    # Refused requests advanced no page's script: the fifth request is the page's third.
    assert [(e.nth, e.status, e.fault) for e in app.log] == [
        (1, 503, "503"),
        (2, 200, None),
        (None, 429, "throttled"),
        (None, 429, "throttled"),
        (3, 200, None),
    ]


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_reset_empties_the_rate_limits_window() -> None:
    app = FixtureApp(rate_limit=RateLimit(1, per=60.0))
    assert (await get(app)).status_code == 200
    assert (await get(app)).status_code == 429
    app.reset()
    assert (await get(app)).status_code == 200


@pytest.mark.asyncio
async def test_without_a_rate_limit_a_burst_is_always_served() -> None:
    app = FixtureApp()
    assert app.throttle is None
    assert {r.status_code for r in await get_all(app, *[""] * 20)} == {200}
