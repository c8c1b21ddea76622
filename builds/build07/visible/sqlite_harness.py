"""The SQLite harness of build 07's visible checks: scratch stores, read back by the check.

A check opens a `StoreUnderTest` in a temporary folder (removed when the check ends): the
learner's `open_store` makes the connections under test, and the harness reads every pinned
table back through a connection of its own, injects faults with triggers (a statement undone,
or the whole transaction, as SQLite may after a full disk), records the transaction
statements a call sends (SQLite's own trace), runs a call in several threads at once, builds
the checks' pages from fixture launches, and says what differs in a line of feedback. It knows
the pinned schema (`COLUMNS`, `KEYS`) and the shape of a `PageOutcome`, nothing of how a build
answers: it holds no reference implementation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from etl import launches
from workbook.checking.feedback import show
from workbook.checks import CheckFailure, Said, expect, expect_equal

TENANT, OTHER = "acme", "globex"
SOURCE = "ll2"
COLUMNS = {
    "items": ("tenant", "source", "item_id", "version", "payload"),
    "checkpoints": ("tenant", "source", "cursor", "item_count"),
    "failures": ("tenant", "source", "item_id", "reason", "seen_at"),
}
KEYS = {
    "items": ("tenant", "source", "item_id"),
    "checkpoints": ("tenant", "source"),
    "failures": ("tenant", "source", "item_id"),
}
#: Every pinned column of every table, rows sorted: what a store holds, as a check compares it.
State = dict[str, list[tuple[Any, ...]]]
OUTCOME_FIELDS = ("applied", "unchanged", "rejected", "advanced", "cursor")

#: The reasons `poison_reason` gives, word for word (step 3 of the notebook pins them).
MISSING_ID = "missing id"
BAD_VERSION = "version is not an integer"
NOT_CANONICAL = "payload has no canonical JSON form"

#: Stores live in RAM where there is a tmpfs: each commit's fsync then costs microseconds,
#: which keeps a self-check cell under a second.
SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None


@contextmanager
def folder() -> Iterator[Path]:
    """A scratch folder for one check's stores, removed when the check ends."""
    with tempfile.TemporaryDirectory(prefix="check-07-", dir=SCRATCH) as name:
        yield Path(name)


class StoreUnderTest:
    """A store under test: the learner's connections to one file, and the check's own eyes."""

    def __init__(self, ns: Any, path: Path) -> None:
        self.ns = ns
        self.path = path
        self.conns: list[Any] = []
        self.conn = self.open()

    def open(self) -> Any:
        conn = self.ns.open_store(self.path)
        self.conns.append(conn)
        return conn

    def close(self) -> None:
        for conn in self.conns:
            with suppress(Exception):  # a learner's half-built connection may not close
                conn.close()

    def state(self) -> State:
        """Every pinned column of every table, sorted, read through the check's own connection."""
        db = sqlite3.connect(self.path, isolation_level=None, timeout=0.1)
        try:
            return {
                table: sorted(
                    db.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall(),
                    key=repr,
                )
                for table, columns in COLUMNS.items()
            }
        finally:
            db.close()

    def execute(self, sql: str) -> None:
        db = sqlite3.connect(self.path, isolation_level=None, timeout=0.1)
        try:
            db.execute(sql)
        finally:
            db.close()

    def traced(self, fn: Callable[[], Any]) -> list[str]:
        """The transaction statements ``fn()`` sends on the learner's connection (SQLite's
        own trace of what it executes), each in one upper-case form."""
        statements: list[str] = []
        self.conn.set_trace_callback(statements.append)
        try:
            fn()
        finally:
            self.conn.set_trace_callback(None)
        control = []
        for sql in statements:
            words = " ".join(sql.split()).upper().rstrip(";").removesuffix(" TRANSACTION")
            if words.split(" ", 1)[0] in ("BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT"):
                control.append("COMMIT" if words == "END" else words)
        return control

    def at_once(self, workers: int, fn: Callable[[Any], Any]) -> list[Any]:
        """``fn(conn)`` in `workers` threads at the same moment, each on a connection of its
        own from the learner's `open_store`: what each returned or raised, in thread order
        (a stub's NotImplementedError is raised here, so the check says "not done")."""
        start = threading.Barrier(workers)
        outcomes: list[Any] = [None] * workers

        def worker(slot: int) -> None:
            try:
                conn = self.ns.open_store(self.path)
                try:
                    start.wait(timeout=5)
                    outcomes[slot] = fn(conn)
                finally:
                    conn.close()
            except BaseException as exc:  # handed back to the check, which says what happened
                outcomes[slot] = exc

        threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20)
        for got in outcomes:
            if isinstance(got, NotImplementedError):
                raise got
        return outcomes

    def ingest(
        self,
        page: list[Any],
        expected: str | None,
        next_cursor: str,
        *,
        tenant: str = TENANT,
        conn: Any = None,
    ) -> Any:
        return self.ns.ingest_page(
            conn or self.conn,
            tenant=tenant,
            source=SOURCE,
            items=page,
            expected_cursor=expected,
            next_cursor=next_cursor,
        )


@contextmanager
def scratch_store(ns: Any) -> Iterator[StoreUnderTest]:
    """A new, empty store opened with the learner's `open_store`, closed and removed after."""
    with folder() as where:
        opened = StoreUnderTest(ns, where / "store.sqlite")
        try:
            yield opened
        finally:
            opened.close()


def unique_keys(db: sqlite3.Connection, table: str) -> list[tuple[str, ...]]:
    """The column tuples `table` has a unique index on (its primary key included)."""
    keys = []
    for index in db.execute(f"PRAGMA index_list('{table}')").fetchall():
        if index[2]:
            info = sorted(db.execute(f"PRAGMA index_info('{index[1]}')").fetchall())
            keys.append(tuple(row[2] for row in info))
    return keys


# ───────────────────────────────────────────────────────────── faults


def fault_on(table: str, where: str = "", event: str = "INSERT", action: str = "ABORT") -> str:
    """A trigger, ``fault_<table>``, that makes every `event` on `table` (matching `where`)
    fail: ``RAISE(ABORT)`` undoes the statement, ``RAISE(ROLLBACK)`` the whole transaction, as
    SQLite itself does after some errors (a full disk, an I/O error)."""
    fault = f"BEGIN SELECT RAISE({action}, 'injected fault'); END"
    return f"CREATE TRIGGER fault_{table} BEFORE {event} ON {table} {where} {fault}"


def raised_by(fn: Callable[[], Any]) -> BaseException | None:
    """What `fn` raised (a stub's NotImplementedError still propagates), or None."""
    try:
        fn()
    except NotImplementedError:
        raise
    except Exception as exc:
        return exc
    return None


# ───────────────────────────────────────────────────────────── what came back, in feedback


def outcome_fields(outcome: Any) -> tuple[Any, ...] | Said:
    """A `PageOutcome`'s fields in order, or what it was instead."""
    try:
        return tuple(getattr(outcome, name) for name in OUTCOME_FIELDS)
    except AttributeError:
        return Said(f"{show(outcome)} (not a PageOutcome)")


def outcome_text(values: Any) -> str:
    if not isinstance(values, tuple):
        return repr(values)
    pairs = zip(OUTCOME_FIELDS, values, strict=True)
    return "PageOutcome(" + ", ".join(f"{n}={v!r}" for n, v in pairs) + ")"


def expect_outcome(call: str, got: Any, want: tuple[Any, ...], note: str = "") -> None:
    """Fail unless `got` is a `PageOutcome` with exactly the fields `want` (types included)."""
    values = outcome_fields(got)
    same = isinstance(values, tuple) and all(
        type(a) is type(b) and a == b for a, b in zip(values, want, strict=True)
    )
    if not same:
        raise CheckFailure(call, outcome_text(values), outcome_text(want), note)


def row_text(row: tuple[Any, ...]) -> str:
    """A row with long ids and payloads cut short, so that it fits a line of feedback."""

    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) == 36 and value.count("-") == 4:
            return value[:8] + "…"  # a launch's UUID
        if isinstance(value, str) and value[:1] in "[{" and len(value) > 24:
            return value[:21] + "..."  # a payload's JSON
        if isinstance(value, str) and len(value) > 40:
            return value[:37] + "..."
        return value

    return repr(tuple(cut(v) for v in row))


def rows_text(state: State, table: str) -> Said:
    return Said("[" + ", ".join(row_text(row) for row in state[table]) + "]")


def expect_same_state(call: str, got: State, want: State, expected: str, note: str = "") -> None:
    """Fail with the rows that differ, table by table, unless `got` holds what `want` holds."""
    for table in COLUMNS:
        if got[table] == want[table]:
            continue
        extra = [row for row in got[table] if row not in want[table]]
        missing = [row for row in want[table] if row not in got[table]]
        found = [f"unexpected {table} row {row_text(row)}" for row in extra[:3]]
        found += [f"missing {table} row {row_text(row)}" for row in missing[:3]]
        if not found:
            found = [f"{table}: some rows stored more than once"]
        raise CheckFailure(
            f"{call}; then the {table} table", Said("; ".join(found)), expected, note
        )


# ───────────────────────────────────────────────────────────── the checks' inputs


def item(number: int, version: int = 1, **changes: Any) -> dict[str, Any]:
    """Fixture launch `number` as a page delivers it (a fresh dict every call)."""
    launch = dataclasses.replace(launches()[number], **changes)
    return {"id": launch.id, "version": version, "payload": dataclasses.asdict(launch)}


def short_id(launch_number: int) -> str:
    """A fixture launch's id as feedback shows it: its first 8 characters."""
    return launches()[launch_number].id[:8] + "…"


#: SHA-256 of fixture launch 0's payload in canonical JSON (notebook 02's form: sorted keys, no
#: spaces, non-ASCII kept), worked out once when this check was written: the check compares
#: the stored text with it and holds no canonical form of its own.
LAUNCH_0_PAYLOAD_SHA256 = "b87098ebfc12024d30b2ad7a150fe807b3ce03e229c83871e65438f9bd86ffca"


def holds_launch_0(rows: list[tuple[Any, ...]], version: int) -> bool:
    """Whether `rows` is one row: launch 0 at `version`, its payload in canonical JSON."""
    if len(rows) != 1 or rows[0][:4] != (TENANT, SOURCE, launches()[0].id, version):
        return False
    payload = rows[0][4]
    return (
        isinstance(payload, str)
        and hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()
        == LAUNCH_0_PAYLOAD_SHA256
    )


ROLLBACK_NOTE = (
    "Items and checkpoint in one BEGIN IMMEDIATE ... COMMIT: on any exception, ROLLBACK (if"
    " conn.in_transaction), then `raise` the same exception."
)


def page(first: int, count: int = 4, version: int = 1, **changes: Any) -> list[dict[str, Any]]:
    return [item(n, version, **changes) for n in range(first, first + count)]


def page_2_under_fault(
    s: StoreUnderTest,
    call: str,
    table: str,
    *,
    event: str = "INSERT",
    action: str = "ABORT",
    where: str = "",
    raises: str,
    raises_note: str = "",
    as_before: str,
    transaction_closed: bool = False,
) -> None:
    """After page 1, page 2 while a trigger makes a write to `table` fail: it must raise the
    database's own IntegrityError (`action` as `fault_on` says) and leave the store as page 1
    left it (and, when `transaction_closed`, no transaction open); with the fault repaired,
    page 2 goes through."""
    s.ingest(page(0), None, "p1")
    before = s.state()
    s.execute(fault_on(table, where, event, action))
    got = raised_by(lambda: s.ingest(page(4), "p1", "p2"))
    expect(
        isinstance(got, sqlite3.IntegrityError),
        call,
        got if got else Said("returned"),
        raises,
        note=raises_note,
    )
    expect_same_state(call, s.state(), before, as_before, ROLLBACK_NOTE)
    if transaction_closed:
        expect_equal(
            f"{call}; then conn.in_transaction", s.conn.in_transaction, False, ROLLBACK_NOTE
        )
    s.execute(f"DROP TRIGGER fault_{table}")
    expect_outcome(
        f"{call}; the fault repaired, page 2 again",
        s.ingest(page(4), "p1", "p2"),
        (4, 0, 0, True, "p2"),
    )
