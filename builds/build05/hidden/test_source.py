"""Build 05's judges of SpaceDevsSource (step 3): pages followed to the end, retries,
Retry-After from the server, the page deadline, errors that are not retried.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

from builds.build05.hidden import probes as P
from builds.build05.hidden.expected import (
    BACKOFF,
    DATE_SLACK,
    PARSE_DELAY,
    backoff_of,
    listing_ids,
    plain_pages,
    requested,
    requests,
    runs_to_the_end,
    seeded,
    stops_with,
    yields,
)
from grader.suites.judging import Observed, check, equal
from workbook.checking.feedback import show_outcome


def source_call(query: str, script: str = "", options: str = "") -> str:
    extra = f", {options}" if options else ""
    tail = f", {script}" if script else ""
    return f"SpaceDevsSource(client, LISTING + {query!r}{extra}).launches(){tail}"


def test_follows_next_until_null(observed: Observed) -> None:
    seen, rng = seeded(observed, "follows_next_until_null")
    ids = listing_ids(rng)
    for key, limit, count in (("by_100", 100, 300), ("by_7", 7, P.BY_7)):
        call = source_call(f"?limit={limit}", f"{count} launches")
        run = seen[key]
        runs_to_the_end(run, call)
        yields(run, call, ids[:count], "Follow page['next'] until it is None.")
        requested(run, call, plain_pages(limit, count), "One request per page, in order.")


def test_retries_503_then_continues(observed: Observed) -> None:
    seen, rng = seeded(observed, "retries_503_then_continues")
    ids = listing_ids(rng)[: P.RETRIED]
    run = seen
    call = source_call("?limit=10", "the page at offset 10 answering 503 twice")
    runs_to_the_end(run, call)
    yields(run, call, ids)
    requested(
        run,
        call,
        requests((0, 1, 0.0), (10, 1, 0.0), (10, 2, 0.2), (10, 3, 0.6), (20, 1, 0.6)),
        "Each page through with_retry(self.policy, ...): 0.2 s, then 0.4 s of backoff.",
    )


def test_honors_retry_after_on_429(observed: Observed) -> None:
    seen, rng = seeded(observed, "honors_retry_after_on_429")
    ids = listing_ids(rng)[: P.RETRIED]
    run = seen
    call = source_call("?limit=10", "429 with Retry-After 5 at offset 10, 12 at offset 20")
    runs_to_the_end(run, call)
    yields(run, call, ids)
    requested(
        run,
        call,
        requests((0, 1, 0.0), (10, 1, 0.0), (10, 2, 5.0), (20, 1, 5.0), (20, 2, 17.0)),
        "Wait what Retry-After says: RateLimited(seconds) carries it to with_retry.",
    )


def test_page_deadline_cuts_a_hang(observed: Observed) -> None:
    seen, rng = seeded(observed, "page_deadline_cuts_a_hang")
    ids = listing_ids(rng)[: P.RETRIED]
    for key, timeout in (("ten", 10.0), ("four", 4.0)):
        run = seen[key]
        call = source_call(
            "?limit=10",
            "the page at offset 10 silent for 600 s once",
            f"page_timeout={timeout:g}",
        )
        runs_to_the_end(run, call)
        yields(run, call, ids)
        at = timeout + BACKOFF[0]
        requested(
            run,
            call,
            requests((0, 1, 0.0), (10, 1, 0.0), (10, 2, at), (20, 1, at)),
            "Every attempt inside asyncio.timeout(self.page_timeout); the deadline is a"
            " RequestTimeout, retried after the backoff.",
        )


def test_follows_next_with_any_page_size(observed: Observed) -> None:
    seen, rng = seeded(observed, "follows_next_with_any_page_size")
    ids = listing_ids(rng)
    for key, query, limit, count in (
        ("default", "", 10, P.SHORT),
        ("clamped", "?limit=1000", 100, 300),
        ("by_1", "?limit=1", 1, 5),
    ):
        call = source_call(query, f"{count} launches")
        run = seen[key]
        runs_to_the_end(run, call)
        yields(run, call, ids[:count])
        requested(
            run,
            call,
            plain_pages(limit, count),
            "Follow the server's next links as given: the page size is the server's call.",
        )


def test_empty_last_page_ends_the_run(observed: Observed) -> None:
    seen, rng = seeded(observed, "empty_last_page_ends_the_run")
    ids = listing_ids(rng)
    run = seen
    count = P.SHORT
    call = source_call(
        "?limit=10", f"{count} launches, the last page linking to an empty page after it"
    )
    runs_to_the_end(run, call)
    yields(run, call, ids[:count])
    requested(
        run,
        call,
        [*plain_pages(10, count), [count, 1, 0.0]],
        "An empty page with next null ends it.",
    )


def test_empty_page_with_a_next_is_followed(observed: Observed) -> None:
    seen, rng = seeded(observed, "empty_page_with_a_next_is_followed")
    ids = listing_ids(rng)
    count, far = P.SHORT, P.SHORT + 100
    call = source_call(
        "?limit=10", f"{count} launches, page 2 linking to an empty page whose next is page 3"
    )
    runs_to_the_end(seen, call)
    yields(seen, call, ids[:count])
    requested(
        seen,
        call,
        [[0, 1, 0.0], [10, 1, 0.0], [far, 1, 0.0], *plain_pages(10, count)[2:]],
        "A page with no results may still have a next: stop only when next is None.",
    )


def test_a_source_reads_again_from_the_start(observed: Observed) -> None:
    seen, rng = seeded(observed, "a_source_reads_again_from_the_start")
    ids = listing_ids(rng)[: P.SHORT]
    call = source_call("?limit=7", f"{P.SHORT} launches, iterated twice over the same source")
    runs_to_the_end(seen, call)
    yields(seen, call, ids + ids, "Each run starts again at self.url and fetches every page.")
    pages = plain_pages(7, P.SHORT)
    requested(
        seen,
        call,
        [*pages, *[[offset, 2, at] for offset, _, at in pages]],
        "Keep what one run fetched in pages() itself, not on the source: a second run is new.",
    )


def test_cancelled_run_is_not_retried(observed: Observed) -> None:
    seen, rng = seeded(observed, "cancelled_run_is_not_retried")
    ids = listing_ids(rng)
    cancel_at = P.cancel_delay(rng)
    call = source_call(
        "?limit=10", f"the page at offset 10 hanging, the reader cancelled after {cancel_at:g} s"
    )
    check(
        seen["end"] == {"cancelled": True},
        call,
        show_outcome(seen["end"]) if "ok" not in seen["end"] else "it returned",
        "the run ends cancelled (asyncio.CancelledError reaches the caller)",
        "Catch only httpx's errors in fetch_page: a cancellation is not a network error, and"
        " with_retry must never see it as one.",
    )
    yields(seen, call, ids[:10])
    requested(seen, call, [[0, 1, 0.0], [10, 1, 0.0]], "No request after the cancellation.")


def test_next_leading_back_raises_parse_error(observed: Observed) -> None:
    seen, rng = seeded(observed, "next_leading_back_raises_parse_error")
    ids = listing_ids(rng)
    for back, run in zip((0, 10), seen["runs"], strict=True):
        call = source_call("?limit=10", f"the page at offset 20 linking back to offset {back}")
        stops_with(
            run,
            call,
            "ParseError",
            note="Remember the URLs this run fetched; a next among them is a loop: raise"
            " ParseError instead of fetching it again.",
        )
        yields(run, call, ids[:30], "The pages before the loop are yielded.")
        requested(run, call, plain_pages(10, 30), "The repeated page is never requested.")


def test_retry_after_from_the_server_is_honoured(observed: Observed) -> None:
    seen, rng = seeded(observed, "retry_after_from_the_server_is_honoured")
    ids = listing_ids(rng)
    run = seen
    call = source_call(
        "?limit=10",
        "offset 10: 429 Retry-After 2, then 7; offset 20: 503 Retry-After 3; offset 30: 429"
        " Retry-After 30; offset 40: 503 Retry-After 'soon'",
    )
    runs_to_the_end(run, call)
    yields(run, call, ids[:60])
    requested(
        run,
        call,
        requests(
            (0, 1, 0.0),
            (10, 1, 0.0),
            (10, 2, 2.0),
            (10, 3, 9.0),
            (20, 1, 9.0),
            (20, 2, 12.0),
            (30, 1, 12.0),
            (30, 2, 42.0),
            (40, 1, 42.0),
            (40, 2, 42.2),
            (50, 1, 42.2),
        ),
        "Retry-After replaces the backoff, as sent (30 s too: it is not capped); a malformed"
        " one counts as none, so the backoff applies.",
    )


def test_retry_after_dates_from_the_server(observed: Observed) -> None:
    seen, rng = seeded(observed, "retry_after_dates_from_the_server")
    ids = listing_ids(rng)
    run = seen
    call = source_call(
        "?limit=10",
        "Retry-After 4 s after the response's Date: offset 10 as an IMF date, 20 as RFC 850, 30"
        " as asctime",
    )
    runs_to_the_end(run, call)
    yields(run, call, ids[:40])
    got = run["requests"]
    offsets = [entry[:2] for entry in got]
    equal(
        f"{call}: the requests (offset, its number for that page)",
        offsets,
        [[0, 1], [10, 1], [10, 2], [20, 1], [20, 2], [30, 1], [30, 2]],
    )
    for first, second in itertools.pairwise(got):
        if second[0] == first[0]:
            wait = round(second[2] - first[2], 6)
            check(
                4.0 - DATE_SLACK - PARSE_DELAY <= wait <= 4.0 + 1e-6,
                f"{call}: the wait before offset {second[0]}'s second request",
                f"{wait:g} s",
                "3 to 4 s: until the date (the server writes it to the whole second)",
                "Each date form, with a naive asctime as UTC, minus datetime.now(UTC).",
            )


def test_hang_trips_the_page_deadline(observed: Observed) -> None:
    seen, rng = seeded(observed, "hang_trips_the_page_deadline")
    ids = listing_ids(rng)
    run = seen
    call = source_call("?limit=10", "the page at offset 10 silent twice", "page_timeout=2.5")
    runs_to_the_end(run, call)
    yields(run, call, ids[:30])
    requested(
        run,
        call,
        requests((0, 1, 0.0), (10, 1, 0.0), (10, 2, 2.7), (10, 3, 5.6), (20, 1, 5.6)),
        "2.5 s deadline, 0.2 s backoff, 2.5 s deadline, 0.4 s backoff, then the page.",
    )


def test_hang_every_time_raises_request_timeout(observed: Observed) -> None:
    seen, rng = seeded(observed, "hang_every_time_raises_request_timeout")
    listing_ids(rng)  # the listing comes first; nothing of it is yielded here
    attempts, timeout = P.hang_inputs(rng)
    for run, tries, page_timeout, options in (
        (seen["fixed"], 3, 10.0, "policy=RetryPolicy(max_attempts=3)"),
        (
            seen["drawn"],
            attempts,
            timeout,
            f"policy=RetryPolicy(max_attempts={attempts}), page_timeout={timeout:g}",
        ),
    ):
        call = source_call("?limit=10", "the first page never answering", options)
        stops_with(
            run,
            call,
            "RequestTimeout",
            note="Each attempt's deadline is a RequestTimeout; after the last attempt with_retry"
            " raises it (the default page_timeout is 10 s).",
        )
        times, now = [], 0.0
        for n in range(1, tries + 1):
            times.append((0, n, round(now, 6)))
            now += page_timeout + (backoff_of(n) if n < tries else 0.0)
        requested(run, call, requests(*times))
        equal(
            f"{call}: virtual seconds until it raised",
            run["elapsed"],
            round(now, 6),
            tolerance=1e-6,
        )


def test_malformed_json_is_not_retried(observed: Observed) -> None:
    seen, rng = seeded(observed, "malformed_json_is_not_retried")
    ids = listing_ids(rng)
    for key, offset, what in (("cut_off", 10, "a page cut off"), ("html", 30, "an HTML page")):
        run = seen[key]
        call = source_call("?limit=10", f"offset {offset} answering 200 with {what}")
        stops_with(run, call, "ParseError", note="A body that is not a page is permanent.")
        yields(run, call, ids[:offset])
        requested(run, call, plain_pages(10, offset + 10), "Never repeat a ParseError.")


def test_client_error_mid_run_is_not_retried(observed: Observed) -> None:
    seen, rng = seeded(observed, "client_error_mid_run_is_not_retried")
    ids = listing_ids(rng)
    for key, offset, status in (("not_found", 20, 404), ("gone", 0, 410)):
        run = seen[key]
        call = source_call("?limit=10", f"offset {offset} answering {status}")
        stops_with(run, call, "HttpStatus", status, "A 4xx is permanent: raised at once.")
        yields(run, call, ids[:offset])
        requested(run, call, plain_pages(10, offset + 10), "Requested once, never retried.")


def test_transport_errors_become_etl_errors(observed: Observed) -> None:
    seen, rng = seeded(observed, "transport_errors_become_etl_errors")
    ids = listing_ids(rng)
    run = seen["recovered"]
    faults = ", ".join(f"#{n} {name}" for n, name in P.TRANSPORT_FAULTS.items())
    call = source_call("?limit=50", f"httpx raising on requests {faults}")
    runs_to_the_end(run, call)
    yields(run, call, ids)
    requested(
        run,
        call,
        requests(
            (0, 1, 0.0),
            (50, 1, 0.0),
            (50, 2, 0.2),
            (50, 3, 0.6),
            (100, 1, 0.6),
            (100, 2, 0.8),
            (100, 3, 1.2),
            (150, 1, 1.2),
            (150, 2, 1.4),
            (150, 3, 1.8),
            (200, 1, 1.8),
            (200, 2, 2.0),
            (200, 3, 2.4),
            (250, 1, 2.4),
        ),
        "Every httpx.TimeoutException becomes RequestTimeout; httpx.NetworkError and"
        " RemoteProtocolError become NetworkError: all transient, so retried (a GET is"
        " idempotent).",
    )
    kinds = {"ConnectError": "NetworkError", "ReadTimeout": "RequestTimeout"}
    kinds["RemoteProtocolError"] = "NetworkError"
    for name, run in zip(P.EXHAUSTING, seen["exhausted"], strict=True):
        call = source_call(
            "?limit=10", f"httpx raising {name} every time", "policy=RetryPolicy(max_attempts=2)"
        )
        stops_with(run, call, kinds[name], note=f"httpx.{name} becomes etl's {kinds[name]}.")
        requested(run, call, requests((0, 1, 0.0), (0, 2, 0.2)))


def test_page_changed_between_fetches_is_read_as_sent(observed: Observed) -> None:
    seen, rng = seeded(observed, "page_changed_between_fetches_is_read_as_sent")
    ids = listing_ids(rng)
    run = seen
    call = source_call("?limit=10", "the first page a 503, then sent again with one launch moved")
    runs_to_the_end(run, call)
    results = [r for r in P.RESULTS if r["id"] in set(ids[:20])]
    by_id = {r["id"]: r for r in results}
    first = by_id[ids[0]]
    moved = datetime.fromisoformat(first["net"].replace("Z", "+00:00")) + timedelta(days=1)
    expected = [[i, by_id[i]["net"]] for i in ids[:20]]
    expected[0] = [first["id"], moved.strftime("%Y-%m-%dT%H:%M:%SZ")]
    equal(
        f"{call}: the launches yielded (id, net)",
        run["items"],
        expected,
        say="the page as the successful attempt sent it: the first launch one day later",
        note="Yield what the attempt that succeeded returned; nothing from the failed one.",
    )
