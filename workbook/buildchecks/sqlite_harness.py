"""The SQLite harness of build 07's visible checks: scratch stores, read back by the check.

A check opens a `StoreUnderTest` in a temporary folder (removed when the check ends): the
learner's `open_store` makes the connections under test, and the harness reads every pinned
table back through a connection of its own, injects faults with triggers, and says what
differs in a line of feedback. It knows the pinned schema (`COLUMNS`, `KEYS`) and the shape
of a `PageOutcome`, nothing of how a build answers: it holds no reference implementation.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from workbook.checks import CheckFailure, Said
from workbook.feedback import show

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

FAULT = "BEGIN SELECT RAISE(ABORT, 'injected fault'); END"


def fault_on(table: str, where: str = "", event: str = "INSERT") -> str:
    """A trigger, ``fault_<table>``, that makes every `event` on `table` (matching `where`)
    fail."""
    return f"CREATE TRIGGER fault_{table} BEFORE {event} ON {table} {where} {FAULT}"


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
