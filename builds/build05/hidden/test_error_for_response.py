"""Build 05's judges of error_for_response (step 2): each status's error, bodies that
are not a page, Retry-After carried, now defaulting to the current UTC time.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from builds.build05.hidden import probes as P
from builds.build05.hidden.expected import (
    described_wait,
    expected_error,
    judge_response,
    seeded,
    value_of,
)
from grader.suites.judging import JSON, Observed, check, listed


def judge_responses(
    returned: JSON, specs: Sequence[Any], expected: Sequence[JSON], note: str = ""
) -> None:
    """Each response's answer against the expected one (None: expected_error's)."""
    answers = listed(returned, len(specs), "error_for_response of each response", "answers")
    for spec, got, want in zip(specs, answers, expected, strict=True):
        judge_response(got, spec, want, note)


PARSE_ERROR: JSON = {"kind": "ParseError", "status": None, "retry_after": None}


def test_maps_statuses_to_errors(observed: Observed) -> None:
    seen, rng = seeded(observed, "maps_statuses_to_errors")
    specs = (*P.STATUS_CASES, P.draw_transient(rng, dates=False), P.draw_permanent(rng))
    judge_response(seen["returned"][0], specs[0], None, "A 2xx holding a page is no error.")
    judge_responses(seen["returned"][1:], specs[1:], [expected_error(spec) for spec in specs[1:]])


def judge_alike(
    seen: JSON,
    rng: random.Random,
    fixed: Sequence[Any],
    draw: Callable[[random.Random], Any],
    expected: JSON,
    note: str,
) -> None:
    """Responses whose answers are all `expected`: the fixed ones and two drawn runs, each run
    exactly as long as drawn here (what binds a report of alike answers to these inputs)."""
    cases, more = P.alike(rng, fixed, draw)
    answers = listed(seen["returned"], len(cases), "answers") + listed(seen["more"], len(more), "")
    judge_responses(answers, [*cases, *more], [expected] * len(answers), note)


def test_bad_json_is_a_parse_error(observed: Observed) -> None:
    seen, rng = seeded(observed, "bad_json_is_a_parse_error")
    judge_alike(
        seen,
        rng,
        P.NOT_PAGES[:5],
        P.draw_not_page,
        PARSE_ERROR,
        "Return (not raise) ParseError when a 2xx body is not a page.",
    )


def test_every_2xx_page_is_none(observed: Observed) -> None:
    seen, rng = seeded(observed, "every_2xx_page_is_none")
    judge_alike(
        seen,
        rng,
        P.GOOD_PAGES,
        P.draw_good_page,
        None,
        "Every 2xx (200 <= status < 300) whose body is a page is None, whatever else the"
        " page holds.",
    )


def test_bodies_that_are_not_a_page_are_parse_errors(observed: Observed) -> None:
    seen, rng = seeded(observed, "bodies_that_are_not_a_page_are_parse_errors")
    judge_alike(
        seen,
        rng,
        P.NOT_PAGES,
        P.draw_not_page,
        PARSE_ERROR,
        "A page is a JSON object with a results list and a next that is null or a string;"
        " anything else (not JSON, not UTF-8, no body, another shape) is a ParseError.",
    )


def test_transient_statuses_carry_retry_after(observed: Observed) -> None:
    seen, rng = seeded(observed, "transient_statuses_carry_retry_after")
    specs = (*P.TRANSIENT_CASES, P.draw_transient(rng), P.draw_transient(rng))
    judge_responses(
        seen["returned"],
        specs,
        [expected_error(spec) for spec in specs],
        "429 is RateLimited(retry_after); 408, 500, 502, 503 and 504 are HttpStatus(status,"
        " message, retry_after), with retry_after from parse_retry_after(header, now).",
    )


def test_other_statuses_are_permanent(observed: Observed) -> None:
    seen, rng = seeded(observed, "other_statuses_are_permanent")
    specs = (*P.PERMANENT_CASES, P.draw_permanent(rng), P.draw_permanent(rng))
    judge_responses(
        seen["returned"],
        specs,
        [expected_error(spec) for spec in specs],
        "Every other status is HttpStatus(status): permanent, so with_retry raises it at"
        " once (a redirect too: httpx did not follow it).",
    )


def test_now_defaults_to_the_current_utc_time(observed: Observed) -> None:
    seen, rng = seeded(observed, "now_defaults_to_the_current_utc_time")
    offset = P.default_now_offset(rng)
    call = (
        f"error_for_response(a 429 with Retry-After an IMF date {offset} s from now), no now given"
    )
    for key, when in (("returned", ""), ("loaded_a_day_ago", ", the module loaded a day ago")):
        got = value_of(seen[key], call + when, "RateLimited")
        returned = value_of(got, call + when, "RateLimited")
        wait = returned.get("retry_after") if isinstance(returned, dict) else None
        check(
            isinstance(returned, dict)
            and returned.get("kind") == "RateLimited"
            and type(wait) is float
            and offset - 2.0 <= wait <= offset + 1e-6,
            call + when,
            described_wait(returned, offset),
            f"RateLimited with retry_after about {offset - 1} to {offset} seconds",
            "When now is None, use datetime.now(UTC): aware, in UTC whatever the machine's zone"
            " (datetime.now() and datetime.utcnow() are naive), and read at each call (a default"
            " of `now=datetime.now(UTC)` is read once, when the function is defined).",
        )
