"""Build 03's probes: run in the grading child, next to the learner's exported answers.

Each probe calls the learner's code on inputs defined here and returns what it saw as plain
JSON (`observe.plain`: exact types recorded, exceptions by class name and by the class they
really are, times on a virtual clock). No expected value lives in this file: the judges
(``judges.py``, in the parent) compute those. Every probe is *seeded*: besides the fixed
inputs below (which catch the known bugs), it draws inputs of the same kind from the
generator `grader.suites.observe` seeds with the submission's own exported text, so an observation
recorded from other answers, or written in advance, was made for other inputs. The drawing
functions (``draw_*``) are shared with the judges, which import this file and draw the same
inputs from the same text. Probing the same answers twice gives the same observations (apart
from ``real`` seconds).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from types import ModuleType
from typing import Any, cast

from etl import (
    HttpStatus,
    Launch,
    NetworkError,
    ParseError,
    RateLimited,
    RequestTimeout,
    launches,
)
from grader.suites.observe import (
    JSON,
    Clock,
    Probes,
    attempt,
    attempt_call,
    need,
    new_record,
    plain,
    raised,
    suite_salt,
    tick,
    vrun,
)

PROBES = Probes(suite_salt(__file__))
#: Parsed once, when the fork server imports this file: every worker inherits them.
LAUNCHES: tuple[Launch, ...] = tuple(launches())

# ─────────────────────────────────────────────────────────────── inputs (shared with judges)


@dataclass(frozen=True)
class Row:
    """Notebook 02's toy row (the probes' own copy: the learner's may have been edited)."""

    name: str
    alt_km: float


@dataclass(frozen=True)
class Reading:
    """Any dataclass row must work: fields declared out of alphabetical order, JSON types."""

    zeta: str
    alpha: int
    ok: bool
    note: str | None
    ratio: float


FNV_INPUTS: tuple[bytes, ...] = (
    b"",
    b"a",
    b"foobar",
    b"\xff\x00\x80",
    "Союз".encode(),
    bytes(range(256)),
    b"launch-200",  # its digest starts with a 0: hex(h)[2:] would drop it (15 digits)
)

CONTENT_ID_INPUTS: tuple[tuple[str, str], ...] = (
    ("row", "x"),
    ("row", "y"),
    ("launch", "ISS|420"),
    ("row", ""),
    ("", "row"),
    ("ab", "c"),
    ("a", "bc"),
    ("row", "Союз-2.1б — Байконур ✓"),
    ("kind with space", '{"alpha":1}'),
)


def sample_launches() -> list[Launch]:
    """A fixture launch, and one with its optional fields absent (None): fresh copies."""
    return [
        dataclasses.replace(LAUNCHES[0]),
        dataclasses.replace(LAUNCHES[1], mission=None, orbit=None),
    ]


def key_rows() -> list[Any]:
    """Rows whose keys are judged exactly: launches, non-ASCII text, -0.0, any dataclass."""
    first, second = sample_launches()
    return [
        first,
        second,
        dataclasses.replace(first, name="Союз-2.1б | Прогресс МС-27", pad="Baïkonour 31/6"),
        Row("ISS", 420.0),
        Row("Baïkonour", 0.09),
        Row("neg", -0.0),
        Reading(zeta="z", alpha=7, ok=True, note=None, ratio=0.5),
    ]


KEY_ROW_LABELS = (
    "launch (a fixture launch)",
    "launch_without_mission (mission=None, orbit=None)",
    'launch_in_cyrillic (name="Союз-2.1б | Прогресс МС-27", pad="Baïkonour 31/6")',
    'Row("ISS", 420.0)',
    'Row("Baïkonour", 0.09)',
    'Row("neg", -0.0)',
    'Reading(zeta="z", alpha=7, ok=True, note=None, ratio=0.5), fields declared out of order',
)


def unencodable_rows() -> list[Any]:
    """Rows with no canonical JSON form: NaN and infinities in float fields (json.dumps
    raises ValueError), and values JSON cannot hold (TypeError)."""
    base = sample_launches()[0]
    return [
        dataclasses.replace(base, latitude=math.nan),
        dataclasses.replace(base, longitude=math.inf),
        Row("Alpha", -math.inf),
        Row("Beta", math.nan),
        # Deliberately of the wrong types: values JSON cannot hold.
        dataclasses.replace(base, net=cast(Any, datetime(2026, 12, 2, tzinfo=UTC))),
        Row("Gamma", cast(Any, b"\x00\x01")),
    ]


UNENCODABLE_LABELS = (
    "a launch with latitude=math.nan",
    "a launch with longitude=math.inf",
    'Row("Alpha", -math.inf)',
    'Row("Beta", math.nan)',
    "a launch whose net is a datetime",
    'Row("Gamma", b"\\x00\\x01")',
)

# ─────────────────────────────────────────────────────────────── seeded inputs (shared)

#: Characters drawn texts are made of: ASCII, separators, accents, Cyrillic, a symbol.
ALPHABET = "abcxyz019 |-_.:/\"'Ωéü Союз✓"


def draw_text(rng: random.Random, low: int = 1, high: int = 24) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(low, high)))


def draw_bytes(rng: random.Random) -> bytes:
    return bytes(rng.randrange(256) for _ in range(rng.randint(1, 48)))


def draw_value(rng: random.Random) -> int:
    """A value for an op to return: whatever comes back must be that very value."""
    return rng.randrange(10**6, 10**7)


def draw_seconds(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 3)


#: Each sink probe draws its rows from a stripe of the launches of its own, so no two probes
#: share a row whatever is drawn (a sink that remembers keys beyond its own life, say on the
#: class, is caught the same way for every submission).
STRIPES = {
    "any": 0,
    "rerun_writes_zero_new_rows": 1,
    "distinct_rows_all_written": 2,
    "duplicates_within_a_batch_written_once": 3,
    "parse_failure_mid_batch_remembers_nothing": 4,
    "inner_failure_remembers_nothing_and_retry_writes": 5,
    "concurrent_loads_write_once": 6,
    "first_concurrent_load_fails_second_writes": 7,
    "with_seen_skips_preloaded_keys": 8,
    "each_sink_remembers_its_own_keys": 9,
}
STRIPE = len(LAUNCHES) // len(STRIPES)


def draw_launches(rng: random.Random, count: int, stripe: str = "any") -> list[Launch]:
    """`count` different fixture launches of `stripe`, in a drawn order, each with a drawn
    mark on its id (so that a row, and its key, is this submission's own)."""
    first = STRIPES[stripe] * STRIPE
    chosen = rng.sample(range(first, first + STRIPE), count)
    return [
        dataclasses.replace(LAUNCHES[i], id=f"{LAUNCHES[i].id}.{rng.randrange(16**6):06x}")
        for i in chosen
    ]


def draw_row(rng: random.Random) -> Row:
    return Row(draw_text(rng), draw_seconds(rng, -1000.0, 1000.0))


def draw_pairs(rng: random.Random, count: int) -> list[tuple[str, str]]:
    """(kind, canonical) pairs for content_id."""
    return [(draw_text(rng, 0, 8), draw_text(rng, 0, 40)) for _ in range(count)]


def draw_key_rows(rng: random.Random) -> list[Any]:
    """Rows whose keys are judged exactly, drawn: a launch renamed, a toy row, a reading."""
    launch = draw_launches(rng, 1)[0]
    return [
        dataclasses.replace(launch, name=draw_text(rng, 4, 30)),
        draw_row(rng),
        Reading(
            zeta=draw_text(rng),
            alpha=rng.randrange(-(10**9), 10**9),
            ok=rng.random() < 0.5,
            note=None if rng.random() < 0.5 else draw_text(rng),
            ratio=draw_seconds(rng, -5.0, 5.0),
        ),
    ]


def row_label(row: Any) -> str:
    """A drawn row as the judges' messages name it."""
    if type(row) is Launch:
        return f"the fixture launch {row.id} renamed {row.name!r}"
    return repr(row)


# Scripted outcomes for the retry loop: data, so the judges can replay them in tenacity.
Outcome = tuple[Any, ...]
NET: Outcome = ("NetworkError", "connection reset")
TIMEOUT: Outcome = ("RequestTimeout", "no answer in 30 s")
PARSE: Outcome = ("ParseError", "bad JSON")


def http(status: int, retry_after: float | None = None, message: str = "") -> Outcome:
    return ("HttpStatus", status, retry_after, message)


def limited(seconds: float | None) -> Outcome:
    return ("RateLimited", seconds)


def ok(value: Any) -> Outcome:
    return ("ok", value)


def make_outcome(spec: Outcome) -> Any:
    """The exception (or value) an outcome spec stands for: a new object every call."""
    kind = spec[0]
    if kind == "ok":
        return spec[1]
    if kind == "NetworkError":
        return NetworkError(spec[1])
    if kind == "RequestTimeout":
        return RequestTimeout(spec[1])
    if kind == "RateLimited":
        return RateLimited(spec[1])
    if kind == "HttpStatus":
        return HttpStatus(spec[1], spec[3] if len(spec) > 3 else "", retry_after_secs=spec[2])
    if kind == "ParseError":
        return ParseError(spec[1])
    if kind == "KeyError":
        return KeyError(spec[1])
    if kind == "TypeError":
        return TypeError(spec[1])
    raise ValueError(f"unknown outcome {spec!r}")


def draw_transient(rng: random.Random) -> Outcome:
    """A transient failure without a Retry-After: its wait is the backoff."""
    kind = rng.choice(("NetworkError", "RequestTimeout", "HttpStatus", "RateLimited"))
    if kind == "HttpStatus":
        return http(rng.choice((408, 500, 502, 503, 504)), None, draw_text(rng, 3, 20))
    if kind == "RateLimited":
        return limited(None)
    return (kind, draw_text(rng, 3, 20))


def draw_policy(rng: random.Random, attempts: tuple[int, int] = (2, 7)) -> dict[str, Any]:
    """A valid policy: base and cap drawn (the cap reached within the attempts, or not)."""
    base = draw_seconds(rng, 0.05, 2.0)
    return {
        "max_attempts": rng.randint(*attempts),
        "base_delay": base,
        "max_delay": round(base * rng.choice((1.0, 1.5, 3.0, 8.0, 100.0)), 3),
    }


#: (policy keyword arguments, outcomes): the tenacity cross-check replays each in both.
TENACITY_SCRIPTS: tuple[tuple[dict[str, Any], tuple[Outcome, ...]], ...] = (
    ({}, (NET, NET, ok(42))),
    ({}, (http(503),) * 5),
    (
        {"max_attempts": 6, "base_delay": 0.5, "max_delay": 2.0},
        (TIMEOUT, http(502), http(500), http(504), http(408), ok("done")),
    ),
    ({}, (http(404),)),
    ({}, (NET, PARSE, ok(1))),
    ({"max_attempts": 3}, (limited(1.5), limited(None), ok(None))),
    ({"max_attempts": 2}, (http(429, 7.0), http(429, 7.0))),
    ({"max_attempts": 5, "base_delay": 1.0, "max_delay": 1.0}, (NET,) * 5),
    ({"max_attempts": 8, "base_delay": 0.25, "max_delay": 4.0}, (TIMEOUT,) * 8),
)


def draw_script(rng: random.Random) -> tuple[dict[str, Any], tuple[Outcome, ...]]:
    """A scripted run: a drawn policy, failures (at least one; some with a Retry-After within
    the cap), then an end that may be a value, a permanent error, or none before the attempts
    run out. Every kind in it is in the fixed scripts too."""
    policy = draw_policy(rng)
    outcomes: list[Outcome] = []
    for _ in range(rng.randint(1, policy["max_attempts"])):
        if rng.random() < 0.3:  # within the cap, as in the fixed scripts
            outcomes.append(limited(draw_seconds(rng, 0.1, policy["max_delay"])))
        else:
            outcomes.append(draw_transient(rng))
    end = rng.random()
    if end < 0.5:
        outcomes.append(ok(draw_value(rng)))
    elif end < 0.75:
        outcomes.append(("ParseError", draw_text(rng, 3, 20)))
    else:
        outcomes.append(draw_transient(rng))
    return policy, tuple(outcomes)


#: (policy keyword arguments, outcomes) whose call times are judged exactly.
SCHEDULES: tuple[tuple[dict[str, Any], tuple[Outcome, ...]], ...] = (
    ({}, (http(503),)),  # repeated: every call fails
    ({"max_attempts": 1}, (NET,)),
    ({"max_attempts": 6, "base_delay": 0.5, "max_delay": 3.0}, (NET,)),
    ({"max_attempts": 3}, (limited(2.0),)),
)

#: (policy keyword arguments, outcomes) for Retry-After.
RETRY_AFTER_CASES: tuple[tuple[dict[str, Any], tuple[Outcome, ...]], ...] = (
    ({}, (limited(30.0), ok("ok"))),  # above max_delay: not capped
    ({}, (http(503, 2.5), ok("ok"))),
    ({}, (limited(None), ok("ok"))),  # no Retry-After: the backoff
    ({}, (limited(0.0), ok("ok"))),  # zero is a value, not "absent"
    ({"max_delay": 1.0}, (limited(3.0), http(503), ok("ok"))),
)


def draw_retry_after(rng: random.Random) -> tuple[dict[str, Any], tuple[Outcome, ...]]:
    """Retry-After above the cap, below it, from both kinds, then a backoff the cap does not
    reach (as in the fixed cases), then a drawn value."""
    policy = {
        "max_attempts": rng.randint(4, 6),
        "base_delay": draw_seconds(rng, 0.05, 0.12),
        "max_delay": draw_seconds(rng, 0.5, 2.0),
    }
    outcomes = (
        limited(draw_seconds(rng, 5.0, 60.0)),
        http(503, draw_seconds(rng, 0.1, 3.0)),
        limited(None),
        ok(draw_value(rng)),
    )
    return policy, outcomes


BAD_POLICIES: tuple[dict[str, Any], ...] = (
    {"max_attempts": 0},
    {"max_attempts": -1},
    {"base_delay": -0.1},
    {"base_delay": math.nan},
    {"base_delay": math.inf},
    {"max_delay": -1.0},
    {"max_delay": math.nan},
    {"max_delay": math.inf},
    {"base_delay": 0.5, "max_delay": 0.1},
    {"jitter": "partial"},
    {"jitter": "FULL"},
)
GOOD_POLICIES: tuple[dict[str, Any], ...] = (
    {},
    {"max_attempts": 1, "base_delay": 0.0, "max_delay": 0.0},
    {"jitter": "full"},
    {"max_attempts": 10, "base_delay": 1.5, "max_delay": 1.5},
)


def draw_policies(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(good, bad): drawn valid policies, with every field given, and drawn invalid ones."""
    good = [{**draw_policy(rng, (1, 20)), "jitter": rng.choice(("none", "full"))} for _ in range(3)]
    bad: list[dict[str, Any]] = [
        {"max_attempts": -rng.randint(0, 99)},
        {"base_delay": -draw_seconds(rng, 0.001, 9.0)},
        {"max_delay": -draw_seconds(rng, 0.001, 9.0)},
        {"jitter": draw_text(rng, 1, 8)},
    ]
    return good, bad


#: (policy keyword arguments, attempts) for backoff_delay's schedule.
BACKOFF_CASES: tuple[tuple[dict[str, Any], tuple[int, ...]], ...] = (
    ({}, tuple(range(1, 13))),
    ({"base_delay": 1, "max_delay": 4}, (1, 2, 3, 4)),  # whole numbers: the waits are floats
    ({"base_delay": 0.5, "max_delay": 3.0}, tuple(range(1, 8))),
    ({"base_delay": 0.05, "max_delay": 60.0}, (1, 2, 5, 10, 11, 12, 20)),
)


def draw_backoff_case(rng: random.Random) -> tuple[dict[str, Any], tuple[int, ...]]:
    policy = draw_policy(rng)
    return {k: policy[k] for k in ("base_delay", "max_delay")}, tuple(
        sorted(rng.sample(range(1, 40), 8))
    )


JITTER_POLICY: dict[str, Any] = {"base_delay": 1.0, "max_delay": 8.0, "jitter": "full"}
JITTER_ATTEMPTS = (1, 2, 3, 4, 6, 9)
#: How many draws each attempt number gets: drawn per submission in these bounds.
JITTER_DRAWS = (400, 480)
VISIBLE_JITTER_DRAWS = (200, 260)


def draw_counts(rng: random.Random, count: int, bounds: tuple[int, int]) -> list[int]:
    return [rng.randint(*bounds) for _ in range(count)]


# ─────────────────────────────────────────────────────────────── probe helpers


def policy(ns: ModuleType, kwargs: dict[str, Any]) -> Any:
    return need(ns, "RetryPolicy")(**kwargs)


class Script:
    """A zero-argument op for `with_retry`: each call returns a fresh coroutine that plays
    the next outcome (the last one repeats), raising it if it is an exception."""

    def __init__(self, clock: Clock, outcomes: Sequence[Outcome]) -> None:
        self.clock = clock
        self.outcomes = outcomes
        self.calls = 0
        self.times: list[float] = []
        self.raised: list[BaseException] = []

    def __call__(self) -> Awaitable[Any]:
        self.calls += 1
        return self._play()

    async def _play(self) -> Any:
        tick("call")  # the parent stamps the call with its own ledger's time
        self.times.append(self.clock.now())
        spec = self.outcomes[min(len(self.times), len(self.outcomes)) - 1]
        outcome = make_outcome(spec)
        if isinstance(outcome, BaseException):
            self.raised.append(outcome)
            raise outcome
        return outcome


def run_retry(ns: ModuleType, kwargs: dict[str, Any], outcomes: Sequence[Outcome]) -> JSON:
    """with_retry(RetryPolicy(**kwargs), op) on virtual time: the outcome, the call times,
    and whether an error raised was the very object the op raised last."""
    box: dict[str, Any] = {}

    async def go(clock: Clock) -> Any:
        with_retry = need(ns, "with_retry")
        retry_policy = policy(ns, kwargs)
        op = box["op"] = Script(clock, outcomes)
        try:
            return await with_retry(retry_policy, op)
        except BaseException as exc:
            box["exc"] = exc
            raise

    seen = vrun(go)  # its "vrun": the parent puts its ledger's times in place of these
    op: Script | None = box.get("op")
    seen["calls"] = op.calls if op else 0
    seen["times"] = op.times if op else []
    exc = box.get("exc")
    seen["last_itself"] = bool(op and op.raised and exc is op.raised[-1])
    return seen


async def settle(awaitable: Awaitable[Any]) -> JSON:
    """Await and observe, inside a running loop (cancellation included)."""
    try:
        return {"ok": plain(await awaitable)}
    except BaseException as exc:
        return raised(exc)


class CountingSink:
    """The probes' own inner sink: records each load's rows by id, can fail or be slow, and
    can report a count of its own (`reports`) instead of the rows it was given."""

    def __init__(self, fail_first: int = 0, delay: float = 0.0, reports: int | None = None) -> None:
        self.fail_first = fail_first
        self.delay = delay
        self.reports = reports
        self.id = new_record()
        self.loads: list[list[JSON]] = []

    async def load(self, rows: Sequence[Any]) -> int:
        batch = [row_id(row) for row in rows]
        index = len(self.loads)
        tick("load", value=[self.id, batch])  # what it was given, out of reach from now on
        self.loads.append(batch)
        if self.delay:
            await asyncio.sleep(self.delay)
        if len(self.loads) <= self.fail_first:
            raise NetworkError("connection dropped mid-write")
        tick("wrote", value=[self.id, index])
        return len(batch) if self.reports is None else self.reports

    def record(self, part: str) -> JSON:
        """Its ``loads`` or ``written`` in a report: a reference the parent fills from the
        ledger (`grader.classes.ledger.records`), never the lists this object holds."""
        tick("report", value=[self.id, part])
        return {"record": [self.id, part]}


def row_id(row: Any) -> JSON:
    """A row as the judges see it: the launch id or the toy row's name, never the object."""
    if type(row) is Launch:
        return row.id
    if type(row) is Row:
        return row.name
    return plain(row)


def sink_run(make: Callable[[ModuleType], Awaitable[JSON]], ns: ModuleType) -> JSON:
    """Run one sink scenario on virtual time; its observation, or why it stopped."""

    async def go(clock: Clock) -> JSON:
        return await make(ns)

    seen = vrun(go)
    if "ok" in seen:
        return {"steps": seen["ok"], "elapsed": seen["elapsed"], "vrun": seen["vrun"]}
    stopped = {k: v for k, v in seen.items() if k in ("raised", "message", "missing")}
    return {"stopped": stopped, "vrun": seen["vrun"]}


def keys(ns: ModuleType, rows: Sequence[Any]) -> list[JSON]:
    return [attempt_call(ns, "content_key", row) for row in rows]


def ids(ns: ModuleType, pairs: Sequence[tuple[str, str]]) -> list[JSON]:
    return [attempt_call(ns, "content_id", kind, text) for kind, text in pairs]


# ─────────────────────────────────────────────────────────────── the visible tests' probes


@PROBES.seeded("fnv1a_vectors")
def fnv1a_vectors(ns: ModuleType, rng: random.Random) -> JSON:
    inputs = (*FNV_INPUTS, draw_bytes(rng), draw_bytes(rng))
    return {"digests": [attempt_call(ns, "fnv1a_64", data) for data in inputs]}


SAME_CONTENT_CALLS: tuple[tuple[str, str], ...] = (
    ("row", "x"),
    ("row", "x"),
    ("row", "y"),
    ("a", "x"),
    ("b", "x"),
    ("ab", "c"),
    ("a", "bc"),
)


@PROBES.seeded("same_content_hashes_stable_distinct_content_differs")
def same_content(ns: ModuleType, rng: random.Random) -> JSON:
    drawn = draw_pairs(rng, 2)
    return {"ids": ids(ns, (*SAME_CONTENT_CALLS, drawn[0], drawn[0], drawn[1]))}


def stable_inputs(rng: random.Random) -> tuple[Launch, Launch, Launch]:
    """A drawn launch, an equal copy, and the launch renamed (a drawn suffix)."""
    launch = draw_launches(rng, 1)[0]
    renamed = dataclasses.replace(launch, name=f"{launch.name} ({draw_text(rng, 3, 12)})")
    return launch, dataclasses.replace(launch), renamed


@PROBES.seeded("content_key_is_stable_and_distinguishes_rows")
def content_key_stable(ns: ModuleType, rng: random.Random) -> JSON:
    launch, twin, renamed = stable_inputs(rng)
    nan_rows = [Row(draw_text(rng), math.nan), Row(draw_text(rng), math.nan)]

    def key(row: Any) -> JSON:
        return attempt(lambda: need(ns, "content_key")(row))

    return {
        "launch": key(launch),
        "twin": key(twin),
        "renamed": key(renamed),
        "toy": key(Row("ISS", 420.0)),
        "cyrillic": key(Row("Союз", 420.0)),
        "toy_by_id": attempt(
            lambda: need(ns, "content_id")("row", '{"alt_km":420.0,"name":"ISS"}')
        ),
        "nan": keys(ns, nan_rows),
    }


@PROBES.seeded("rerun_writes_zero_new_rows")
def rerun_writes_zero(ns: ModuleType, rng: random.Random) -> JSON:
    rows = draw_launches(rng, 2, "rerun_writes_zero_new_rows")

    async def scenario(ns: ModuleType) -> JSON:
        inner = CountingSink()
        sink = need(ns, "IdempotentSink")(inner)
        first = await settle(sink.load([dataclasses.replace(r) for r in rows]))
        second = await settle(sink.load([dataclasses.replace(r) for r in rows]))
        return {"first": first, "second": second, "written": inner.record("written")}

    return sink_run(scenario, ns)


#: Rows whose batch order is neither the order of their keys nor of their names (fixed, so
#: that a sink writing its fresh rows in any sorted order is caught whatever is drawn).
UNSORTED_ROWS: tuple[Row, ...] = (
    Row("Zenit-2", 410.5),
    Row("Angara A5", 200.0),
    Row("Proton-M", 35786.0),
    Row("Kosmos-3M", 1500.25),
    Row("Rokot", 640.0),
)
#: What the reporting inner sink's load returns, whatever it is given.
INNER_REPORTS = 1


@PROBES.seeded("distinct_rows_all_written")
def distinct_rows(ns: ModuleType, rng: random.Random) -> JSON:
    rows = draw_launches(rng, rng.randint(3, 6), "distinct_rows_all_written")

    async def scenario(ns: ModuleType) -> JSON:
        sink_class = need(ns, "IdempotentSink")
        inner = CountingSink()
        load = await settle(sink_class(inner).load(rows))
        unsorted = CountingSink()
        fixed = await settle(sink_class(unsorted).load(list(UNSORTED_ROWS)))
        reporting = CountingSink(reports=INNER_REPORTS)
        reported = await settle(sink_class(reporting).load(list(UNSORTED_ROWS)))
        return {
            "load": load,
            "written": inner.record("written"),
            "fixed": fixed,
            "fixed_loads": unsorted.record("loads"),
            "reported": reported,
        }

    return sink_run(scenario, ns)


def permanent_inputs(rng: random.Random) -> tuple[Outcome, ...]:
    """A permanent ParseError of a drawn text. Drawn inputs vary values, never which seams a
    run needs: a learner's grade for one seam does not hang on how another one is drawn."""
    return (("ParseError", draw_text(rng, 5, 30)),)


@PROBES.seeded("gives_up_on_permanent_immediately")
def gives_up(ns: ModuleType, rng: random.Random) -> JSON:
    return {"fixed": run_retry(ns, {}, (PARSE,)), "drawn": run_retry(ns, {}, permanent_inputs(rng))}


def net(rng: random.Random) -> Outcome:
    """A NetworkError of a drawn text. Drawn failures are of the kinds their test's fixed
    inputs use: a drawn input varies values, never the behaviour a test is about, so a bug the
    fixed inputs do not show is not shown by some draws and missed by others."""
    return ("NetworkError", draw_text(rng, 3, 20))


def transient_inputs(rng: random.Random) -> tuple[Outcome, ...]:
    return (net(rng), net(rng), ok(draw_value(rng)))


@PROBES.seeded("retries_transient_then_succeeds")
def retries_transient(ns: ModuleType, rng: random.Random) -> JSON:
    return {
        "fixed": run_retry(ns, {}, (NET, NET, ok(42))),
        "drawn": run_retry(ns, {}, transient_inputs(rng)),
    }


def honors_inputs(rng: random.Random) -> tuple[Outcome, ...]:
    """Retry-After below the default cap, as the fixed 5 s."""
    return (limited(draw_seconds(rng, 1.0, 9.5)), ok(draw_value(rng)))


@PROBES.seeded("honors_retry_after")
def honors_retry_after(ns: ModuleType, rng: random.Random) -> JSON:
    return {
        "fixed": run_retry(ns, {}, (limited(5.0), ok("ok"))),
        "drawn": run_retry(ns, {}, honors_inputs(rng)),
    }


def draws(ns: ModuleType, kwargs: dict[str, Any], attempt_no: int, seed: int, count: int) -> JSON:
    """`count` waits of backoff_delay(RetryPolicy(**kwargs), attempt_no, rng=Random(seed))."""

    def go() -> list[Any]:
        retry_policy = policy(ns, kwargs)
        backoff = need(ns, "backoff_delay")
        generator = random.Random(seed)
        return [backoff(retry_policy, attempt_no, rng=generator) for _ in range(count)]

    return attempt(go)


#: A jittered policy whose every ceiling is 0: each wait is rng.uniform(0, 0), a float.
ZERO_CEILING: dict[str, Any] = {"base_delay": 0.0, "max_delay": 0.0, "jitter": "full"}


def bounds_inputs(rng: random.Random) -> tuple[list[int], int]:
    """The draws per attempt number 1 to 9, and the seed of the five repeated draws."""
    return draw_counts(rng, 9, VISIBLE_JITTER_DRAWS), rng.randrange(10**9)


@PROBES.seeded("full_jitter_stays_within_bounds")
def jitter_bounds(ns: ModuleType, rng: random.Random) -> JSON:
    counts, five = bounds_inputs(rng)
    full = {"jitter": "full"}
    return {
        "draws": [draws(ns, full, n, 1000 + n, count) for n, count in enumerate(counts, start=1)],
        "five": [draws(ns, full, 4, five, 5), draws(ns, full, 4, five, 5)],
        "plain": draws(ns, {}, 3, five, 1),
        "zero": draws(ns, ZERO_CEILING, 1, five, 3),
    }


# ─────────────────────────────────────────────────────────────── hidden: content ids and keys


@PROBES.seeded("content_id_is_sha256_of_kind_nul_canonical")
def content_id_exact(ns: ModuleType, rng: random.Random) -> JSON:
    return {"ids": ids(ns, (*CONTENT_ID_INPUTS, *draw_pairs(rng, 3)))}


@PROBES.seeded("content_key_hashes_the_canonical_json")
def content_key_exact(ns: ModuleType, rng: random.Random) -> JSON:
    return {"keys": keys(ns, (*key_rows(), *draw_key_rows(rng)))}


@PROBES.seeded("keys_equal_across_interpreters", interpreters=2)
def keys_across(ns: ModuleType, rng: random.Random) -> JSON:
    return {
        "keys": keys(ns, (*key_rows(), *draw_key_rows(rng))),
        "ids": ids(ns, (*CONTENT_ID_INPUTS, *draw_pairs(rng, 2))),
        "hash": hash("run-it-twice"),
    }


#: How many drawn rows with no canonical form, in each of two runs: every right answer is a
#: ParseError, so how many there are is what binds a report to these inputs.
DRAWN_ROWS = (10, 60)


def unencodable_inputs(rng: random.Random) -> tuple[list[Any], list[Any]]:
    """The rows with no canonical form and a first run of drawn ones; a second run."""

    def run() -> list[Any]:
        values = (math.nan, math.inf, -math.inf)
        count = rng.randint(*DRAWN_ROWS)
        return [Row(draw_text(rng), rng.choice(values)) for _ in range(count)]

    return [*unencodable_rows(), *run()], run()


@PROBES.seeded("row_without_canonical_form_raises_parse_error")
def unencodable(ns: ModuleType, rng: random.Random) -> JSON:
    bad, more = unencodable_inputs(rng)
    return {
        "bad": keys(ns, bad),
        "more": keys(ns, more),
        "good": attempt_call(ns, "content_key", Row("finite", 1.5)),
    }


# ─────────────────────────────────────────────────────────────── hidden: the sink


@PROBES.seeded("duplicates_within_a_batch_written_once")
def within_batch(ns: ModuleType, rng: random.Random) -> JSON:
    a, b, c, d = draw_launches(rng, 4, "duplicates_within_a_batch_written_once")

    async def scenario(ns: ModuleType) -> JSON:
        inner = CountingSink()
        sink = need(ns, "IdempotentSink")(inner)
        first = await settle(sink.load([a, b, dataclasses.replace(a), c, b]))
        second = await settle(sink.load([c, d, d]))
        return {"first": first, "second": second, "loads": inner.record("loads")}

    return sink_run(scenario, ns)


@PROBES.seeded("parse_failure_mid_batch_remembers_nothing")
def parse_failure(ns: ModuleType, rng: random.Random) -> JSON:
    a, b = draw_launches(rng, 2, "parse_failure_mid_batch_remembers_nothing")

    async def scenario(ns: ModuleType) -> JSON:
        bad = dataclasses.replace(a, id="bad-row", latitude=math.nan)
        inner = CountingSink()
        sink = need(ns, "IdempotentSink")(inner)
        failed = await settle(sink.load([a, bad, b]))
        retry = await settle(sink.load([a, b]))
        return {
            "failed": failed,
            "retry": retry,
            "loads": inner.record("loads"),
            "written": inner.record("written"),
        }

    return sink_run(scenario, ns)


@PROBES.seeded("inner_failure_remembers_nothing_and_retry_writes")
def inner_failure(ns: ModuleType, rng: random.Random) -> JSON:
    rows = draw_launches(rng, 2, "inner_failure_remembers_nothing_and_retry_writes")

    async def scenario(ns: ModuleType) -> JSON:
        inner = CountingSink(fail_first=1)
        sink = need(ns, "IdempotentSink")(inner)
        failed = await settle(sink.load(rows))
        retry = await settle(sink.load(rows))
        again = await settle(sink.load(rows))
        return {
            "failed": failed,
            "retry": retry,
            "again": again,
            "written": inner.record("written"),
        }

    return sink_run(scenario, ns)


@PROBES.seeded("concurrent_loads_write_once")
def concurrent(ns: ModuleType, rng: random.Random) -> JSON:
    rows = draw_launches(rng, 2, "concurrent_loads_write_once")

    async def scenario(ns: ModuleType) -> JSON:
        inner = CountingSink(delay=1.0)
        sink = need(ns, "IdempotentSink")(inner)
        results = await asyncio.gather(settle(sink.load(rows)), settle(sink.load(rows)))
        return {"results": list(results), "written": inner.record("written")}

    return sink_run(scenario, ns)


@PROBES.seeded("first_concurrent_load_fails_second_writes")
def concurrent_first_fails(ns: ModuleType, rng: random.Random) -> JSON:
    rows = draw_launches(rng, 2, "first_concurrent_load_fails_second_writes")

    async def scenario(ns: ModuleType) -> JSON:
        inner = CountingSink(fail_first=1, delay=1.0)
        sink = need(ns, "IdempotentSink")(inner)
        results = await asyncio.gather(settle(sink.load(rows)), settle(sink.load(rows)))
        return {"results": list(results), "written": inner.record("written")}

    return sink_run(scenario, ns)


@PROBES.seeded("with_seen_skips_preloaded_keys")
def with_seen(ns: ModuleType, rng: random.Random) -> JSON:
    a, b = draw_launches(rng, 2, "with_seen_skips_preloaded_keys")

    async def scenario(ns: ModuleType) -> JSON:
        content_key = need(ns, "content_key")
        sink_class = need(ns, "IdempotentSink")
        inner = CountingSink()
        # Any iterable of keys, here a generator (as when they are read from a file).
        sink = sink_class.with_seen(inner, (content_key(row) for row in [a]))
        mixed = await settle(sink.load([a, b]))
        full = CountingSink()
        every = sink_class.with_seen(full, [content_key(a), content_key(b)])
        none_new = await settle(every.load([a, b]))
        return {
            "mixed": mixed,
            "written": inner.record("written"),
            "none_new": none_new,
            "full_loads": full.record("loads"),
        }

    return sink_run(scenario, ns)


#: Virtual seconds a sink around another sink is given to load (it needs none).
NESTED_SECONDS = 60.0


@PROBES.seeded("each_sink_remembers_its_own_keys")
def own_memory(ns: ModuleType, rng: random.Random) -> JSON:
    rows = draw_launches(rng, 2, "each_sink_remembers_its_own_keys")

    async def scenario(ns: ModuleType) -> JSON:
        sink_class = need(ns, "IdempotentSink")
        first_inner, second_inner = CountingSink(), CountingSink()
        first = await settle(sink_class(first_inner).load(rows))
        second = await settle(sink_class(second_inner).load(rows))
        # A sink around another: each has its own lock, so neither waits for the other.
        third_inner = CountingSink()
        nested = sink_class(sink_class(third_inner))
        around = await settle(asyncio.wait_for(nested.load(rows), NESTED_SECONDS))
        return {
            "first": first,
            "second": second,
            "second_written": second_inner.record("written"),
            "nested": around,
            "nested_written": third_inner.record("written"),
        }

    return sink_run(scenario, ns)


# ─────────────────────────────────────────────────────────────── hidden: the retry loop


def non_etl_inputs(rng: random.Random) -> tuple[Outcome, Outcome]:
    return ("KeyError", draw_text(rng, 3, 20)), ("TypeError", draw_text(rng, 3, 20))


@PROBES.seeded("non_etl_error_propagates_at_once")
def non_etl(ns: ModuleType, rng: random.Random) -> JSON:
    key_error, type_error = non_etl_inputs(rng)
    return {
        "key_error": run_retry(ns, {}, (key_error, ok(1))),
        "type_error": run_retry(ns, {}, (type_error, ok(1))),
    }


def cancellation_inputs(rng: random.Random) -> tuple[float, float, float]:
    """(seconds slept before the first call, the policy's base delay, when to cancel: inside
    the first backoff)."""
    base = draw_seconds(rng, 0.5, 3.0)
    return draw_seconds(rng, 0.1, 9.0), base, round(base * rng.uniform(0.2, 0.8), 3)


@PROBES.seeded("cancellation_is_never_retried")
def cancellation(ns: ModuleType, rng: random.Random) -> JSON:
    before, base, cancel_at = cancellation_inputs(rng)
    kwargs = {"base_delay": base, "max_delay": 10 * base}

    async def op_cancelled(clock: Clock) -> JSON:
        calls = [0]

        async def once() -> Any:
            calls[0] += 1
            raise asyncio.CancelledError()

        await asyncio.sleep(before)
        outcome = await settle(need(ns, "with_retry")(policy(ns, kwargs), lambda: once()))
        tick("at")
        return {"outcome": outcome, "calls": calls[0], "at": clock.now()}

    async def cancelled_while_waiting(clock: Clock) -> JSON:
        script = Script(clock, (NET,))
        with_retry = need(ns, "with_retry")
        task = asyncio.ensure_future(with_retry(policy(ns, kwargs), script))
        await asyncio.sleep(cancel_at)  # inside the first backoff
        was_done = task.done()
        task.cancel()
        outcome = await settle(task)
        tick("at")
        ended = clock.now()
        await asyncio.sleep(30.0)  # a retry that survived the cancel would call again
        return {
            "done_before_cancel": was_done,
            "outcome": outcome,
            "cancelled": task.cancelled(),
            "at": ended,
            "times": script.times,
            "calls": script.calls,
        }

    return {"op_raises": vrun(op_cancelled), "task_cancelled": vrun(cancelled_while_waiting)}


def exhaustion_inputs(rng: random.Random) -> tuple[dict[str, Any], tuple[Outcome, ...]]:
    """max_attempts drawn; transient failures, the last an HttpStatus(503) of a drawn text."""
    attempts = rng.randint(2, 5)
    kinds = ("NetworkError", "RequestTimeout")
    failures = [(rng.choice(kinds), draw_text(rng, 3, 20)) for _ in range(attempts - 1)]
    return {"max_attempts": attempts}, (*failures, http(503, None, draw_text(rng, 5, 30)))


@PROBES.seeded("exhaustion_reraises_the_last_error")
def exhaustion(ns: ModuleType, rng: random.Random) -> JSON:
    kwargs, outcomes = exhaustion_inputs(rng)
    return {
        "fixed": run_retry(ns, {"max_attempts": 3}, (NET, TIMEOUT, http(503))),
        "drawn": run_retry(ns, kwargs, outcomes),
    }


def schedule_inputs(rng: random.Random) -> tuple[tuple[dict[str, Any], tuple[Outcome, ...]], ...]:
    return (*SCHEDULES, (draw_policy(rng), (net(rng),)))


@PROBES.seeded("n_attempts_sleep_n_minus_1_times")
def schedules(ns: ModuleType, rng: random.Random) -> JSON:
    return {"runs": [run_retry(ns, kwargs, outcomes) for kwargs, outcomes in schedule_inputs(rng)]}


def backoff_inputs(rng: random.Random) -> tuple[tuple[dict[str, Any], tuple[int, ...]], ...]:
    return (*BACKOFF_CASES, draw_backoff_case(rng), draw_backoff_case(rng))


@PROBES.seeded("backoff_delay_doubles_then_caps")
def backoff(ns: ModuleType, rng: random.Random) -> JSON:
    def schedule(kwargs: dict[str, Any], attempts: tuple[int, ...]) -> JSON:
        def go() -> list[Any]:
            retry_policy = policy(ns, kwargs)
            backoff_delay = need(ns, "backoff_delay")
            return [backoff_delay(retry_policy, n) for n in attempts]

        return attempt(go)

    return {"schedules": [schedule(kwargs, attempts) for kwargs, attempts in backoff_inputs(rng)]}


def edge_inputs(rng: random.Random) -> tuple[dict[str, Any], int]:
    """A drawn policy (base and cap) and a drawn attempt number far past the cap."""
    policy = draw_policy(rng)
    return {k: policy[k] for k in ("base_delay", "max_delay")}, rng.randint(1100, 5000)


@PROBES.seeded("backoff_delay_edge_cases")
def backoff_edges(ns: ModuleType, rng: random.Random) -> JSON:
    kwargs, huge = edge_inputs(rng)

    def call(n: int, given: dict[str, Any]) -> JSON:
        return attempt(lambda: need(ns, "backoff_delay")(policy(ns, given), n))

    return {
        "zero": call(0, {}),
        "negative": call(-3, {}),
        "huge": call(1100, {}),
        "first": call(1, {}),
        "drawn_first": call(1, kwargs),
        "drawn_huge": call(huge, kwargs),
    }


def retry_after_inputs(
    rng: random.Random,
) -> tuple[tuple[dict[str, Any], tuple[Outcome, ...]], ...]:
    return (*RETRY_AFTER_CASES, draw_retry_after(rng))


@PROBES.seeded("retry_after_replaces_the_wait_uncapped")
def retry_after(ns: ModuleType, rng: random.Random) -> JSON:
    cases = retry_after_inputs(rng)
    return {"runs": [run_retry(ns, kwargs, outcomes) for kwargs, outcomes in cases]}


@PROBES.seeded("bad_policies_rejected")
def bad_policies(ns: ModuleType, rng: random.Random) -> JSON:
    good, bad = draw_policies(rng)

    def frozen() -> JSON:
        retry_policy = policy(ns, {})
        retry_policy.max_attempts = 99
        return retry_policy.max_attempts

    def fields(kwargs: dict[str, Any]) -> list[Any]:
        made = policy(ns, kwargs)
        return [made.max_attempts, made.base_delay, made.max_delay, made.jitter]

    def made(kwargs: dict[str, Any]) -> None:
        policy(ns, kwargs)  # only whether it is accepted: the object itself is not reported

    return {
        "bad": [attempt(partial(made, k)) for k in (*BAD_POLICIES, *bad)],
        "good": [attempt(partial(made, k)) for k in GOOD_POLICIES],
        "kept": [attempt(partial(fields, k)) for k in good],
        "defaults": attempt(lambda: fields({})),
        "frozen": attempt(frozen),
    }


def event_loop_inputs(rng: random.Random) -> tuple[dict[str, Any], tuple[Outcome, ...]]:
    """Tiny delays: a blocking time.sleep here costs tens of milliseconds, never seconds."""
    base = draw_seconds(rng, 0.005, 0.02)
    return (
        {"max_attempts": 3, "base_delay": base, "max_delay": 1.0},
        (net(rng), net(rng), ok(draw_value(rng))),
    )


@PROBES.seeded("sleeps_on_the_event_loop_not_the_thread")
def event_loop_sleep(ns: ModuleType, rng: random.Random) -> JSON:
    kwargs, outcomes = event_loop_inputs(rng)
    return run_retry(ns, kwargs, outcomes)


def tenacity_inputs(
    rng: random.Random,
) -> tuple[tuple[dict[str, Any], tuple[Outcome, ...]], ...]:
    return (*TENACITY_SCRIPTS, draw_script(rng), draw_script(rng))


@PROBES.seeded("matches_tenacity_on_scripted_failures")
def tenacity_scripts(ns: ModuleType, rng: random.Random) -> JSON:
    scripts = tenacity_inputs(rng)
    return {"runs": [run_retry(ns, kwargs, outcomes) for kwargs, outcomes in scripts]}


def spread_inputs(rng: random.Random) -> tuple[int, list[int]]:
    """The seed of the draws (and of `random`, which with_retry draws from by default), and
    how many draws each attempt number gets."""
    return rng.randrange(10**9), draw_counts(rng, len(JITTER_ATTEMPTS), JITTER_DRAWS)


@PROBES.seeded("full_jitter_spreads_over_the_whole_range")
def jitter_spread(ns: ModuleType, rng: random.Random) -> JSON:
    seed, counts = spread_inputs(rng)
    spread = [
        draws(ns, JITTER_POLICY, n, seed + n, count)
        for n, count in zip(JITTER_ATTEMPTS, counts, strict=True)
    ]
    # with_retry draws from the random module by default: seed it, so this is repeatable.
    random.seed(seed)
    in_loop = run_retry(ns, {**JITTER_POLICY, "max_attempts": 7}, (NET,))
    return {"draws": spread, "with_retry": in_loop}
