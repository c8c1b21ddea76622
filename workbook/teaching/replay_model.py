"""The replay explorer's model: notebook 06's designs, step by step, disturbed, then replayed.

A *design* is one of notebook 06's ways to write a page, named by its section and statement,
and spelled out as the steps one page takes (`Design.steps`): the item writes, one call that
tells the search indexer about the page's launches, the checkpoint, and where the design has
them, ``BEGIN``/``COMMIT`` and the outbox relay. Every step runs notebook 06's own SQL on
notebook 06's own store (`etl.replay`: its feed, tables, statements and restart).

A *disturbance* hits one run of the 20-launch feed (5 pages of 4):

- ``crash``: the process dies right after step `k` of page 3 (`k` from 1 to the page's steps);
  whatever was not committed is gone;
- ``duplicate``: after a clean run, page 3 is delivered again (a worker runs it from the
  position ``offset=8`` it was handed);
- ``stale``: a second worker loaded ``offset=4`` and fetched page 2 before the source revised
  its second launch (version 2); it finishes after the first worker's clean run;
- ``poison``: the destination refuses page 3's second launch on every attempt (a trigger, as
  in notebook 06's section 9), which stops the run where it meets it.

Then one *replay*: a restarted worker (the outbox's repair scan first) runs from the saved
position to the end. `run` compares that store, and what the indexer did, with one clean run
of the same design on the same feed, and says what differs (`Outcome`), with a one-line
verdict. Running a combination twice gives the same outcome: nothing is random.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from etl import replay
from etl.replay import (
    INSERT_PLAIN,
    NEWER_WINS,
    OUTBOX,
    ROWS,
    ROWS_NO_KEY,
    SAVE_POSITION,
    SOURCE,
    SYNC_STATE,
    TENANT,
    UPSERT,
    Crash,
    Feed,
    Item,
    Scratch,
    as_item,
    canonical,
    digest,
    fail_item,
    position_of,
    short,
)

Kind = Literal[
    "begin", "insert", "upsert", "call", "save", "cas", "outbox", "commit", "send", "mark"
]
Disturbance = Literal["crash", "duplicate", "stale", "poison"]

#: Section 7's compare-and-set: move the checkpoint only from the position this run loaded.
COMPARE_AND_SET = (
    "UPDATE sync_state SET position = ? WHERE tenant = ? AND source = ? AND position IS ?"
)
#: Section 11: a follow-up job, written in its row's transaction, keyed by its job id.
RECORD_JOB = "INSERT INTO outbox VALUES (?, ?, ?, 'index', 'pending') ON CONFLICT DO NOTHING"

#: The page a crash hits, the launch the destination refuses, the launch the source revises.
CRASH_PAGE, POISON_AT, REVISED_AT = 3, 9, 5
DISTURBANCES: dict[Disturbance, str] = {
    "crash": "a crash after a step of page 3",
    "duplicate": "page 3 delivered twice",
    "stale": "a stale worker from offset=4",
    "poison": "a poison item in page 3",
}


@dataclass(frozen=True)
class Design:
    """One of notebook 06's designs: its name, the section and statement it comes from, the
    table its rows go to, and the steps of one page, in order (an item step per item)."""

    name: str
    title: str
    table: str
    steps: tuple[tuple[Kind, int], ...]
    upsert: str = UPSERT
    """The statement of an ``upsert`` step: sections 7 and 11 let only a newer revision in."""

    def step_labels(self) -> list[str]:
        return [_LABELS[kind].format(n=index + 1) for kind, index in self.steps]


_LABELS: dict[Kind, str] = {
    "begin": "BEGIN",
    "insert": "insert #{n}",
    "upsert": "upsert #{n}",
    "call": "call the indexer ×4",
    "save": "save checkpoint",
    "cas": "compare-and-set",
    "outbox": "4 jobs to the outbox",
    "commit": "COMMIT",
    "send": "relay: send 4 jobs",
    "mark": "relay: mark 4 sent",
}


def _items(kind: Kind) -> tuple[tuple[Kind, int], ...]:
    return tuple((kind, index) for index in range(replay.PAGE_SIZE))


_CALL: tuple[tuple[Kind, int], ...] = (("call", 0),)
DESIGNS: tuple[Design, ...] = (
    Design(
        "naive",
        "§1 the naive loop: insert, checkpoint last",
        ROWS_NO_KEY,
        (*_items("insert"), *_CALL, ("save", 0)),
    ),
    Design(
        "checkpoint-first",
        "§5 checkpoint first (insert)",
        ROWS_NO_KEY,
        (("save", 0), *_items("insert"), *_CALL),
    ),
    Design(
        "checkpoint-last-upsert",
        "§5 checkpoint last, with an upsert",
        ROWS,
        (*_items("upsert"), *_CALL, ("save", 0)),
    ),
    Design(
        "one-transaction",
        "§6 items and checkpoint in one transaction",
        ROWS,
        (("begin", 0), *_items("upsert"), *_CALL, ("save", 0), ("commit", 0)),
    ),
    Design(
        "compare-and-set",
        "§7 the same, plus compare-and-set",
        ROWS,
        (("begin", 0), *_items("upsert"), *_CALL, ("cas", 0), ("commit", 0)),
        NEWER_WINS,
    ),
    Design(
        "outbox",
        "§11 the outbox for the indexer call",
        ROWS,
        (
            ("begin", 0),
            *_items("upsert"),
            ("outbox", 0),
            ("cas", 0),
            ("commit", 0),
            ("send", 0),
            ("mark", 0),
        ),
        NEWER_WINS,
    ),
)
BY_NAME = {design.name: design for design in DESIGNS}


class LostRace(Exception):
    """The checkpoint moved since this worker loaded it: its page is rolled back."""


@dataclass
class Indexer:
    """The other service: every call it gets, and what it did. A job handed over with a job id
    it already holds is recognised and dropped (notebook 06's queue, inside its window); a call
    without one always takes effect."""

    calls: int = 0
    recognised: int = 0
    effects: Counter[str] = field(default_factory=Counter)
    held: set[str] = field(default_factory=set)

    def index(self, launch_id: str, job_id: str | None = None) -> None:
        self.calls += 1
        if job_id is not None:
            if job_id in self.held:
                self.recognised += 1
                return
            self.held.add(job_id)
        self.effects[launch_id] += 1


def job_id_of(item: Item) -> str:
    """Notebook 06's job id: the same revision of a row always gives the same id."""
    return digest("index", TENANT, SOURCE, item["id"], str(item["version"]))


def _relay(
    conn: sqlite3.Connection, indexer: Indexer, jobs: list[str] | None, *, mark: bool
) -> None:
    """Hand the pending jobs (of `jobs`, or all: the repair scan) to the indexer, then mark them."""
    pending = conn.execute(
        "SELECT job_id, launch_id FROM outbox WHERE state = 'pending' ORDER BY job_id"
    ).fetchall()
    chosen = [(job, launch) for job, launch in pending if jobs is None or job in jobs]
    if not mark:
        for job_id, launch_id in chosen:
            indexer.index(launch_id, job_id)
        return
    for job_id, _launch in chosen:
        conn.execute("UPDATE outbox SET state = 'sent' WHERE job_id = ?", (job_id,))


def _step(
    conn: sqlite3.Connection,
    kind: Kind,
    index: int,
    loaded: str | None,
    page: tuple[list[Item], str],
    indexer: Indexer,
    upsert: str,
) -> None:
    """One step of a page, with notebook 06's statement for it (`upsert`: the design's)."""
    items, next_position = page
    jobs = [job_id_of(item) for item in items]
    if kind in ("begin", "commit"):
        conn.execute("BEGIN IMMEDIATE" if kind == "begin" else "COMMIT")
    elif kind in ("insert", "upsert"):
        conn.execute(INSERT_PLAIN if kind == "insert" else upsert, replay.params(items[index]))
    elif kind == "call":
        for item in items:
            indexer.index(item["id"])
    elif kind == "save":
        conn.execute(SAVE_POSITION, (next_position, TENANT, SOURCE))
    elif kind == "cas":
        moved = conn.execute(COMPARE_AND_SET, (next_position, TENANT, SOURCE, loaded))
        if moved.rowcount != 1:
            raise LostRace(position_of(conn))
    elif kind == "outbox":
        for item, job_id in zip(items, jobs, strict=True):
            conn.execute(RECORD_JOB, (job_id, TENANT, item["id"]))
    else:
        _relay(conn, indexer, jobs, mark=kind == "mark")


def write_page(
    conn: sqlite3.Connection,
    design: Design,
    loaded: str | None,
    page: tuple[list[Item], str],
    indexer: Indexer,
    crash_after: int | None = None,
) -> None:
    """One page, step by step, as `design` writes it. Dies (`Crash`) right after step
    `crash_after`; a refused write or a lost compare-and-set inside a transaction rolls it back
    and is raised."""
    try:
        for number, (kind, index) in enumerate(design.steps, start=1):
            _step(conn, kind, index, loaded, page, indexer, design.upsert)
            if number == crash_after:
                raise Crash(f"died after step {number}")
    except (sqlite3.IntegrityError, LostRace):
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def run_job(
    conn: sqlite3.Connection,
    design: Design,
    feed: Feed,
    indexer: Indexer,
    crash_after: int | None = None,
) -> None:
    """A worker from the saved position to the end (the outbox's repair scan first). With
    `crash_after`, it dies at that step of page `CRASH_PAGE`; a refused write stops it."""
    if design.name == "outbox":
        _relay(conn, indexer, None, mark=False)
        _relay(conn, indexer, None, mark=True)
    while True:
        loaded = position_of(conn)
        page = feed.fetch(loaded)
        if not page[0]:
            return
        number = replay.page_reached(loaded) + 1
        try:
            write_page(
                conn, design, loaded, page, indexer, crash_after if number == CRASH_PAGE else None
            )
        except LostRace:
            return  # another worker got further: the winner stands


def revised_feed() -> Feed:
    """The feed after the source revised launch `REVISED_AT` (page 2's second): version 2."""
    feed = Feed()
    launch = replay.LAUNCHES[REVISED_AT]
    revised = as_item(launch, version=2)
    revised["payload"]["status"] = f"{launch.status} (revised)"
    feed.replace(REVISED_AT, revised)
    return feed


@dataclass(frozen=True)
class Outcome:
    """What one disturbance and a replay left, against one clean run of the same design.

    `lost`: launches with no row; `doubled`: rows beyond one per launch; `stale`: launches
    stored, but none of whose rows is the clean run's; `calls_repeated` and `calls_lost`: indexer
    effects beyond, and short of, the clean run's; `recognised`: calls the indexer dropped as a
    job it already held."""

    design: str
    disturbance: Disturbance
    crash_after: int | None
    rows: int
    lost: int
    doubled: int
    stale: int
    calls_repeated: int
    calls_lost: int
    recognised: int
    position: str | None
    converged: bool
    verdict: str
    counts: dict[str, int] = field(default_factory=dict, compare=False)
    """Rows per launch id, as stored after the replay."""
    stale_ids: tuple[str, ...] = field(default=(), compare=False)
    """The launches counted in `stale`."""


def _rows(conn: sqlite3.Connection) -> list[tuple[str, int, str]]:
    query = "SELECT launch_id, version, body FROM launch_rows"
    return [(str(a), int(b), str(c)) for a, b, c in conn.execute(query).fetchall()]


@dataclass(frozen=True)
class _Clean:
    """One clean run's rows, indexer effects and fingerprint: the yardstick."""

    rows: tuple[tuple[str, int, str], ...]
    effects: tuple[tuple[str, int], ...]
    fingerprint: str


@functools.cache
def _clean(design: str, revised: bool) -> _Clean:
    """One clean run of `design` on the feed (`revised`: after the source's revision), in a
    store of its own. Kept per process: the same inputs always give the same run."""
    scratch = Scratch(prefix="run-it-twice-replay-")
    try:
        conn, indexer = scratch.new_db(BY_NAME[design].table, SYNC_STATE, OUTBOX), Indexer()
        run_job(conn, BY_NAME[design], revised_feed() if revised else Feed(), indexer)
        return _Clean(tuple(_rows(conn)), tuple(indexer.effects.items()), replay.fingerprint(conn))
    finally:
        scratch.close()


def _disturbed(
    design: Design, disturbance: Disturbance, crash_after: int, scratch: Scratch
) -> tuple[sqlite3.Connection, Indexer]:
    """The store and the indexer after the disturbance and one replay."""
    feed = revised_feed() if disturbance == "stale" else Feed()
    ddl = [design.table, SYNC_STATE, OUTBOX]
    if disturbance == "poison":
        ddl.append(fail_item(replay.LAUNCHES[POISON_AT].id))
    conn, indexer = scratch.new_db(*ddl), Indexer()
    try:
        if disturbance == "crash":
            run_job(conn, design, feed, indexer, crash_after=crash_after)
        elif disturbance == "duplicate":
            run_job(conn, design, feed, indexer)
            write_page(conn, design, "offset=8", feed.fetch("offset=8"), indexer)
        elif disturbance == "stale":
            earlier = Feed().fetch("offset=4")  # fetched before the source revised launch 6
            run_job(conn, design, feed, indexer)
            write_page(conn, design, "offset=4", earlier, indexer)
        else:
            run_job(conn, design, feed, indexer)
    except (Crash, LostRace, sqlite3.IntegrityError):
        pass  # the worker is gone (or its page refused); what it committed stays
    conn = scratch.restart(conn)
    with contextlib.suppress(sqlite3.IntegrityError):  # the poison item stops the replay too
        run_job(conn, design, feed, indexer)  # the replay
    return conn, indexer


def run(design: str, disturbance: Disturbance, crash_after: int = 1) -> Outcome:
    """One combination, from an empty store: the disturbance, one replay, the comparison.
    `crash_after` counts only for ``crash`` (1 to the design's number of steps)."""
    chosen = BY_NAME[design]
    if not 1 <= crash_after <= len(chosen.steps):
        raise ValueError(f"{design} has steps 1 to {len(chosen.steps)}, not {crash_after}")
    scratch = Scratch(prefix="run-it-twice-replay-")
    try:
        conn, indexer = _disturbed(chosen, disturbance, crash_after, scratch)
        clean = _clean(design, disturbance == "stale")
        clean_effects = Counter(dict(clean.effects))
        rows = _rows(conn)
        expected = {launch: (version, body) for launch, version, body in clean.rows}
        stored: dict[str, set[tuple[int, str]]] = {}
        for launch, version, body in rows:
            stored.setdefault(launch, set()).add((version, body))
        lost = sum(1 for launch in expected if launch not in stored)
        stale_ids = tuple(
            launch for launch, held in stored.items() if expected.get(launch) not in held
        )
        repeated = sum(
            max(0, count - clean_effects[launch]) for launch, count in indexer.effects.items()
        )
        missed = sum(
            max(0, count - indexer.effects[launch]) for launch, count in clean_effects.items()
        )
        same_store = replay.fingerprint(conn) == clean.fingerprint
        outcome = Outcome(
            design=design,
            disturbance=disturbance,
            crash_after=crash_after if disturbance == "crash" else None,
            rows=len(rows),
            lost=lost,
            doubled=len(rows) - len(stored),
            stale=len(stale_ids),
            calls_repeated=repeated,
            calls_lost=missed,
            recognised=indexer.recognised,
            position=position_of(conn),
            converged=same_store and indexer.effects == clean_effects,
            verdict="",
            counts=dict(Counter(launch for launch, _, _ in rows)),
            stale_ids=stale_ids,
        )
    finally:
        scratch.close()
    return _with_verdict(outcome, chosen)


def _plural(count: int, one: str) -> str:
    return f"{count} {one if count == 1 else one + 's'}"


def _with_verdict(outcome: Outcome, design: Design) -> Outcome:
    from dataclasses import replace

    return replace(outcome, verdict=verdict(outcome, design))


def verdict(outcome: Outcome, design: Design) -> str:
    """One line: "converged", or what differs from one clean run, and why."""
    if outcome.converged:
        if outcome.recognised:
            return (
                f"converged: the relay sent {_plural(outcome.recognised, 'job')} again, and the"
                " indexer recognised their job ids"
            )
        return "converged: the same rows, checkpoint and indexer calls as one clean run"
    late = outcome.disturbance in ("duplicate", "stale")
    guarded = any(kind == "cas" for kind, _ in design.steps)
    stalled = outcome.disturbance == "poison" and design.name != "checkpoint-first"
    refused = short(replay.LAUNCHES[POISON_AT].id)
    late_call = (
        "the late page called the indexer before its compare-and-set refused it"
        if guarded
        else "the late page called the indexer again and set the checkpoint back"
    )
    found = [
        (
            outcome.lost,
            "row lost",
            f"{refused} is refused on every run, so no run gets past offset=8"
            if stalled
            else "the checkpoint moved past items never stored",
        ),
        (
            outcome.doubled,
            "row doubled",
            "the late page was inserted again"
            if late
            else "the replay inserted again rows the checkpoint did not cover",
        ),
        (outcome.stale, "row stale", "the late page replaced a newer revision"),
        (
            outcome.calls_repeated,
            "indexer call made twice",
            late_call if late else "the call came before the checkpoint that covers it",
        ),
        (
            outcome.calls_lost,
            "indexer call never made",
            "" if stalled else "the checkpoint moved past the page's call",
        ),
    ]
    parts = [_counted(count, what) for count, what, _ in found if count]
    causes = [why for count, _, why in found if count and why]
    if not parts:
        return f"not converged: the checkpoint ends at {outcome.position}"
    return f"{', '.join(parts)}: {'; '.join(dict.fromkeys(causes))}"


def _counted(count: int, what: str) -> str:
    """``2 rows lost``, ``1 indexer call made twice``: the counted noun in the plural."""
    noun, _, rest = what.partition(" ")
    if noun == "indexer":
        noun, _, rest = f"indexer {rest}".partition(" call")
        return f"{count} {noun} call{'' if count == 1 else 's'}{rest}"
    return f"{count} {noun}{'' if count == 1 else 's'} {rest}"


def sql_of(design: Design) -> dict[str, str]:
    """The statements a design runs, by step kind (what the explorer can show beside it)."""
    statements: dict[Kind, str] = {
        "insert": INSERT_PLAIN,
        "upsert": design.upsert,
        "save": SAVE_POSITION,
        "cas": COMPARE_AND_SET,
        "outbox": RECORD_JOB,
    }
    return {kind: statements[kind] for kind, _ in design.steps if kind in statements}


__all__ = [
    "BY_NAME",
    "DESIGNS",
    "DISTURBANCES",
    "Design",
    "Indexer",
    "Outcome",
    "canonical",
    "run",
    "sql_of",
]
