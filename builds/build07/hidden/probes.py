"""Build 07's probes: run in the grading child, next to the learner's exported answers.

Most probes replay a *scenario*: a list of plain steps (deliver a page on connection k, inject
a fault with a trigger, clear the faults, reopen a connection), and after every step record
what came back and the whole store, read through a connection of the probe's own. The judges
(``judges.py``, in the parent) run the same steps through a model of the spec and compare, so
no expected outcome or state ever enters this process. The rest observe what a scenario cannot:
the statements a page sends and the locks it holds, duplicates delivered in the worst order, a
process killed mid-page, and a state machine of pages, replays, faults, restarts and stale
workers.

Everything reported here is a claim (the learner's code shares this process), so each probe
also *keeps* its database files (`grader.suites.observe.keep`): the parent reads them itself after
the worker ends, and judges the store it finds there. Every probe is seeded: the launches a
page holds, the cursors and the ids come from `Inputs`, drawn per submission from its own
exported text, and the state machine's steps are drawn from the same generator, so the parent
draws them again and checks that every step was answered. The probes' own connections come
from the `sqlite3` taken at import (before any learner's code ran), and the learner's
connection is traced through `sqlite3.Connection`'s own methods, so a subclass that overrides
them changes nothing. Each probe uses fresh database files in the worker's scratch folder.
Probing the same answers twice gives the same observations.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import random
import re
import signal
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from types import MappingProxyType, ModuleType
from typing import Any

from builds.build07.visible.interrupts import Interrupting, InterruptingPayload, nested
from etl import Launch, launches
from grader.suites.observe import (
    JSON,
    Probes,
    attempt,
    attempt_call,
    keep,
    need,
    plain,
    raised,
    suite_salt,
)
from workbook.checking.feedback import stable_repr

PROBES = Probes(suite_salt(__file__))
#: Parsed once, when the fork server imports this file: every worker inherits them.
LAUNCHES: tuple[Launch, ...] = tuple(launches())
#: Each launch's fields (`dataclasses.asdict`), made once: items are copies of these.
LAUNCH_FIELDS: tuple[dict[str, Any], ...] = tuple(dataclasses.asdict(launch) for launch in LAUNCHES)
#: Taken before any learner's code runs: the probes' connections are real ones, and a
#: learner's connection is traced through the real methods, whatever a subclass overrides.
Connection = sqlite3.Connection
_connect = sqlite3.connect
_set_trace = sqlite3.Connection.set_trace_callback
_create_function = sqlite3.Connection.create_function
_Error, _OperationalError = sqlite3.Error, sqlite3.OperationalError

TENANT, OTHER_TENANT = "acme", "globex"
SOURCE, OTHER_SOURCE = "ll2", "snapi"
#: The pinned columns, in the order the probes read them.
COLUMNS: dict[str, tuple[str, ...]] = {
    "items": ("tenant", "source", "item_id", "version", "payload"),
    "checkpoints": ("tenant", "source", "cursor", "item_count"),
    "failures": ("tenant", "source", "item_id", "reason", "seen_at"),
}
#: What identifies a row of each table (the unique key the schema must enforce).
IDENTITY: dict[str, tuple[str, ...]] = {
    "items": ("tenant", "source", "item_id"),
    "checkpoints": ("tenant", "source"),
    "failures": ("tenant", "source", "item_id"),
}
FAULT_MESSAGE = "injected fault"
SECRET = "s3cr3t-token-9f2c"

# ─────────────────────────────────────────────────────────────── inputs (shared with judges)


class Inputs:
    """What a submission's probes deliver: the fixture's launches in an order drawn for it
    (item `i` of a page is launch ``order[i]``), and a mark drawn for it that every cursor
    and made-up id carries. The judges draw the same from the same text."""

    def __init__(self, rng: random.Random) -> None:
        self.order = rng.sample(range(len(LAUNCHES)), len(LAUNCHES))
        self.mark = f"{rng.randrange(16**6):06x}"

    def launch(self, index: int) -> Launch:
        return LAUNCHES[self.order[index]]

    def item(self, index: int, version: int = 1, **changes: Any) -> dict[str, Any]:
        """Launch `index` as a source delivers it, fields changed as given (a fresh dict:
        a `Launch` holds only flat JSON values, so a copy of its fields is all of it)."""
        unknown = changes.keys() - LAUNCH_FIELDS[0].keys()
        if unknown:
            raise TypeError(f"a Launch has no field {sorted(unknown)}")
        payload = {**LAUNCH_FIELDS[self.order[index]], **changes}
        return {"id": payload["id"], "version": version, "payload": payload}

    def launch_id(self, index: int) -> str:
        return self.launch(index).id

    def cursor(self, name: str | None) -> str | None:
        """A scenario's cursor ("p1") as this submission's probes send it; a name of digits
        only ("40") stays digits only, a cursor that looks like a number."""
        if name is None:
            return None
        if name.isdigit():
            return str(int(name) * 1000 + int(self.mark, 16) % 1000)
        return f"{name}.{self.mark}"

    def page(self, name: str) -> list[Any]:
        return PAGES[name](self)


def without(item: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != key}


#: Pages by name: each call builds fresh items (an answer may mutate what it is given), of
#: the submission's own launches (`Inputs`).
PAGES: dict[str, Callable[[Inputs], list[Any]]] = {
    "empty": lambda s: [],
    "p1": lambda s: [s.item(i) for i in range(0, 4)],
    "p2": lambda s: [s.item(i) for i in range(4, 8)],
    "p3": lambda s: [s.item(i) for i in range(8, 12)],
    "p1_v2": lambda s: [s.item(i, 2, status="Success") for i in range(0, 4)],
    "p1_v2_b": lambda s: [s.item(i, 2, status="Partial Failure") for i in range(0, 4)],
    "p2_v2": lambda s: [s.item(i, 2, status="Success") for i in range(4, 8)],
    # The source's offsets shifted: items 2-5 again, 4-5 now at a higher version.
    "shifted": lambda s: [
        s.item(2),
        s.item(3),
        s.item(4, 3, status="Success"),
        s.item(5, 3, status="Success"),
    ],
    "with_poison": lambda s: [
        s.item(20),
        s.item(21, latitude=math.nan),  # no canonical JSON form
        s.item(22),
        s.item(23),
    ],
    "poison_bad_version": lambda s: [
        s.item(24),
        {**s.item(21), "version": "7"},
        s.item(25),
    ],
    "mixed": lambda s: [
        s.item(0, 2, status="Success"),  # newer than stored v1: applied
        s.item(1),  # same as stored: unchanged
        s.item(2, 0),  # older than stored v1: unchanged
        s.item(3, 1, status="Changed at the same version"),  # equal version: unchanged
        s.item(30),  # new: applied
        without(s.item(31), "id"),  # poison
        {**s.item(32), "version": True},  # poison: a bool is not an int version
        s.item(33, latitude=math.inf),  # poison
        s.item(30),  # repeated within the page: unchanged
        s.item(34),  # new: applied
    ],
    "in_page_order": lambda s: [
        s.item(40, 1),
        s.item(40, 3, status="Success"),
        s.item(40, 2, status="Failure"),
        s.item(41, 5),
        s.item(41, 5, status="Another payload"),
        s.item(42, 2),
        s.item(42, 2),
    ],
    "canonical": lambda s: [
        {"id": "order-of-keys", "version": 1, "payload": {"zeta": 1, "alpha": [3, 2, 1]}},
        {"id": "non-ascii", "version": 1, "payload": {"pad": "Baïkonour 31/6", "name": "Союз"}},
        {"id": "nested", "version": 1, "payload": {"b": {"y": None, "x": True}, "a": 0.5}},
        {"id": "negative-zero", "version": 1, "payload": {"lat": -0.0}},
        {"id": "a-list", "version": 1, "payload": [1, "two", None]},
        {"id": "a-string", "version": 1, "payload": "just text"},
        {"id": "explicit-null", "version": 1, "payload": None},
    ],
    "edge_versions": lambda s: [
        {"id": "zero", "version": 0, "payload": {}},
        {"id": "negative", "version": -5, "payload": {}},
        {"id": "largest", "version": 2**63 - 1, "payload": {}},
        {"id": "smallest", "version": -(2**63), "payload": {}},
    ],
    "every_poison": lambda s: [
        {"version": 1, "payload": {}},  # no id
        {"id": None, "version": 1, "payload": {}},
        {"id": "", "version": 1, "payload": {}},
        {"id": 42, "version": 1, "payload": {}},
        ["not", "a", "mapping"],
        {"id": "v-missing", "payload": {}},
        {"id": "v-none", "version": None, "payload": {}},
        {"id": "v-bool", "version": True, "payload": {}},
        {"id": "v-float", "version": 2.0, "payload": {}},
        {"id": "v-text", "version": "3", "payload": {}},
        {"id": "v-too-big", "version": 2**63, "payload": {}},
        {"id": "v-too-small", "version": -(2**63) - 1, "payload": {}},
        {"id": "p-missing", "version": 1},
        {"id": "p-nan", "version": 1, "payload": {"lat": math.nan}},
        {"id": "p-inf", "version": 1, "payload": [-math.inf]},
        {"id": "p-set", "version": 1, "payload": {"tags": {"a", "b"}}},
        {"id": "p-bytes", "version": 1, "payload": b"\x00\x01"},
        {"id": "fine", "version": 1, "payload": {"ok": True}},
    ],
    "secrets": lambda s: [
        {"id": "leaky-version", "version": f"7;session={SECRET}", "payload": {}},
        {"id": "leaky-payload", "version": 1, "payload": {"token": SECRET, "lat": math.nan}},
        {"version": 1, "payload": {"token": SECRET}},
    ],
    "id_less": lambda s: [s.item(50), without(s.item(51), "id"), s.item(52)],
    "id_less_b": lambda s: [without(s.item(53), "id"), s.item(54)],
    "poison_again": lambda s: [
        s.item(55),
        {**s.item(21), "payload": {"lat": math.nan}},  # launch 21 again, still poison
    ],
    "stale_mixed": lambda s: [
        s.item(0, 1, status="Go"),
        s.item(60),
        without(s.item(61), "id"),
    ],
    "tenant_a": lambda s: (
        [s.item(i, 1, status="acme's copy") for i in range(70, 73)]
        + [{"id": s.launch_id(73), "version": 1, "payload": {"lat": math.nan}}]
    ),
    "tenant_b": lambda s: (
        [s.item(i, 4, status="globex's copy") for i in range(70, 73)]
        + [{"id": s.launch_id(73), "version": "x", "payload": {}}]
    ),
    "for_threads": lambda s: [s.item(i) for i in range(80, 85)] + [without(s.item(85), "id")],
    "for_the_kill": lambda s: [s.item(i) for i in range(90, 94)],
}

# ─────────────────────────────────────────────────────────────── scenario steps (data)

Step = dict[str, Any]


def deliver(
    page: str,
    expected: str | None,
    next_cursor: str,
    *,
    tenant: str = TENANT,
    source: str = SOURCE,
    who: int = 0,
    say: str = "",
) -> Step:
    """ingest_page on connection `who` with the items of page `page`; the cursors are named
    here ("p1") and sent as `Inputs.cursor` makes them."""
    return {
        "op": "ingest",
        "page": page,
        "tenant": tenant,
        "source": source,
        "expected": expected,
        "next": next_cursor,
        "who": who,
        "say": say,
    }


def fault(table: str, *, item: str | None = None, action: str = "ABORT", say: str = "") -> Step:
    """A trigger that makes every insert or update of `table` fail (only of `item` in items)."""
    return {"op": "fault", "table": table, "item": item, "action": action, "say": say}


def clear(say: str = "the fault is repaired (its trigger dropped)") -> Step:
    return {"op": "clear", "say": say}


def reopen(who: int = 0, say: str = "") -> Step:
    """Close connection `who` and open the store again through open_store (a restart)."""
    return {"op": "reopen", "who": who, "say": say or f"connection {who} closed and reopened"}


def scenarios(s: Inputs) -> dict[str, list[Step]]:
    """Every scenario, its faults aimed at the submission's own launches."""
    return {
        "replay": [
            deliver("p1", None, "p1", say="page 1 (no checkpoint yet)"),
            deliver("p2", "p1", "p2", say="page 2"),
            deliver("p3", "p2", "p3", say="page 3"),
            deliver("p3", "p2", "p3", say="page 3 again (its acknowledgement was lost)"),
            deliver("p1", None, "p1", say="page 1 again (a re-run from scratch)"),
            deliver("p2", "p1", "p2", say="page 2 again"),
            reopen(say="a restart"),
            deliver("p3", "p2", "p3", say="page 3 again, after the restart"),
            deliver("empty", "p3", "p4", say="the empty page after page 3"),
        ],
        "item_fault": [
            deliver("p1", None, "p1", say="page 1"),
            fault(
                "items", item=s.launch_id(6), say="a trigger makes writing page 2's third item fail"
            ),
            deliver("p2", "p1", "p2", say="page 2 (its third item's write fails)"),
            deliver("p2", "p1", "p2", say="page 2 again (the fault is still there)"),
            clear(),
            deliver("p2", "p1", "p2", say="page 2, replayed"),
            deliver("p3", "p2", "p3", say="page 3"),
        ],
        "checkpoint_fault": [
            deliver("p1", None, "p1", say="page 1"),
            fault("checkpoints", say="a trigger makes writing the checkpoint fail"),
            deliver("p2", "p1", "p2", say="page 2 (the checkpoint write fails)"),
            clear(),
            deliver("p2", "p1", "p2", say="page 2, replayed"),
        ],
        "failure_fault": [
            deliver("p1", None, "p1", say="page 1"),
            fault("failures", say="a trigger makes recording a failure fail"),
            deliver("with_poison", "p1", "p2", say="a page with a poison item"),
            clear(),
            deliver("with_poison", "p1", "p2", say="the same page, replayed"),
        ],
        "first_page_faults": [
            fault("checkpoints", say="a trigger makes writing the checkpoint fail"),
            deliver("p1", None, "p1", say="page 1 (no checkpoint yet; its first write fails)"),
            clear(),
            fault(
                "items", item=s.launch_id(0), say="a trigger makes writing page 1's first item fail"
            ),
            deliver("p1", None, "p1", say="page 1 again"),
            clear(),
            deliver("p1", None, "p1", say="page 1, replayed"),
        ],
        "rollback_fault": [
            deliver("p1", None, "p1", say="page 1"),
            fault(
                "checkpoints",
                action="ROLLBACK",
                say="a trigger fails the checkpoint write with RAISE(ROLLBACK), which ends the"
                " transaction itself (as SQLite does on some I/O errors)",
            ),
            deliver("p2", "p1", "p2", say="page 2 (the checkpoint write fails)"),
            clear(),
            deliver("p2", "p1", "p2", say="page 2, replayed"),
            fault(
                "items", item=s.launch_id(9), action="ROLLBACK", say="the same, on an item write"
            ),
            deliver("p3", "p2", "p3", say="page 3 (its second item's write fails)"),
            clear(),
            deliver("p3", "p2", "p3", say="page 3, replayed"),
        ],
        "stale": [
            deliver("p1", None, "p1", who=1, say="worker F: page 1 (revision 1)"),
            deliver("p2", "p1", "p2", who=1, say="worker F: page 2"),
            deliver("p1_v2", "p2", "p3", who=1, say="worker F: the source re-serves page 1 at v2"),
            deliver(
                "p1",
                None,
                "p1",
                who=0,
                say="worker S, stalled since it loaded no checkpoint: page 1 at v1, finally",
            ),
            deliver("p2", "p1", "p2", who=0, say="worker S goes on from where it believes it is"),
            deliver(
                "stale_mixed",
                "p3",
                "p4",
                who=0,
                say="worker S from the persisted winner: one stale version and new items",
            ),
        ],
        "versions": [
            deliver("p1", None, "p1", say="page 1 (v1)"),
            deliver("p1_v2", "p1", "p2", say="page 1's items at v2"),
            deliver("p1", "p2", "p3", say="page 1's items at v1 again (stale)"),
            deliver("p1_v2_b", "p3", "p4", say="v2 again, with other payloads"),
            deliver("in_page_order", "p4", "p5", say="one id several times in one page"),
        ],
        "mixed": [
            deliver("p1", None, "p1", say="page 1"),
            deliver("mixed", "p1", "p2", say="a page mixing every outcome"),
            deliver("empty", "p2", "p3", say="an empty page"),
        ],
        "canonical": [
            deliver("canonical", None, "c1", say="payloads of every JSON shape"),
            deliver(
                "edge_versions", "c1", "c2", say="the smallest and largest versions SQLite holds"
            ),
        ],
        "every_poison": [
            deliver("every_poison", None, "e1", say="a page of poison items, and one good item"),
        ],
        "secrets": [
            deliver("secrets", None, "s1", say="poison items carrying a secret token"),
        ],
        "id_less": [
            deliver("id_less", None, "p1", say="page 1: its second item has no id"),
            deliver("id_less_b", "p1", "p2", say="page 2: its first item has no id"),
            deliver("id_less", None, "p1", say="page 1 again (a stale re-run: refused)"),
        ],
        "poison_again": [
            deliver("with_poison", None, "p1", say="page 1: launch 21 with a NaN latitude"),
            fault("checkpoints", say="a trigger makes writing the checkpoint fail"),
            deliver("poison_bad_version", "p1", "p2", say="page 2: launch 21 with version '7'"),
            clear(),
            deliver("poison_bad_version", "p1", "p2", say="page 2, replayed"),
            deliver(
                "poison_again", "p2", "p3", say="page 3: launch 21, NaN again (recorded already)"
            ),
        ],
        "cas": [
            deliver("p1", None, "p1", say="page 1"),
            deliver("stale_mixed", None, "p1", say="a run that believes no checkpoint exists"),
            deliver("stale_mixed", "p0", "p1", say="a run from a cursor that never existed"),
            deliver("p2", "p1", "p2", tenant=OTHER_TENANT, say="globex (no checkpoint) from 'p1'"),
            deliver("p1", "p1", "p2", source=OTHER_SOURCE, say="another source, from 'p1'"),
            deliver("p2", "p1", "p2", say="page 2, from the persisted cursor"),
        ],
        "tenants": [
            deliver("tenant_a", None, "a1", tenant=TENANT, say="acme: the shared ids"),
            deliver("tenant_b", None, "b1", tenant=OTHER_TENANT, say="globex: the same ids"),
            deliver("tenant_a", None, "x1", source=OTHER_SOURCE, say="acme, another source"),
            deliver("p1", "a1", "a2", tenant=TENANT, say="acme: page 1"),
            deliver("tenant_b", "b1", "b2", tenant=OTHER_TENANT, say="globex: its page again"),
            deliver("tenant_a", "a1", "a2", tenant=TENANT, say="acme, stale: refused"),
        ],
        "budget": [
            deliver("with_poison", None, "p1", say="page 1: its second item is poison"),
            deliver("p2", "p1", "p2", say="page 2"),
        ],
        "counts": [
            deliver("p1", None, "p1", say="page 1"),
            deliver(
                "shifted", "p1", "p2", say="page 2: offsets shifted, two items again, two newer"
            ),
            deliver("p2_v2", "p2", "p3", say="page 3: page 2's items at v2"),
            deliver("p1_v2", "p3", "p4", say="page 4: page 1's items at v2"),
        ],
    }


# ─────────────────────────────────────────────────────────────── probe helpers

_files = itertools.count(1)


def fresh_path() -> str:
    """A new database file in the worker's scratch folder."""
    return os.path.abspath(f"store-{os.getpid()}-{next(_files)}.sqlite")


def remove_store(path: str) -> None:
    for suffix in ("", "-journal", "-wal", "-shm"):
        with suppress(OSError):
            os.remove(path + suffix)


Where = str | sqlite3.Connection


@contextmanager
def ours(where: Where) -> Iterator[sqlite3.Connection]:
    """The probe's own connection (a real one, never the learner's object, never waiting
    long): a new one to the file `where`, or `where` itself when it already is one of ours."""
    if isinstance(where, Connection):
        yield where
        return
    conn = _connect(where, isolation_level=None, timeout=0.05, factory=Connection)
    try:
        yield conn
    finally:
        conn.close()


def read_tables(db: sqlite3.Connection) -> dict[str, list[JSON]]:
    """Every pinned column of every table (the probes' snapshot, and the judges' reading of a
    kept database)."""
    state = {}
    for table, columns in COLUMNS.items():
        rows = db.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
        state[table] = [plain(list(row)) for row in rows]
    return state


def snapshot(path: Where) -> JSON:
    """Every pinned column of every table, read through the probe's own connection."""
    try:
        with ours(path) as db:
            return {"ok": read_tables(db)}
    except _Error as exc:
        return raised(exc)


FIELDS = ("applied", "unchanged", "rejected", "advanced", "cursor")


def fields_of(value: Any) -> JSON:
    """The outcome's five fields as plain JSON (a missing one as ``{"missing_field": name}``)."""
    seen: dict[str, JSON] = {"type": plain(type(value).__name__)}
    for name in FIELDS:
        try:
            seen[name] = plain(getattr(value, name))
        except BaseException as exc:
            raised(exc)  # re-raises the probe's own timeout
            seen[name] = {"missing_field": name}
    return seen


def call_ingest(
    ns: ModuleType,
    conn: Any,
    *,
    tenant: str,
    source: str,
    items: list[Any],
    expected: str | None,
    next_cursor: str | None,
) -> JSON:
    try:
        value = need(ns, "ingest_page")(
            conn,
            tenant=tenant,
            source=source,
            items=items,
            expected_cursor=expected,
            next_cursor=next_cursor,
        )
    except BaseException as exc:
        return raised(exc)
    return {"ok": fields_of(value)}


def in_transaction(conn: Any) -> JSON:
    """Whether `conn` is inside a transaction, asked of `sqlite3.Connection` itself when it
    is one (a subclass's property is not asked)."""
    try:
        if isinstance(conn, Connection):
            return plain(Connection.in_transaction.__get__(conn))
        return plain(conn.in_transaction)
    except BaseException as exc:
        return raised(exc)


def install_fault(path: Where, step: Step) -> JSON:
    """Create the step's triggers (insert and update) through the probe's own connection."""
    table, item, action = step["table"], step["item"], step["action"]
    when = f" WHEN NEW.item_id = '{item}'" if item else ""
    body = f"BEGIN SELECT RAISE({action}, '{FAULT_MESSAGE}'); END"
    statements = [
        f"CREATE TRIGGER fault_{table}_{event.lower()} BEFORE {event} ON {table}{when} {body}"
        for event in ("INSERT", "UPDATE")
    ]
    return in_one_transaction(path, statements)


def clear_faults(path: Where) -> JSON:
    try:
        with ours(path) as db:
            names = db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'fault_%'"
            ).fetchall()
    except _Error as exc:
        return raised(exc)
    return in_one_transaction(path, [f"DROP TRIGGER {name}" for (name,) in names])


def in_one_transaction(path: Where, statements: Sequence[str]) -> JSON:
    try:
        with ours(path) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                for statement in statements:
                    db.execute(statement)
                db.execute("COMMIT")
            except _Error:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        return {"ok": None}
    except _Error as exc:
        return raised(exc)


def open_conn(ns: ModuleType, path: str) -> tuple[Any, JSON]:
    try:
        return need(ns, "open_store")(path), {"ok": None}
    except BaseException as exc:
        return None, raised(exc)


def close(conn: Any) -> None:
    try:
        conn.close()
    except BaseException as exc:
        raised(exc)


def run_scenario(ns: ModuleType, s: Inputs, steps: Sequence[Step], name: str) -> JSON:
    """Play `steps` on a fresh store; after each: the result, the store, and whether the
    connection used was left inside a transaction. The store itself is kept as `name`."""
    path = fresh_path()
    conns: dict[int, Any] = {}
    observed: list[JSON] = []
    try:
        conn, opened = open_conn(ns, path)
        if conn is None:
            return {"steps": observed, "stopped": opened}
        conns[0] = conn
        for step in steps:
            op = step["op"]
            seen: dict[str, JSON] = {}
            if op in ("ingest", "reopen"):
                who = step["who"]
                if op == "reopen" and who in conns:
                    close(conns.pop(who))
                if who not in conns:
                    conn, opened = open_conn(ns, path)
                    if conn is None:
                        observed.append({"result": opened})
                        return {"steps": observed, "stopped": opened}
                    conns[who] = conn
                if op == "ingest":
                    seen["result"] = call_ingest(
                        ns,
                        conns[who],
                        tenant=step["tenant"],
                        source=step["source"],
                        items=s.page(step["page"]),
                        expected=s.cursor(step["expected"]),
                        next_cursor=s.cursor(step["next"]),
                    )
                    seen["in_transaction"] = in_transaction(conns[who])
                else:
                    seen["result"] = {"ok": None}
            elif op == "fault":
                seen["result"] = install_fault(path, step)
            elif op == "clear":
                seen["result"] = clear_faults(path)
            seen["state"] = snapshot(path)
            observed.append(seen)
        return {"steps": observed, "store": keep(path, name)}
    finally:
        for conn in conns.values():
            close(conn)
        remove_store(path)


def scenario_probe(name: str, *names: str) -> None:
    """Register probe `name` playing the named scenarios."""

    def probe(ns: ModuleType, rng: random.Random) -> JSON:
        s = Inputs(rng)
        played = scenarios(s)
        return {n: run_scenario(ns, s, played[n], f"{name}.{n}") for n in names}

    PROBES.seeded(name)(probe)


# ─────────────────────────────────────────────────────────────── step 1: the store


def schema_of(db: sqlite3.Connection) -> JSON:
    """Each table's columns, and its unique indexes (primary key included) as column lists:
    read by the judges from the kept database."""
    tables = {}
    for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        columns = [row[1] for row in db.execute("SELECT * FROM pragma_table_info(?)", (table,))]
        unique = []
        for index in db.execute("SELECT * FROM pragma_index_list(?)", (table,)).fetchall():
            if index[2]:  # unique
                info = db.execute("SELECT * FROM pragma_index_info(?)", (index[1],)).fetchall()
                unique.append([row[2] for row in sorted(info)])
        pk = [row for row in db.execute("SELECT * FROM pragma_table_info(?)", (table,)) if row[5]]
        if pk:
            key = [row[1] for row in sorted(pk, key=lambda r: r[5])]
            if key not in unique:
                unique.append(key)
        tables[str(table)] = {"columns": plain(columns), "unique": plain(unique)}
    return tables


def direct_insert(path: str, table: str, values: dict[str, Any]) -> JSON:
    """Insert a row through the probe's own connection: None, or the error's class name."""
    columns = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    try:
        with ours(path) as db:
            db.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(values.values()))
        return {"ok": None}
    except _Error as exc:
        return raised(exc)


def marker_row(s: Inputs) -> dict[str, Any]:
    """The item the schema probe writes into a new store, through its own connection."""
    return {
        "tenant": TENANT,
        "source": SOURCE,
        "item_id": f"marker.{s.mark}",
        "version": 1,
        "payload": "{}",
    }


@PROBES.seeded("store_has_the_pinned_schema")
def pinned_schema(ns: ModuleType, rng: random.Random) -> JSON:
    s = Inputs(rng)
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    try:
        seen = {
            "opened": opened,
            "type": plain(type(conn).__name__),
            "is_connection": isinstance(conn, Connection),
            "isolation_level": attempt(lambda: conn.isolation_level),
        }
        close(conn)
        seen["marker"] = direct_insert(path, "items", marker_row(s))
        seen["store"] = keep(path, "store_has_the_pinned_schema")
        return seen
    finally:
        remove_store(path)


def identity_inserts(s: Inputs) -> tuple[tuple[str, dict[str, Any]], ...]:
    """(table, row) inserted in order into a fresh store; the judges know which must be
    refused. The ids carry the submission's mark."""
    x, y, z = (f"{name}.{s.mark}" for name in "xyz")
    item = {"tenant": TENANT, "source": SOURCE, "version": 1, "payload": "1"}
    point = {"tenant": TENANT, "source": SOURCE, "item_count": 0}
    failure = {"tenant": TENANT, "source": SOURCE, "reason": "r"}
    return (
        ("items", {**item, "item_id": x}),
        ("items", {**item, "item_id": x, "version": 2, "payload": "2"}),
        ("items", {**item, "tenant": OTHER_TENANT, "item_id": x}),
        ("items", {**item, "source": OTHER_SOURCE, "item_id": x}),
        ("items", {**item, "item_id": y}),
        ("checkpoints", {**point, "cursor": s.cursor("p1")}),
        ("checkpoints", {**point, "cursor": s.cursor("p2")}),
        ("checkpoints", {**point, "tenant": OTHER_TENANT, "cursor": s.cursor("p1")}),
        ("failures", {**failure, "item_id": z}),
        ("failures", {**failure, "item_id": z}),
        ("failures", {**failure, "tenant": OTHER_TENANT, "item_id": z}),
    )


#: The inserts above that must be refused: the second row of an identity already stored.
REFUSED = (1, 6, 9)


@PROBES.seeded("identity_is_enforced_per_tenant")
def identity_enforced(ns: ModuleType, rng: random.Random) -> JSON:
    s = Inputs(rng)
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    try:
        close(conn)
        inserts = [direct_insert(path, table, row) for table, row in identity_inserts(s)]
        return {
            "opened": opened,
            "inserts": inserts,
            "store": keep(path, "identity_is_enforced_per_tenant"),
        }
    finally:
        remove_store(path)


@PROBES.seeded("reopening_keeps_the_data")
def reopening(ns: ModuleType, rng: random.Random) -> JSON:
    s = Inputs(rng)
    path = fresh_path()
    try:
        first, opened = open_conn(ns, path)
        if first is None:
            return {"opened": opened}
        page = call_ingest(
            ns,
            first,
            tenant=TENANT,
            source=SOURCE,
            items=s.page("p1"),
            expected=None,
            next_cursor=s.cursor("p1"),
        )
        close(first)
        second, reopened = open_conn(ns, path)
        if second is None:
            return {"opened": opened, "page": page, "reopened": reopened}
        try:
            seen = {
                "opened": opened,
                "page": page,
                "reopened": reopened,
                "state": snapshot(path),
                "kept": keep(path, "reopening_keeps_the_data.reopened"),
                "read": attempt(lambda: need(ns, "read_checkpoint")(second, TENANT, SOURCE)),
                "next": call_ingest(
                    ns,
                    second,
                    tenant=TENANT,
                    source=SOURCE,
                    items=s.page("p2"),
                    expected=s.cursor("p1"),
                    next_cursor=s.cursor("p2"),
                ),
                "state_after": snapshot(path),
            }
        finally:
            close(second)
        seen["store"] = keep(path, "reopening_keeps_the_data")
        return seen
    finally:
        remove_store(path)


# ─────────────────────────────────────────────────────────────── step 2: checkpoints

#: Calls in order on one store: ("read", tenant, source) or ("advance", tenant, source,
#: expected, next), cursors named here and sent as `Inputs.cursor` makes them. Autocommit:
#: no transaction around them.
CHECKPOINT_CALLS: tuple[tuple[Any, ...], ...] = (
    ("read", TENANT, SOURCE),
    ("advance", TENANT, SOURCE, None, "p1"),
    ("read", TENANT, SOURCE),
    ("advance", TENANT, SOURCE, None, "p9"),
    ("advance", TENANT, SOURCE, "p0", "p9"),
    ("read", TENANT, SOURCE),
    ("advance", TENANT, SOURCE, "p1", "p2"),
    ("advance", TENANT, SOURCE, "p1", "p3"),
    ("read", TENANT, SOURCE),
    ("read", OTHER_TENANT, SOURCE),
    ("advance", OTHER_TENANT, SOURCE, "p2", "p3"),
    ("read", OTHER_TENANT, SOURCE),
    ("advance", OTHER_TENANT, SOURCE, None, "q1"),
    ("read", OTHER_TENANT, SOURCE),
    ("read", TENANT, OTHER_SOURCE),
    ("read", TENANT, SOURCE),
    # Cursors of digits only: still the str that was stored (cursor is TEXT).
    ("advance", TENANT, OTHER_SOURCE, None, "40"),
    ("read", TENANT, OTHER_SOURCE),
    ("advance", TENANT, OTHER_SOURCE, "40", "80"),
    ("read", TENANT, OTHER_SOURCE),
)


@PROBES.seeded("checkpoint_moves_only_by_compare_and_set")
def checkpoint_cas(ns: ModuleType, rng: random.Random) -> JSON:
    s = Inputs(rng)
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    try:
        calls = []
        for call in CHECKPOINT_CALLS:
            if call[0] == "read":
                calls.append(attempt_call(ns, "read_checkpoint", conn, call[1], call[2]))
            else:
                _, tenant, source, before, after = call
                moved = attempt_call(
                    ns,
                    "advance_checkpoint",
                    conn,
                    tenant,
                    source,
                    s.cursor(before),
                    s.cursor(after),
                )
                calls.append(moved)
        return {
            "opened": opened,
            "calls": calls,
            "state": snapshot(path),
            "store": keep(path, "checkpoint_moves_only_by_compare_and_set"),
        }
    finally:
        close(conn)
        remove_store(path)


# ─────────────────────────────────────────────────────────────── step 3: poison


def classified_items(s: Inputs, rng: random.Random) -> list[Any]:
    """Every kind of poison and of good item, in an order drawn for the submission."""
    items = s.page("every_poison") + s.page("canonical") + s.page("edge_versions")
    # Any Mapping is an item, not only a dict.
    items.append(MappingProxyType({"id": f"proxy.{s.mark}", "version": 1, "payload": [s.mark]}))
    rng.shuffle(items)
    return items


#: Far deeper than any recursion limit: canonical_json raises RecursionError, not ValueError.
DEEP = 5_000


def rule_order_items() -> list[tuple[str, Any]]:
    """(label, item): items that break two rules at once (the first rule decides), and a
    payload nested `DEEP` lists deep. Labels, not reprs: the deep one has no repr."""
    return [
        (
            "{'id': 7, 'version': '1', 'payload': {'lat': nan}}",
            {"id": 7, "version": "1", "payload": {"lat": math.nan}},
        ),
        ("{'version': True}", {"version": True}),
        (
            "{'id': 'v-and-p', 'version': '2', 'payload': {'lat': nan}}",
            {"id": "v-and-p", "version": "2", "payload": {"lat": math.nan}},
        ),
        ("{'id': 'v-and-no-p', 'version': 1.0}", {"id": "v-and-no-p", "version": 1.0}),
        (
            "{'id': 'big-and-set', 'version': 2**63, 'payload': {'a', 'b'}}",
            {"id": "big-and-set", "version": 2**63, "payload": {"a", "b"}},
        ),
        (
            f"{{'id': 'deep', 'version': 1, 'payload': [[[...]]] ({DEEP} lists deep)}}",
            {"id": "deep", "version": 1, "payload": nested(DEEP)},
        ),
    ]


@PROBES.seeded("poison_items_are_classified")
def classified(ns: ModuleType, rng: random.Random) -> JSON:
    items = classified_items(Inputs(rng), rng)
    return {
        "reasons": [attempt_call(ns, "poison_reason", item) for item in items],
        "rule_order": [attempt_call(ns, "poison_reason", item) for _, item in rule_order_items()],
    }


# ─────────────────────────────────────────────────────────────── step 4: upsert_item


def upsert_calls(s: Inputs) -> dict[str, tuple[tuple[str, dict[str, Any]], ...]]:
    """(tenant, item) written in order by upsert_item on one store, autocommit."""
    return {
        "replace": (
            (TENANT, s.item(0)),
            (TENANT, s.item(0)),
            (TENANT, s.item(1)),
            (TENANT, s.item(0, 2, status="Success")),
            (TENANT, s.item(0, 2, status="Success")),
            (OTHER_TENANT, s.item(0)),
        ),
        "versions": (
            (TENANT, s.item(5, 2, status="Success")),
            (TENANT, s.item(5, 1, status="Go")),
            (TENANT, s.item(5, 2, status="Failure")),
            (TENANT, s.item(5, 3, status="Partial Failure")),
            (TENANT, s.item(5, 0)),
            (
                TENANT,
                {
                    "id": f"canonical.{s.mark}",
                    "version": 1,
                    "payload": {"b": "Союз", "a": [1.5, None]},
                },
            ),
        ),
    }


def upsert_run(ns: ModuleType, calls: Sequence[tuple[str, dict[str, Any]]], name: str) -> JSON:
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    try:
        results = []
        for tenant, item in calls:
            result = attempt_call(ns, "upsert_item", conn, tenant, SOURCE, dict(item))
            results.append({"result": result, "state": snapshot(path)})
        return {"opened": opened, "calls": results, "store": keep(path, name)}
    finally:
        close(conn)
        remove_store(path)


@PROBES.seeded("replace_never_accumulate")
def replace_never(ns: ModuleType, rng: random.Random) -> JSON:
    return upsert_run(ns, upsert_calls(Inputs(rng))["replace"], "replace_never_accumulate")


@PROBES.seeded("newer_version_wins")
def newer_wins(ns: ModuleType, rng: random.Random) -> JSON:
    return upsert_run(ns, upsert_calls(Inputs(rng))["versions"], "newer_version_wins")


# ─────────────────────────────────────────────────────────────── step 5: ingest_page

scenario_probe("replay_same_batch_same_fixed_point", "replay")
scenario_probe("item_failure_holds_checkpoint", "item_fault", "first_page_faults")
scenario_probe("checkpoint_failure_rolls_back_items", "checkpoint_fault")
scenario_probe("stale_run_cannot_overwrite", "stale")
scenario_probe("tenants_never_collide", "tenants")
scenario_probe("outcome_counts_every_item_once", "mixed")
scenario_probe("versions_decide_within_and_across_pages", "versions")
scenario_probe("payload_stored_as_canonical_json", "canonical")
scenario_probe("every_poison_item_is_recorded", "every_poison")
scenario_probe("reasons_are_sanitized", "secrets")
scenario_probe("id_less_poison_recorded_where_it_was_seen", "id_less")
scenario_probe("replayed_poison_recorded_once", "poison_again")
scenario_probe("cas_miss_writes_nothing", "cas")
scenario_probe("database_error_rolls_back_and_propagates", "failure_fault", "first_page_faults")
scenario_probe("error_after_automatic_rollback_propagates", "rollback_fault")
scenario_probe("item_count_is_a_recount", "counts")

BUDGET = 3


@PROBES.seeded("poison_item_recorded_later_items_terminal")
def poison_budget(ns: ModuleType, rng: random.Random) -> JSON:
    """A worker that retries a page up to BUDGET times when ingest_page raises."""
    s = Inputs(rng)
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    try:
        pages = []
        for step in scenarios(s)["budget"]:
            attempts = []
            for _ in range(BUDGET):
                result = call_ingest(
                    ns,
                    conn,
                    tenant=TENANT,
                    source=SOURCE,
                    items=s.page(step["page"]),
                    expected=s.cursor(step["expected"]),
                    next_cursor=s.cursor(step["next"]),
                )
                attempts.append(result)
                if "ok" in result:
                    break
            pages.append({"attempts": attempts, "state": snapshot(path)})
        return {
            "opened": opened,
            "pages": pages,
            "store": keep(path, "poison_item_recorded_later_items_terminal"),
        }
    finally:
        close(conn)
        remove_store(path)


# ─────────────────────────────────────────────────────────────── hidden: the transaction

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "UPSERT", "CREATE", "DROP", "ALTER")


def statement_kind(sql: str) -> str:
    """The first keyword(s) of a traced statement: BEGIN IMMEDIATE, COMMIT, INSERT, ..."""
    words = re.sub(r"--[^\n]*|/\*.*?\*/", " ", sql, flags=re.DOTALL).upper().split()
    if not words:
        return ""
    if words[0] == "BEGIN":
        mode = (
            words[1]
            if len(words) > 1 and words[1] in ("DEFERRED", "IMMEDIATE", "EXCLUSIVE")
            else "DEFERRED"
        )
        return f"BEGIN {mode}"
    if words[0] == "END":
        return "COMMIT"
    if words[0] == "WITH":  # a CTE: the statement's verb comes later
        verb = next((w for w in words if w in (*WRITES, "SELECT")), "SELECT")
        return verb
    return words[0]


def write_locked(path: str) -> bool:
    """Whether some connection holds the store's write lock now: a connection of the probe's
    own asks for it without waiting."""
    try:
        with ours(path) as witness:
            witness.execute("PRAGMA busy_timeout = 0")
            witness.execute("BEGIN IMMEDIATE")
            witness.execute("ROLLBACK")
        return False
    except _OperationalError:
        return True


class Tracer:
    """The statements one connection sends, traced through `sqlite3.Connection`'s own
    method (a subclass's override is never asked), and, at the statement after each BEGIN,
    whether the write lock was already held: a BEGIN IMMEDIATE takes it at once, a deferred
    one only at its first write. `then`, when given, runs at the first statement the
    connection sends after a COMMIT or ROLLBACK of its own (when it holds no lock)."""

    def __init__(self, path: str, then: Callable[[], None] | None = None) -> None:
        self.path = path
        self.statements: list[str] = []
        self.locked: list[JSON] = []
        self.then = then
        self._after: str | None = None

    def __call__(self, sql: str) -> None:
        if len(self.statements) >= 200:
            return
        kind = statement_kind(sql)
        if self._after is not None and self._after.startswith("BEGIN"):
            self.locked.append(write_locked(self.path))
        if self.then is not None and self._after in ("COMMIT", "ROLLBACK"):
            then, self.then = self.then, None
            then()
        self.statements.append(kind)
        self._after = kind

    def attach(self, conn: Any) -> JSON:
        try:
            _set_trace(conn, self)
            return None
        except BaseException as exc:
            return raised(exc)

    @staticmethod
    def detach(conn: Any) -> None:
        with suppress(BaseException):
            _set_trace(conn, None)


def traced(
    ns: ModuleType, conn: Any, path: str, items: list[Any], expected: str | None, nxt: str | None
) -> JSON:
    tracer = Tracer(path)
    problem = tracer.attach(conn)
    if problem is not None:
        return problem
    try:
        result = call_ingest(
            ns,
            conn,
            tenant=TENANT,
            source=SOURCE,
            items=items,
            expected=expected,
            next_cursor=nxt,
        )
    finally:
        tracer.detach(conn)
    if len(tracer.locked) < sum(s.startswith("BEGIN") for s in tracer.statements):
        tracer.locked.append(None)  # a BEGIN with nothing after it: nothing to witness
    return {"result": result, "statements": tracer.statements, "locked": tracer.locked}


@PROBES.seeded("explicit_transaction_per_page")
def explicit_transaction(ns: ModuleType, rng: random.Random) -> JSON:
    """Four calls, traced, and the store kept before and after each (its header counts the
    transactions that committed)."""
    s = Inputs(rng)
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    name = "explicit_transaction_per_page"
    try:
        seen: dict[str, JSON] = {
            "opened": opened,
            "isolation_level": attempt(lambda: conn.isolation_level),
            "before": keep(path, f"{name}.0"),
        }
        cursor = s.cursor
        seen["first"] = traced(ns, conn, path, s.page("with_poison"), None, cursor("p1"))
        seen["after_first"] = keep(path, f"{name}.1")
        seen["stale"] = traced(ns, conn, path, s.page("p2"), None, cursor("p1"))
        seen["after_stale"] = keep(path, f"{name}.2")
        seen["next"] = traced(ns, conn, path, s.page("p2"), cursor("p1"), cursor("p2"))
        seen["after_next"] = keep(path, f"{name}.3")
        install_fault(path, fault("checkpoints"))
        seen["faulted"] = keep(path, f"{name}.4")
        seen["failing"] = traced(ns, conn, path, s.page("p3"), cursor("p2"), cursor("p3"))
        seen["after_failing"] = keep(path, f"{name}.5")
        clear_faults(path)
        seen["state"] = snapshot(path)
        return seen
    finally:
        close(conn)
        remove_store(path)


def interrupted_at(s: Inputs, rng: random.Random) -> int:
    """Where in page p2 the interrupting item goes: after at least one written item."""
    return rng.randint(1, len(s.page("p2")))


@PROBES.seeded("interrupted_page_rolls_back")
def interrupted(ns: ModuleType, rng: random.Random) -> JSON:
    """A first page with a KeyboardInterrupt raised mid-page, then that page again, then a
    second page whose item's payload interrupts its serialising, all on one connection: an
    interrupted call must leave no transaction open and nothing written."""
    s = Inputs(rng)
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    name = "interrupted_page_rolls_back"
    page, at = s.page("p2"), interrupted_at(s, rng)
    later = s.page("p3")
    later.insert(at, {"id": f"stop.{s.mark}", "version": 1, "payload": InterruptingPayload(a=1)})
    steps = (
        ("interrupted", [*page[:at], Interrupting(), *page[at:]], None, "p1"),
        ("again", s.page("p2"), None, "p1"),
        ("payload", later, "p1", "p2"),
    )
    seen: dict[str, JSON] = {"opened": opened}
    try:
        for step, items, expected, nxt in steps:
            seen[step] = call_ingest(
                ns,
                conn,
                tenant=TENANT,
                source=SOURCE,
                items=items,
                expected=s.cursor(expected),
                next_cursor=s.cursor(nxt),
            )
            seen[f"{step}_in_transaction"] = in_transaction(conn)
            seen[f"after_{step}"] = keep(path, f"{name}.{step}")
        return seen
    finally:
        close(conn)
        remove_store(path)


# ─────────────────────────────────────────────────────────────── hidden: concurrency

THREADS = 4


@PROBES.seeded("concurrent_duplicates_one_durable_effect")
def concurrent(ns: ModuleType, rng: random.Random) -> JSON:
    """THREADS workers, each on its own connection, deliver the same first page, in the
    worst order that does not wait on a lock: each worker's duplicate is delivered at the
    first statement the worker before it sends after ending a transaction of its own (while
    it holds no lock: between two transactions of one page), or when that worker returns.
    No threads and no timing: the same answers give the same results, in worker order."""
    s = Inputs(rng)
    path = fresh_path()
    first, opened = open_conn(ns, path)
    if first is None:
        return {"opened": opened}
    close(first)
    conns: list[Any] = []
    results: list[JSON] = [None] * THREADS
    try:
        for _ in range(THREADS):
            conn, got = open_conn(ns, path)
            if conn is None:
                return {"opened": got}
            conns.append(conn)

        def worker(slot: int) -> None:
            if slot >= THREADS or results[slot] is not None:
                return
            tracer = Tracer(path, then=lambda: worker(slot + 1))
            tracer.attach(conns[slot])
            try:
                results[slot] = call_ingest(
                    ns,
                    conns[slot],
                    tenant=TENANT,
                    source=SOURCE,
                    items=s.page("for_threads"),
                    expected=None,
                    next_cursor=s.cursor("t1"),
                )
            finally:
                tracer.detach(conns[slot])
            worker(slot + 1)  # the next duplicate, if none was delivered meanwhile

        worker(0)
        return {
            "opened": opened,
            "results": results,
            "state": snapshot(path),
            "store": keep(path, "concurrent_duplicates_one_durable_effect"),
        }
    finally:
        for conn in conns:
            close(conn)
        remove_store(path)


# ─────────────────────────────────────────────────────────────── hidden: a kill mid-page

KILLED_EXIT = 17


@PROBES.seeded("killed_mid_page_then_replay_converges")
def killed_mid_page(ns: ModuleType, rng: random.Random) -> JSON:
    """Page 2 is written by a child process that dies (os._exit) right after the page's third
    item is stored, before anything could commit. Then a restart replays page 2."""
    s = Inputs(rng)
    name = "killed_mid_page_then_replay_converges"
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    seen: dict[str, JSON] = {"opened": opened}
    try:
        seen["page1"] = call_ingest(
            ns,
            conn,
            tenant=TENANT,
            source=SOURCE,
            items=s.page("p1"),
            expected=None,
            next_cursor=s.cursor("p1"),
        )
        close(conn)
        with ours(path) as db:
            db.execute(
                "CREATE TRIGGER die_mid_page AFTER INSERT ON items"
                f" WHEN NEW.item_id = '{s.launch_id(92)}' BEGIN SELECT die_now(); END"
            )
        pid = os.fork()
        if pid == 0:  # the child: it never returns from this branch
            code = 1
            try:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.alarm(3)
                child = need(ns, "open_store")(path)
                _create_function(child, "die_now", 0, lambda: os._exit(KILLED_EXIT))
                need(ns, "ingest_page")(
                    child,
                    tenant=TENANT,
                    source=SOURCE,
                    items=s.page("for_the_kill"),
                    expected_cursor=s.cursor("p1"),
                    next_cursor=s.cursor("p2"),
                )
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        seen["child_exit"] = os.waitstatus_to_exitcode(status)
        seen["after_kill"] = snapshot(path)
        seen["killed"] = keep(path, f"{name}.killed")
        with ours(path) as db:
            db.execute("DROP TRIGGER die_mid_page")
        again, reopened = open_conn(ns, path)
        seen["reopened"] = reopened
        if again is not None:
            try:
                seen["replay"] = call_ingest(
                    ns,
                    again,
                    tenant=TENANT,
                    source=SOURCE,
                    items=s.page("for_the_kill"),
                    expected=s.cursor("p1"),
                    next_cursor=s.cursor("p2"),
                )
            finally:
                close(again)
        seen["after_replay"] = snapshot(path)
        seen["store"] = keep(path, name)
        return seen
    finally:
        remove_store(path)


# ─────────────────────────────────────────────────────────────── hidden: the state machine

SM_TENANTS = (TENANT, OTHER_TENANT)
SM_IDS = ("a", "b", "c")
#: Each probe of the machine runs `SM_EXAMPLES` examples of `SM_STEPS` steps. The steps are
#: drawn from the submission's generator (`machine_plan`), so the parent draws the very same
#: and requires every one answered. Two probes, not one big one, so each stays far inside the
#: grader's per-probe time limit on a busy machine.
SM_PROBES = 2
SM_EXAMPLES, SM_STEPS = 8, 10
POISON_SPECS: tuple[JSON, ...] = (
    {"version": 1, "payload": {"n": 0}},
    {"id": "b", "version": True, "payload": {"n": 0}},
    {"id": "c", "version": 1, "payload": {"n": {"$float": "nan"}}},
)


def decode(value: Any) -> Any:
    """An item spec (plain JSON) as the item it stands for: {"$float": "nan"} is a NaN."""
    if isinstance(value, dict):
        if set(value) == {"$float"}:
            return float(value["$float"])
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def cursor_number(cursor: Any) -> int:
    match = re.fullmatch(r"p(\d+)", cursor) if isinstance(cursor, str) else None
    return int(match[1]) if match else 0


def draw_page(rng: random.Random) -> list[JSON]:
    specs: list[JSON] = []
    for _ in range(rng.randint(0, 4)):
        if rng.random() < 0.25:
            specs.append(rng.choice(POISON_SPECS))
        else:
            specs.append(
                {
                    "id": rng.choice(SM_IDS),
                    "version": rng.randint(0, 3),
                    "payload": {"n": rng.randint(0, 2)},
                }
            )
    return specs


def machine_plan(rng: random.Random) -> list[list[Step]]:
    """The steps of every example: pages after the checkpoint, pages whose write fails (a new
    item's, a poison record's or the checkpoint's), earlier pages delivered again exactly as
    sent, re-runs from scratch, restarts. Each worker starts from the cursor the checkpoint
    holds by then, as a worker reading it would (only that is tracked here: the outcome and the
    store are the judges' to work out)."""
    examples = []
    for _ in range(SM_EXAMPLES):
        cursors: dict[str, str | None] = dict.fromkeys(SM_TENANTS)
        sent: list[Step] = []
        fresh = itertools.count(1)
        steps: list[Step] = [{"op": "open"}]
        for _ in range(SM_STEPS):
            op = rng.choice(("run", "run", "fault", "redeliver", "scratch", "restart"))
            if op == "redeliver" and not sent:
                op = "run"
            tenant = rng.choice(SM_TENANTS)
            if op == "restart":
                steps.append({"op": "restart"})
                continue
            if op == "redeliver":
                step = {**rng.choice(sent), "op": "redeliver", "fault": None}
            elif op == "scratch":
                step = {"op": op, "tenant": tenant, "items": draw_page(rng), "expected": None}
                step["next"], step["fault"] = "p1", None
            else:
                expected = cursors[tenant]
                step = {"op": op, "tenant": tenant, "items": draw_page(rng), "expected": expected}
                step["next"], step["fault"] = f"p{cursor_number(expected) + 1}", None
                if op == "fault":
                    where = rng.choice(("items", "failures", "checkpoints"))
                    target = None
                    if where == "items":
                        target = f"new-{next(fresh)}"
                        step["items"].append({"id": target, "version": 0, "payload": {"n": 0}})
                    elif where == "failures":
                        step["items"].append({"version": 0, "payload": {"n": 9}})
                    step["fault"] = fault(where, item=target)
            if step["fault"] is None and step["expected"] == cursors[step["tenant"]]:
                cursors[step["tenant"]] = step["next"]
            sent.append(step)
            steps.append(step)
        examples.append(steps)
    return examples


def run_example(ns: ModuleType, s: Inputs, steps: Sequence[Step], name: str) -> JSON:
    """Play one example's steps on a fresh store: per step what came back, whether the
    connection was left in a transaction, what read_checkpoint says for each tenant, and the
    store. A step that leaves a transaction open ends the example (every later step would
    only wait on its lock); the judges fail it at that step."""
    path = fresh_path()
    answers: list[JSON] = []
    conn, opened = open_conn(ns, path)
    try:
        answers.append({"result": opened})
        if conn is None:
            return {"answers": answers}
        with ours(path) as db:
            for step in steps[1:]:
                answer: dict[str, JSON] = {}
                if step["op"] == "restart":
                    close(conn)
                    conn, answer["result"] = open_conn(ns, path)
                    if conn is None:
                        answers.append(answer)
                        break
                else:
                    if step["fault"] is not None:
                        answer["fault_installed"] = install_fault(db, step["fault"])
                    try:
                        answer["result"] = call_ingest(
                            ns,
                            conn,
                            tenant=step["tenant"],
                            source=SOURCE,
                            items=[decode(spec) for spec in step["items"]],
                            expected=s.cursor(step["expected"]),
                            next_cursor=s.cursor(step["next"]),
                        )
                    finally:
                        if step["fault"] is not None:
                            clear_faults(db)
                answer["in_transaction"] = in_transaction(conn)
                answer["read"] = [
                    attempt_call(ns, "read_checkpoint", conn, t, SOURCE) for t in SM_TENANTS
                ]
                answer["state"] = snapshot(db)
                answers.append(answer)
                if answer["in_transaction"] is not False:
                    break
        return {"answers": answers, "store": keep(path, name)}
    finally:
        if conn is not None:
            close(conn)
        remove_store(path)


def machine_probe(index: int) -> None:
    name = f"state_machine_{index + 1}"

    def probe(ns: ModuleType, rng: random.Random) -> JSON:
        s = Inputs(rng)
        return {
            "examples": [
                run_example(ns, s, steps, f"{name}.{n}")
                for n, steps in enumerate(machine_plan(rng))
            ]
        }

    PROBES.seeded(name)(probe)


for _index in range(SM_PROBES):
    machine_probe(_index)


def item_text(item: Any) -> str:
    """An item as the judges' messages show it (the same text in every process)."""
    if not isinstance(item, Mapping):
        return stable_repr(item)
    shown = {}
    for key, value in item.items():
        if key == "payload" and isinstance(value, Mapping) and "name" in value:
            value = {"name": value["name"], "...": "..."}
        shown[key] = value
    return stable_repr(shown)
