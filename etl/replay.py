"""Notebook 06's store: the launch feed it pages through, the SQLite tables and statements its
sections introduce, and the plumbing every demo shares.

- the feed: 20 launches, 4 to a page, under the cursors ``None``, ``"offset=4"``, ... (`fetch`,
  or a `Feed` whose items can be swapped: a poisoned one, later its fix);
- identity: notebook 02's canonical JSON and a separated SHA-256 (`canonical`, `digest`);
- the tables and statements, named as the notebook names them where it teaches them;
- `Scratch`: a folder of throwaway database files, connections in explicit-transaction mode,
  and a restart that loses whatever was not committed, as a killed process does;
- the yardstick: `fingerprint`, one short hash of a database's whole content, and `play`, which
  runs a script of runs, crashes and stale workers against one design of the job.

The rules themselves (a transaction per page, compare-and-set, isolating poison, keys recorded
before a call) are written in the notebook, where each is shown failing first. Keeping what
they stand on here means anything that replays the notebook's demos runs its very own SQL.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from etl.data import launches
from etl.rows import Launch

#: The feed: the first 20 shipped launches, in launch order.
LAUNCHES: tuple[Launch, ...] = tuple(launches()[:20])
PAGE_SIZE = 4
#: One of our customers, and the Launch Library 2 feed it syncs.
TENANT, SOURCE = "acme", "ll2"

Item = dict[str, Any]
"""What a page hands over: the source's ``id``, its ``version`` (the source's revision of the
item) and the ``payload``."""


def as_item(launch: Launch, version: int = 1) -> Item:
    """An item as a page delivers it: the source's id, its revision, and the content."""
    return {"id": launch.id, "version": version, "payload": dataclasses.asdict(launch)}


def short(launch_id: str) -> str:
    """The first 8 characters of a launch's UUID: enough to tell the feed's 20 apart."""
    return launch_id[:8]


def _offset(cursor: str | None) -> int:
    return 0 if cursor is None else int(cursor.removeprefix("offset="))


class Feed:
    """The source. `fetch(cursor)` is the page at `cursor` and the cursor after it; the same
    cursor gives the same page, and an empty page means done. Callers get copies, so nothing
    they do to an item changes what the feed serves; only `replace` does."""

    def __init__(self, feed: Sequence[Launch] = LAUNCHES) -> None:
        self._items = [as_item(launch) for launch in feed]

    def fetch(self, cursor: str | None) -> tuple[list[Item], str]:
        """The page at `cursor`, and the cursor of the page after it."""
        offset = _offset(cursor)
        page = copy.deepcopy(self._items[offset : offset + PAGE_SIZE])
        return page, f"offset={offset + len(page)}"

    def replace(self, index: int, item: Item) -> None:
        """From now on, serve `item` at `index` (0-based, across pages)."""
        self._items[index] = copy.deepcopy(item)

    def find(self, launch_id: str) -> Item | None:
        """The item the feed serves now under `launch_id` (a repair re-reads one item by its
        identity, without moving any cursor); None if it serves none."""
        found = [item for item in self._items if item.get("id") == launch_id]
        return copy.deepcopy(found[0]) if found else None


def fetch(cursor: str | None) -> tuple[list[Item], str]:
    """The page at `cursor` of the unchanged feed, and the cursor of the page after it."""
    return Feed().fetch(cursor)


def canonical(value: Any) -> str:
    """Notebook 02's canonical JSON: sorted keys, no spaces, NaN and infinity refused
    (`ValueError`)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def digest(*parts: str) -> str:
    """SHA-256 of the parts joined by 0x00, so ("ab", "c") and ("a", "bc") differ."""
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


# ── The tables and statements, in the order the notebook's sections introduce them ──────────

#: Section 1: rows with no key at all, and where the job got to.
ROWS_NO_KEY = """CREATE TABLE launch_rows (
    tenant TEXT, source TEXT, launch_id TEXT, version INTEGER, body TEXT)"""
SYNC_STATE = """CREATE TABLE sync_state (
    tenant TEXT NOT NULL, source TEXT NOT NULL, position TEXT,
    PRIMARY KEY (tenant, source))"""
INSERT_PLAIN = "INSERT INTO launch_rows VALUES (?, ?, ?, ?, ?)"
SAVE_POSITION = "UPDATE sync_state SET position = ? WHERE tenant = ? AND source = ?"

#: Sections 2 and 3: identity enforced by the database, and an upsert that replaces.
ROWS = """CREATE TABLE launch_rows (
    tenant TEXT NOT NULL, source TEXT NOT NULL, launch_id TEXT NOT NULL,
    version INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (tenant, source, launch_id))"""
UPSERT = """INSERT INTO launch_rows VALUES (?, ?, ?, ?, ?)
ON CONFLICT (tenant, source, launch_id) DO UPDATE
SET version = excluded.version, body = excluded.body"""

#: Section 4: replace a row only with a newer revision of it.
NEWER_WINS = UPSERT + "\nWHERE excluded.version > launch_rows.version"

#: Section 6: triggers that refuse a write, as a failing constraint or downstream check would.
FAIL_CHECKPOINT = """CREATE TRIGGER fail_checkpoint BEFORE UPDATE ON sync_state
BEGIN SELECT RAISE(ABORT, 'checkpoint write failed'); END"""

#: Section 9: a failure record per item, keyed like the rows, so a replay records it once.
QUARANTINE = """CREATE TABLE quarantine (
    tenant TEXT NOT NULL, source TEXT NOT NULL, item_ref TEXT NOT NULL,
    seen_at TEXT, reason TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL,
    PRIMARY KEY (tenant, source, item_ref))"""
RECORD_REJECTED = """INSERT INTO quarantine VALUES (?, ?, ?, ?, ?, 'rejected', 1)
ON CONFLICT (tenant, source, item_ref) DO NOTHING"""

#: Section 10: each effect, its key and its exact parameters, recorded before the call.
EFFECTS = """CREATE TABLE effects (
    effect_key TEXT PRIMARY KEY, tenant TEXT NOT NULL, launch_id TEXT NOT NULL,
    message TEXT NOT NULL, state TEXT NOT NULL, message_id TEXT)"""

#: Section 11: follow-up jobs, written in their row's transaction.
OUTBOX = """CREATE TABLE outbox (
    job_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, launch_id TEXT NOT NULL,
    kind TEXT NOT NULL, state TEXT NOT NULL)"""


def fail_item(launch_id: str) -> str:
    """A trigger that refuses to store one particular launch (section 6)."""
    return f"""CREATE TRIGGER fail_item BEFORE INSERT ON launch_rows
WHEN NEW.launch_id = '{launch_id.replace("'", "''")}'
BEGIN SELECT RAISE(ABORT, 'item write failed'); END"""


class Crash(Exception):
    """Stands in for the process dying (kill -9, out of memory, a deploy): no handler runs."""


# ── Databases ────────────────────────────────────────────────────────────────────────────


def path_of(conn: sqlite3.Connection) -> str:
    """The file behind a connection, to open a second connection to the same database."""
    path: str = conn.execute("PRAGMA database_list").fetchone()[2]
    return path


class Scratch:
    """A throwaway folder of database files, and every connection opened on them.

    `close` closes them all and removes the folder; closing twice is harmless."""

    def __init__(self, prefix: str = "run-it-twice-06-") -> None:
        self._folder = tempfile.TemporaryDirectory(prefix=prefix)
        self.connections: list[sqlite3.Connection] = []

    def connect(self, path: str | Path, *, timeout: float = 5.0) -> sqlite3.Connection:
        """A connection in explicit-transaction mode: with ``isolation_level=None`` sqlite3
        never opens a transaction on its own, so a statement outside ``BEGIN ... COMMIT``
        commits at once."""
        conn = sqlite3.connect(path, isolation_level=None, timeout=timeout)
        # An fsync at WAL checkpoints rather than at every commit, a common production
        # setting: a commit survives a process crash (the kind simulated here), and a power
        # cut may lose the very last commits but never corrupts the file.
        conn.execute("PRAGMA synchronous = NORMAL")
        self.connections.append(conn)
        return conn

    def new_db(self, *ddl: str) -> sqlite3.Connection:
        """A fresh database file holding the given tables (and triggers). With `SYNC_STATE`
        among them, the source starts registered: its row exists, position NULL, so its first
        fetch is the first page."""
        name = f"demo-{len(self.connections):03d}.sqlite"
        conn = self.connect(Path(self._folder.name) / name)
        conn.execute("PRAGMA journal_mode = WAL")  # stored in the file: every connection uses it
        for statement in ddl:
            conn.execute(statement)
        if SYNC_STATE in ddl:
            conn.execute("INSERT INTO sync_state VALUES (?, ?, NULL)", (TENANT, SOURCE))
        return conn

    def restart(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        """The process dies and starts again: what was not committed is gone, as closing a
        connection with a transaction open discards it."""
        path = path_of(conn)
        conn.close()
        return self.connect(path)

    def close(self) -> None:
        for conn in self.connections:
            conn.close()
        self._folder.cleanup()


# ── Reading a store ──────────────────────────────────────────────────────────────────────


def position_of(conn: sqlite3.Connection) -> str | None:
    """The saved position of the tenant's source."""
    query = "SELECT position FROM sync_state WHERE tenant = ? AND source = ?"
    position: str | None = conn.execute(query, (TENANT, SOURCE)).fetchone()[0]
    return position


def params(item: Item, tenant: str = TENANT) -> tuple[Any, ...]:
    """The values of one row: identity, version, canonical body."""
    return (tenant, SOURCE, item["id"], item["version"], canonical(item["payload"]))


def row_count(conn: sqlite3.Connection, table: str = "launch_rows") -> int:
    count: int = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    return count


def describe(conn: sqlite3.Connection) -> str:
    """Rows, distinct launches and the saved position, in one line."""
    rows, distinct = conn.execute(
        "SELECT COUNT(*), COUNT(DISTINCT launch_id) FROM launch_rows"
    ).fetchone()
    return f"{rows} rows ({distinct} launches), position {position_of(conn)}"


def lost_and_doubled(conn: sqlite3.Connection) -> tuple[int, int]:
    """Against the feed's 20 launches: how many are not stored at all, and how many rows are
    repeats of a launch already stored."""
    stored = [launch_id for (launch_id,) in conn.execute("SELECT launch_id FROM launch_rows")]
    lost = len({launch.id for launch in LAUNCHES} - set(stored))
    return lost, len(stored) - len(set(stored))


def snapshot(conn: sqlite3.Connection) -> dict[str, list[list[Any]]]:
    """Every table's rows, sorted on all columns: the content, not the order of writing."""
    tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    state = {}
    for (table,) in tables.fetchall():
        width = len(conn.execute(f"PRAGMA table_info({table})").fetchall())
        order = ", ".join(str(column) for column in range(1, width + 1))
        rows = conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
        state[table] = [list(row) for row in rows]
    return state


def fingerprint(conn: sqlite3.Connection) -> str:
    """12 hex digits standing for the whole state: equal states, equal fingerprints."""
    return digest("state", canonical(snapshot(conn)))[:12]


# ── A replay script ──────────────────────────────────────────────────────────────────────

#: In a script, "load the position the database holds now" (a worker that starts fresh).
CURRENT = "the position in the database"

Step = tuple[str, str | None, int | None]
"""One event of a script: its label, the position the worker loaded (`CURRENT`, or a stale
one: a redelivery, a stale worker, a re-run from scratch) and after how many rows it dies
(None: it does not)."""

Event = Callable[[sqlite3.Connection, str | None, int | None], None]
"""One design of the job: write the page at the position loaded, dying after N rows."""


def page_reached(position: str | None) -> int:
    """How many pages a position says are done."""
    return _offset(position) // PAGE_SIZE


@dataclass(frozen=True)
class Played:
    """A script's run against one design: rows and checkpoint page after each event, and the
    end state, described and fingerprinted."""

    rows: list[int]
    pages: list[int]
    end: str
    print: str


def play(scratch: Scratch, table: str, event: Event, script: Sequence[Step]) -> Played:
    """Run `script` against `event` on a fresh store of `table` and `SYNC_STATE`; a `Crash`
    restarts the process, as a supervisor would, and the script goes on."""
    conn = scratch.new_db(table, SYNC_STATE)
    rows, pages = [], []
    for _label, loaded, crash_after in script:
        try:
            event(conn, position_of(conn) if loaded == CURRENT else loaded, crash_after)
        except Crash:
            conn = scratch.restart(conn)
        rows.append(row_count(conn))
        pages.append(page_reached(position_of(conn)))
    return Played(rows, pages, describe(conn), fingerprint(conn))
