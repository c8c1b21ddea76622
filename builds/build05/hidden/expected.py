"""Build 05's judges, their shared half: expected values and readers of observations.

The judges are the ``test_*.py`` beside this module (``test_retry_after``,
``test_error_for_response``, ``test_source``, ``test_ingest``): one ``test_<name>(observed)``
per graded test of notebook 05 in ``workbook.toml``, run in the grading process on the probes'
observations. Expected values are computed here from the specs: Retry-After from RFC 9110's
arithmetic, an error's kind from its status, the launches from the fixture's own data, each
request's virtual time from the policy's backoff and the server's scripted waits. None of it
enters the child.

What the probes report is a claim, so each judge first draws the submission's own inputs
again (`seeded`, `Observed.seeded` bound to this build's probes: the order the fixture served
its launches in, the Retry-After values and dates drawn beside the fixed ones) and judges the
observation against those; errors are judged by class (`is_kind`), and the files ingested into
are read here, from the copies the probes kept (`kept_ids`, `file_holds`), not from what the
child said they held. The graded versions of the visible tests use more inputs than the
self-checks. Judging the same observations twice gives the same verdicts. No judges module is
imported here.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Any

from builds.build05.hidden import probes as P
from etl import TRANSIENT_STATUSES
from grader.suites.judging import (
    JSON,
    TIME_TOLERANCE,
    Fail,
    Observed,
    check,
    equal,
    is_kind,
    learner_text,
    not_done,
    ok,
    same_value,
)
from workbook.checking.feedback import message, show_json, show_outcome

#: The default policy's waits after failed attempts 1, 2, 3.
BACKOFF = (0.2, 0.4, 0.8)


def backoff_of(attempt: int) -> float:
    """The default policy's wait after failed attempt `attempt`."""
    return float(min(0.2 * 2 ** (attempt - 1), 10.0))


#: An HTTP-date has whole seconds and the fixture renders it from the wall clock, so a date
#: "4 s after the response" is 3 to 4 s after the client reads it.
DATE_SLACK = 1.0
#: Real time the client may take between the fixture's rendering of a date and its reading of
#: it (a busy machine): part of a second more, never a whole one.
PARSE_DELAY = 0.25


#: ``seeded(observed, name)``: the probe's observation and the parent's own generator of its
#: inputs, `Observed.seeded` bound to this build's probes.
seeded = partial(Observed.seeded, probes=P.PROBES)


def listing_ids(rng: random.Random) -> list[str]:
    """The ids of the launches the fixture served this submission, in order."""
    return [result["id"] for result in P.listing(rng)]


# ─────────────────────────────────────────────────────────────── expected values


def seconds_until(value: str, now: datetime) -> float | None:
    """RFC 9110's Retry-After, from its grammar: what every answer here is judged against."""
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, OverflowError):  # a year past 2**31 overflows
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=now.tzinfo)
    return max(0.0, (when - now).total_seconds())


def date_seconds(offset: int, now: datetime) -> float:
    """Seconds from `now` to the date rendered `offset` s after it (rendering drops the
    fraction of a second)."""
    when = (now + timedelta(seconds=offset)).replace(microsecond=0)
    return max(0.0, (when - now).total_seconds())


def requests(*spec: tuple[int, int, float]) -> list[list[Any]]:
    return [[offset, nth, at] for offset, nth, at in spec]


def plain_pages(limit: int, count: int = 300, at: float = 0.0) -> list[list[Any]]:
    return [[offset, 1, at] for offset in range(0, count, limit)]


# ─────────────────────────────────────────────────────────────── reading observations


def value_of(seen: JSON, call: str, expected: str = "a value") -> JSON:
    return ok(seen, call, expected)


def retry_call(value: str | None, now: datetime = P.NOW) -> str:
    when = "now" if now == P.NOW else f"now={now.isoformat()}"
    return f"parse_retry_after({value!r}, {when})"


def judge_retry_after(
    seen: JSON, value: str | None, expected: float | None, note: str = ""
) -> None:
    call = retry_call(value)
    got = value_of(seen, call, show_json(expected))
    equal(call, got, expected, tolerance=1e-9, note=note)


def describe(returned: JSON) -> str:
    if returned is None:
        return "None"
    if not isinstance(returned, dict) or "kind" not in returned:
        return show_json(returned)
    if returned["kind"] == "other":
        return f"a {learner_text(returned.get('type'))} (not one of etl's error kinds)"
    parts = [learner_text(returned["kind"])]
    if returned.get("status") is not None:
        parts.append(f"status={show_json(returned['status'])}")
    parts.append(f"retry_after={show_json(returned.get('retry_after'))}")
    return ", ".join(parts)


def described_wait(returned: JSON, offset: int) -> str:
    """`describe`, with a wait within a minute of `offset` in whole seconds (down) and any
    other in whole minutes from it: the probe's clock is stopped, but code that reads
    another clock (``time.time()``) sees the real one, whose fraction of a second differs
    from run to run, and the feedback must not."""
    wait = returned.get("retry_after") if isinstance(returned, dict) else None
    if type(wait) is not float:
        return describe(returned)
    head = describe({**returned, "retry_after": None}).rsplit(", retry_after=", 1)[0]
    if abs(wait - offset) < 60:
        return f"{head}, retry_after about {math.floor(wait + 1e-6)} s"
    return f"{head}, retry_after {round((wait - offset) / 60):+d} min from {offset} s"


def response_call(spec: Sequence[Any]) -> str:
    return f"error_for_response(a response: {spec[0]}, now)"


def expected_error(spec: Sequence[Any], now: datetime = P.NOW) -> JSON:
    """What error_for_response must return for a non-2xx response, by the spec's table."""
    _, status, headers, _ = spec
    header = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    wait = None if header is None else seconds_until(header, now)
    if status == 429:
        return {"kind": "RateLimited", "status": None, "retry_after": wait}
    if status in TRANSIENT_STATUSES:
        return {"kind": "HttpStatus", "status": status, "retry_after": wait}
    return {"kind": "HttpStatus", "status": status}


def judge_response(seen: JSON, spec: Sequence[Any], expected: JSON, note: str = "") -> None:
    call = response_call(spec)
    got = value_of(seen, call, describe(expected))
    if expected is None or got is None or "retry_after" in expected:
        matches = same_value(got, expected, 1e-9)
    else:  # a permanent status: its Retry-After does not matter, nobody will wait on it
        matches = isinstance(got, dict) and {k: got.get(k) for k in expected} == expected
    check(matches, call, describe(got), describe(expected), note)


def end_of(run: JSON, call: str) -> JSON:
    end = run["end"]
    if "ok" not in end:
        not_done(end, call)
    return end


def runs_to_the_end(run: JSON, call: str) -> None:
    end = end_of(run, call)
    if "ok" not in end:
        note = ""
        if end.get("raised") == "TimeoutError":
            note = (
                "asyncio.timeout raised the built-in TimeoutError, which is not an EtlError:"
                " with_retry let it through. Raise RequestTimeout instead."
            )
        elif end.get("raised") == "RuntimeError" and "reuse" in str(end.get("message")):
            note = "Give with_retry an op that makes a new coroutine per call: functools.partial."
        elif end.get("raised") == "VirtualDeadline":
            note = "It never finished: is every attempt bounded by asyncio.timeout(page_timeout)?"
        elif end.get("raised") == "Runaway":
            note = "It kept requesting pages: does it stop when next is None?"
        raise Fail(message(call, show_outcome(end), "every launch, without an error", note))


def stops_with(run: JSON, call: str, kind: str, status: int | None = None, note: str = "") -> None:
    end = end_of(run, call)
    right = is_kind(end, kind)
    if status is not None:
        right = right and end.get("status") == status
    wanted = f"raises etl's {kind}" + (f"({status})" if status is not None else "")
    if not right:
        got = "it returned" if "ok" in end else show_outcome(end)
        raise Fail(message(call, got, wanted, note))


def yields(run: JSON, call: str, expected: list[str], note: str = "") -> None:
    items = run["items"]
    odd = next((i for i in items if not isinstance(i, str)), None)
    check(
        odd is None,
        f"{call}: what it yielded",
        show_json(odd),
        "etl.Launch rows (Launch.from_api of each result)",
    )
    if items != expected:
        first = next(
            (n for n, (a, b) in enumerate(zip(items, expected, strict=False)) if a != b),
            min(len(items), len(expected)),
        )
        raise Fail(
            message(
                f"{call}: the launches yielded",
                f"{len(items)} launches, differing from the listing at position {first}",
                f"{len(expected)} launches, the listing's, in order",
                note,
            )
        )


def requested(run: JSON, call: str, expected: list[list[Any]], note: str = "") -> None:
    got = [entry[:3] for entry in run["requests"]]
    if same_value(got, expected, TIME_TOLERANCE):
        return
    first = next(
        (
            n
            for n, (a, b) in enumerate(zip(got, expected, strict=False))
            if not same_value(a, b, TIME_TOLERANCE)
        ),
        min(len(got), len(expected)),
    )
    shown = "; ".join(_request_text(r) for r in got[max(0, first - 1) : first + 3]) or "none"
    wanted = "; ".join(_request_text(r) for r in expected[max(0, first - 1) : first + 3]) or "none"
    raise Fail(
        message(
            f"{call}: the requests (offset, its number for that page, virtual time)",
            f"{len(got)} requests; from #{first}: {shown}",
            f"{len(expected)} requests; from #{first}: {wanted}",
            note,
        )
    )


def _request_text(entry: Sequence[Any]) -> str:
    offset, nth, at = entry[:3]
    return f"offset {show_json(offset)} #{show_json(nth)} at {float(at):g} s"


def kept_ids(observed: Observed, run: JSON) -> list[JSON]:
    """The id of each line of the file the probe kept after `run`, read here as a restart
    reads it (`etl.read_jsonl`): blank lines skipped, a line that is not a row as
    ``{"bad": ...}``, and a last line without a newline counted when it parses and left out
    when it does not (the torn end of a write: never a point lost, never a row counted)."""
    ref = run.get("file") if isinstance(run, dict) else None
    data = observed.artefact(ref)
    if data is None:
        if isinstance(ref, dict) and isinstance(ref.get("files"), dict) and "" in ref["files"]:
            return []  # no file was written
        raise Fail(message("the file it wrote", "no copy of the file", "the file itself"))
    ids: list[JSON] = []
    lines = data.decode("utf-8", "replace").split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            if number == len(lines):  # no newline after it: the torn end of a write
                break
            ids.append({"bad": line[:80]})
            continue
        try:
            ids.append(row["id"])
        except (KeyError, TypeError, IndexError):
            ids.append({"bad": line[:80]})
    return ids


def file_holds(
    observed: Observed, run: JSON, call: str, expected: list[str], note: str = ""
) -> None:
    """Fail unless the file holds exactly the rows `expected`, in order: read here, from the
    copy of the file the probe kept, not from what the child reported."""
    ids = kept_ids(observed, run)
    if ids == expected:
        return
    duplicates = len(ids) - len(set(map(str, ids)))
    got = f"{len(ids)} lines" + (f", {duplicates} of them repeats" if duplicates else "")
    raise Fail(
        message(
            f"{call}: the file afterwards", got, f"{len(expected)} lines, each launch once", note
        )
    )
