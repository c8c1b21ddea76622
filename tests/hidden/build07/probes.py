"""Build 07's probes: run in the grading child, next to the learner's exported answers.

Most probes replay a *scenario*: a list of plain steps (deliver a page on connection k, inject
a fault with a trigger, clear the faults, reopen a connection), and after every step record
what came back and the whole store, read through a connection of the probe's own. The judges
(``judges.py``, in the parent) run the same steps through a model of the spec and compare, so
no expected outcome or state ever enters this process. The rest observe what a scenario cannot:
the statements a page sends, threads delivering at once, a process killed mid-page, and
hypothesis driving a state machine of pages, replays, faults, restarts and stale workers.

Inputs are defined here and shared with the judges, which load this file too. Each probe uses
fresh database files in the worker's scratch folder. Probing the same answers twice gives the
same observations.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
import signal
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from etl import Launch, launches
from grader.observe import JSON, Probes, attempt, need, plain, raised

PROBES = Probes()
#: Parsed once, when the fork server imports this file: every worker inherits them.
LAUNCHES: tuple[Launch, ...] = tuple(launches())

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

# ─────────────────────────────────────────────────────────────── items (shared with judges)


def launch_item(index: int, version: int = 1, **changes: Any) -> dict[str, Any]:
    """Fixture launch `index` as a source delivers it, fields changed as given."""
    launch = dataclasses.replace(LAUNCHES[index], **changes)
    return {"id": launch.id, "version": version, "payload": dataclasses.asdict(launch)}


def launch_id(index: int) -> str:
    return LAUNCHES[index].id


def without(item: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != key}


#: Pages by name: each call builds fresh items (an answer may mutate what it is given).
PAGES: dict[str, Callable[[], list[Any]]] = {
    "empty": lambda: [],
    "p1": lambda: [launch_item(i) for i in range(0, 4)],
    "p2": lambda: [launch_item(i) for i in range(4, 8)],
    "p3": lambda: [launch_item(i) for i in range(8, 12)],
    "p1_v2": lambda: [launch_item(i, 2, status="Success") for i in range(0, 4)],
    "p1_v2_b": lambda: [launch_item(i, 2, status="Partial Failure") for i in range(0, 4)],
    "p2_v2": lambda: [launch_item(i, 2, status="Success") for i in range(4, 8)],
    # The source's offsets shifted: items 2-5 again, 4-5 now at a higher version.
    "shifted": lambda: [
        launch_item(2),
        launch_item(3),
        launch_item(4, 3, status="Success"),
        launch_item(5, 3, status="Success"),
    ],
    "with_poison": lambda: [
        launch_item(20),
        launch_item(21, latitude=math.nan),  # no canonical JSON form
        launch_item(22),
        launch_item(23),
    ],
    "poison_bad_version": lambda: [
        launch_item(24),
        {**launch_item(21), "version": "7"},
        launch_item(25),
    ],
    "mixed": lambda: [
        launch_item(0, 2, status="Success"),  # newer than stored v1: applied
        launch_item(1),  # same as stored: unchanged
        launch_item(2, 0),  # older than stored v1: unchanged
        launch_item(3, 1, status="Changed at the same version"),  # equal version: unchanged
        launch_item(30),  # new: applied
        without(launch_item(31), "id"),  # poison
        {**launch_item(32), "version": True},  # poison: a bool is not an int version
        launch_item(33, latitude=math.inf),  # poison
        launch_item(30),  # repeated within the page: unchanged
        launch_item(34),  # new: applied
    ],
    "in_page_order": lambda: [
        launch_item(40, 1),
        launch_item(40, 3, status="Success"),
        launch_item(40, 2, status="Failure"),
        launch_item(41, 5),
        launch_item(41, 5, status="Another payload"),
        launch_item(42, 2),
        launch_item(42, 2),
    ],
    "canonical": lambda: [
        {"id": "order-of-keys", "version": 1, "payload": {"zeta": 1, "alpha": [3, 2, 1]}},
        {"id": "non-ascii", "version": 1, "payload": {"pad": "Baïkonour 31/6", "name": "Союз"}},
        {"id": "nested", "version": 1, "payload": {"b": {"y": None, "x": True}, "a": 0.5}},
        {"id": "negative-zero", "version": 1, "payload": {"lat": -0.0}},
        {"id": "a-list", "version": 1, "payload": [1, "two", None]},
        {"id": "a-string", "version": 1, "payload": "just text"},
        {"id": "explicit-null", "version": 1, "payload": None},
    ],
    "edge_versions": lambda: [
        {"id": "zero", "version": 0, "payload": {}},
        {"id": "negative", "version": -5, "payload": {}},
        {"id": "largest", "version": 2**63 - 1, "payload": {}},
        {"id": "smallest", "version": -(2**63), "payload": {}},
    ],
    "every_poison": lambda: [
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
    "secrets": lambda: [
        {"id": "leaky-version", "version": f"7;session={SECRET}", "payload": {}},
        {"id": "leaky-payload", "version": 1, "payload": {"token": SECRET, "lat": math.nan}},
        {"version": 1, "payload": {"token": SECRET}},
    ],
    "id_less": lambda: [launch_item(50), without(launch_item(51), "id"), launch_item(52)],
    "id_less_b": lambda: [without(launch_item(53), "id"), launch_item(54)],
    "poison_again": lambda: [
        launch_item(55),
        {**launch_item(21), "payload": {"lat": math.nan}},  # launch 21 again, still poison
    ],
    "stale_mixed": lambda: [
        launch_item(0, 1, status="Go"),
        launch_item(60),
        without(launch_item(61), "id"),
    ],
    "tenant_a": lambda: (
        [launch_item(i, 1, status="acme's copy") for i in range(70, 73)]
        + [{"id": launch_id(73), "version": 1, "payload": {"lat": math.nan}}]
    ),
    "tenant_b": lambda: (
        [launch_item(i, 4, status="globex's copy") for i in range(70, 73)]
        + [{"id": launch_id(73), "version": "x", "payload": {}}]
    ),
    "for_threads": lambda: (
        [launch_item(i) for i in range(80, 85)] + [without(launch_item(85), "id")]
    ),
    "for_the_kill": lambda: [launch_item(i) for i in range(90, 94)],
}
#: The item a fault or a kill waits for, in the pages that inject one.
P2_THIRD = launch_id(6)
FOR_THE_KILL_THIRD = launch_id(92)

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
    """ingest_page on connection `who` with the items of PAGES[page]."""
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


SCENARIOS: dict[str, list[Step]] = {
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
        fault("items", item=P2_THIRD, say="a trigger makes writing page 2's third item fail"),
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
        fault("items", item=launch_id(0), say="a trigger makes writing page 1's first item fail"),
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
        fault("items", item=launch_id(9), action="ROLLBACK", say="the same, on an item write"),
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
        deliver("edge_versions", "c1", "c2", say="the smallest and largest versions SQLite holds"),
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
        deliver("poison_again", "p2", "p3", say="page 3: launch 21, NaN again (recorded already)"),
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
        deliver("shifted", "p1", "p2", say="page 2: offsets shifted, two items again, two newer"),
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
    """The probe's own connection (never the learner's object, never waiting long): a new one
    to the file `where`, or `where` itself when it already is one of ours."""
    if isinstance(where, sqlite3.Connection):
        yield where
        return
    conn = sqlite3.connect(where, isolation_level=None, timeout=0.05)
    try:
        yield conn
    finally:
        conn.close()


def snapshot(path: Where) -> JSON:
    """Every pinned column of every table, read through the probe's own connection."""
    try:
        with ours(path) as db:
            state = {}
            for table, columns in COLUMNS.items():
                rows = db.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
                state[table] = [plain(list(row)) for row in rows]
            return {"ok": state}
    except sqlite3.Error as exc:
        return raised(exc)


FIELDS = ("applied", "unchanged", "rejected", "advanced", "cursor")


def fields_of(value: Any) -> JSON:
    """The outcome's five fields as plain JSON (a missing one as ``{"missing_field": name}``)."""
    seen: dict[str, JSON] = {"type": type(value).__name__}
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
    next_cursor: str,
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
    try:
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
    except sqlite3.Error as exc:
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
            except sqlite3.Error:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        return {"ok": None}
    except sqlite3.Error as exc:
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


def run_scenario(ns: ModuleType, steps: Sequence[Step]) -> JSON:
    """Play `steps` on a fresh store; after each: the result, the store, and whether the
    connection used was left inside a transaction."""
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
                        items=PAGES[step["page"]](),
                        expected=step["expected"],
                        next_cursor=step["next"],
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
        return {"steps": observed}
    finally:
        for conn in conns.values():
            close(conn)
        remove_store(path)


def scenario_probe(name: str, *scenarios: str) -> None:
    """Register probe `name` playing the named scenarios."""

    def probe(ns: ModuleType) -> JSON:
        return {s: run_scenario(ns, SCENARIOS[s]) for s in scenarios}

    PROBES.add(name)(probe)


# ─────────────────────────────────────────────────────────────── step 1: the store


def schema_of(path: str) -> JSON:
    """Each table's columns, and its unique indexes (primary key included) as column lists."""
    with ours(path) as db:
        tables = {}
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            columns = [row[1] for row in db.execute(f"PRAGMA table_info('{table}')")]
            unique = []
            for index in db.execute(f"PRAGMA index_list('{table}')").fetchall():
                if index[2]:  # unique
                    info = db.execute(f"PRAGMA index_info('{index[1]}')").fetchall()
                    unique.append([row[2] for row in sorted(info)])
            pk = [row for row in db.execute(f"PRAGMA table_info('{table}')") if row[5]]
            if pk:
                key = [row[1] for row in sorted(pk, key=lambda r: r[5])]
                if key not in unique:
                    unique.append(key)
            tables[table] = {"columns": columns, "unique": unique}
        return tables


@PROBES.add("store_has_the_pinned_schema")
def pinned_schema(ns: ModuleType) -> JSON:
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    try:
        return {
            "opened": opened,
            "type": type(conn).__name__,
            "is_connection": isinstance(conn, sqlite3.Connection),
            "isolation_level": attempt(lambda: conn.isolation_level),
            "schema": attempt(lambda: schema_of(path)),
        }
    finally:
        close(conn)
        remove_store(path)


def direct_insert(path: str, table: str, values: dict[str, Any]) -> JSON:
    """Insert a row through the probe's own connection: None, or the error's class name."""
    columns = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    try:
        with ours(path) as db:
            db.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(values.values()))
        return {"ok": None}
    except sqlite3.Error as exc:
        return raised(exc)


#: (table, row) inserted in order into a fresh store; the judges know which must be refused.
IDENTITY_INSERTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("items", {"tenant": TENANT, "source": SOURCE, "item_id": "x", "version": 1, "payload": "1"}),
    ("items", {"tenant": TENANT, "source": SOURCE, "item_id": "x", "version": 2, "payload": "2"}),
    (
        "items",
        {"tenant": OTHER_TENANT, "source": SOURCE, "item_id": "x", "version": 1, "payload": "1"},
    ),
    (
        "items",
        {"tenant": TENANT, "source": OTHER_SOURCE, "item_id": "x", "version": 1, "payload": "1"},
    ),
    ("items", {"tenant": TENANT, "source": SOURCE, "item_id": "y", "version": 1, "payload": "1"}),
    ("checkpoints", {"tenant": TENANT, "source": SOURCE, "cursor": "p1", "item_count": 0}),
    ("checkpoints", {"tenant": TENANT, "source": SOURCE, "cursor": "p2", "item_count": 0}),
    ("checkpoints", {"tenant": OTHER_TENANT, "source": SOURCE, "cursor": "p1", "item_count": 0}),
    ("failures", {"tenant": TENANT, "source": SOURCE, "item_id": "z", "reason": "r"}),
    ("failures", {"tenant": TENANT, "source": SOURCE, "item_id": "z", "reason": "r"}),
    ("failures", {"tenant": OTHER_TENANT, "source": SOURCE, "item_id": "z", "reason": "r"}),
)


@PROBES.add("identity_is_enforced_per_tenant")
def identity_enforced(ns: ModuleType) -> JSON:
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    try:
        close(conn)
        return {
            "opened": opened,
            "inserts": [direct_insert(path, table, row) for table, row in IDENTITY_INSERTS],
        }
    finally:
        remove_store(path)


@PROBES.add("reopening_keeps_the_data")
def reopening(ns: ModuleType) -> JSON:
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
            items=PAGES["p1"](),
            expected=None,
            next_cursor="p1",
        )
        close(first)
        second, reopened = open_conn(ns, path)
        if second is None:
            return {"opened": opened, "page": page, "reopened": reopened}
        try:
            return {
                "opened": opened,
                "page": page,
                "reopened": reopened,
                "state": snapshot(path),
                "read": attempt(lambda: need(ns, "read_checkpoint")(second, TENANT, SOURCE)),
                "next": call_ingest(
                    ns,
                    second,
                    tenant=TENANT,
                    source=SOURCE,
                    items=PAGES["p2"](),
                    expected="p1",
                    next_cursor="p2",
                ),
                "state_after": snapshot(path),
            }
        finally:
            close(second)
    finally:
        remove_store(path)


# ─────────────────────────────────────────────────────────────── step 2: checkpoints

#: Calls in order on one store: ("read", tenant, source) or ("advance", tenant, source,
#: expected, next). Autocommit: no transaction around them.
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
)


@PROBES.add("checkpoint_moves_only_by_compare_and_set")
def checkpoint_cas(ns: ModuleType) -> JSON:
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    try:
        calls = []
        for call in CHECKPOINT_CALLS:
            if call[0] == "read":
                calls.append(attempt(lambda c=call: need(ns, "read_checkpoint")(conn, c[1], c[2])))
            else:
                calls.append(attempt(lambda c=call: need(ns, "advance_checkpoint")(conn, *c[1:])))
        return {"opened": opened, "calls": calls, "state": snapshot(path)}
    finally:
        close(conn)
        remove_store(path)


# ─────────────────────────────────────────────────────────────── step 3: poison


@PROBES.add("poison_items_are_classified")
def classified(ns: ModuleType) -> JSON:
    items = PAGES["every_poison"]() + PAGES["canonical"]() + PAGES["edge_versions"]()
    return {"reasons": [attempt(lambda i=i: need(ns, "poison_reason")(i)) for i in items]}


# ─────────────────────────────────────────────────────────────── step 4: upsert_item

#: (tenant, item) written in order by upsert_item on one store, autocommit.
UPSERT_CALLS: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "replace": (
        (TENANT, launch_item(0)),
        (TENANT, launch_item(0)),
        (TENANT, launch_item(1)),
        (TENANT, launch_item(0, 2, status="Success")),
        (TENANT, launch_item(0, 2, status="Success")),
        (OTHER_TENANT, launch_item(0)),
    ),
    "versions": (
        (TENANT, launch_item(5, 2, status="Success")),
        (TENANT, launch_item(5, 1, status="Go")),
        (TENANT, launch_item(5, 2, status="Failure")),
        (TENANT, launch_item(5, 3, status="Partial Failure")),
        (TENANT, launch_item(5, 0)),
        (TENANT, {"id": "canonical", "version": 1, "payload": {"b": "Союз", "a": [1.5, None]}}),
    ),
}


def upsert_run(ns: ModuleType, calls: Sequence[tuple[str, dict[str, Any]]]) -> JSON:
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    try:
        results = []
        for tenant, item in calls:
            result = attempt(
                lambda t=tenant, i=item: need(ns, "upsert_item")(conn, t, SOURCE, dict(i))
            )
            results.append({"result": result, "state": snapshot(path)})
        return {"opened": opened, "calls": results}
    finally:
        close(conn)
        remove_store(path)


@PROBES.add("replace_never_accumulate")
def replace_never(ns: ModuleType) -> JSON:
    return upsert_run(ns, UPSERT_CALLS["replace"])


@PROBES.add("newer_version_wins")
def newer_wins(ns: ModuleType) -> JSON:
    return upsert_run(ns, UPSERT_CALLS["versions"])


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


@PROBES.add("poison_item_recorded_later_items_terminal")
def poison_budget(ns: ModuleType) -> JSON:
    """A worker that retries a page up to BUDGET times when ingest_page raises."""
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    try:
        pages = []
        for step in SCENARIOS["budget"]:
            attempts = []
            for _ in range(BUDGET):
                result = call_ingest(
                    ns,
                    conn,
                    tenant=TENANT,
                    source=SOURCE,
                    items=PAGES[step["page"]](),
                    expected=step["expected"],
                    next_cursor=step["next"],
                )
                attempts.append(result)
                if "ok" in result:
                    break
            pages.append({"attempts": attempts, "state": snapshot(path)})
        return {"opened": opened, "pages": pages}
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


def traced(ns: ModuleType, conn: Any, items: list[Any], expected: str | None, nxt: str) -> JSON:
    statements: list[str] = []
    try:
        conn.set_trace_callback(lambda sql: statements.append(statement_kind(sql)))
    except BaseException as exc:
        return raised(exc)
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
        try:
            conn.set_trace_callback(None)
        except BaseException as exc:
            raised(exc)
    return {"result": result, "statements": statements[:200]}


@PROBES.add("explicit_transaction_per_page")
def explicit_transaction(ns: ModuleType) -> JSON:
    path = fresh_path()
    conn, opened = open_conn(ns, path)
    if conn is None:
        return {"opened": opened}
    try:
        seen: dict[str, JSON] = {
            "opened": opened,
            "isolation_level": attempt(lambda: conn.isolation_level),
        }
        seen["first"] = traced(ns, conn, PAGES["with_poison"](), None, "p1")
        seen["stale"] = traced(ns, conn, PAGES["p2"](), None, "p1")
        seen["next"] = traced(ns, conn, PAGES["p2"](), "p1", "p2")
        install_fault(path, fault("checkpoints"))
        seen["failing"] = traced(ns, conn, PAGES["p3"](), "p2", "p3")
        clear_faults(path)
        seen["state"] = snapshot(path)
        return seen
    finally:
        close(conn)
        remove_store(path)


# ─────────────────────────────────────────────────────────────── hidden: concurrency

THREADS = 4


@PROBES.add("concurrent_duplicates_one_durable_effect")
def concurrent(ns: ModuleType) -> JSON:
    """THREADS workers, each on its own connection, deliver the same first page at once."""
    path = fresh_path()
    first, opened = open_conn(ns, path)
    if first is None:
        return {"opened": opened}
    close(first)
    barrier = threading.Barrier(THREADS, timeout=2.0)
    results: list[JSON] = [None] * THREADS

    def worker(slot: int) -> None:
        conn, got = open_conn(ns, path)
        if conn is None:
            results[slot] = got
            barrier.abort()
            return
        try:
            barrier.wait()
            results[slot] = call_ingest(
                ns,
                conn,
                tenant=TENANT,
                source=SOURCE,
                items=PAGES["for_threads"](),
                expected=None,
                next_cursor="t1",
            )
        except threading.BrokenBarrierError:
            results[slot] = {"raised": "BrokenBarrierError", "message": "a worker never came"}
        except BaseException as exc:
            results[slot] = {"raised": type(exc).__name__, "message": "in the worker thread"}
        finally:
            close(conn)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5.0)
    try:
        return {
            "opened": opened,
            "results": results,
            "finished": [not t.is_alive() for t in threads],
            "state": snapshot(path),
        }
    finally:
        remove_store(path)


# ─────────────────────────────────────────────────────────────── hidden: a kill mid-page

KILLED_EXIT = 17


@PROBES.add("killed_mid_page_then_replay_converges")
def killed_mid_page(ns: ModuleType) -> JSON:
    """Page 2 is written by a child process that dies (os._exit) right after the page's third
    item is stored, before anything could commit. Then a restart replays page 2."""
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
            items=PAGES["p1"](),
            expected=None,
            next_cursor="p1",
        )
        close(conn)
        with ours(path) as db:
            db.execute(
                "CREATE TRIGGER die_mid_page AFTER INSERT ON items"
                f" WHEN NEW.item_id = '{FOR_THE_KILL_THIRD}' BEGIN SELECT die_now(); END"
            )
        pid = os.fork()
        if pid == 0:  # the child: it never returns from this branch
            code = 1
            try:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.alarm(3)
                child = need(ns, "open_store")(path)
                child.create_function("die_now", 0, lambda: os._exit(KILLED_EXIT))
                need(ns, "ingest_page")(
                    child,
                    tenant=TENANT,
                    source=SOURCE,
                    items=PAGES["for_the_kill"](),
                    expected_cursor="p1",
                    next_cursor="p2",
                )
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        seen["child_exit"] = os.waitstatus_to_exitcode(status)
        seen["after_kill"] = snapshot(path)
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
                    items=PAGES["for_the_kill"](),
                    expected="p1",
                    next_cursor="p2",
                )
            finally:
                close(again)
        seen["after_replay"] = snapshot(path)
        return seen
    finally:
        remove_store(path)


# ─────────────────────────────────────────────────────────────── hidden: the state machine

SM_TENANTS = (TENANT, OTHER_TENANT)
SM_IDS = ("a", "b", "c")
#: Runs of the machine: (seed, examples, steps per example). Fixed, so every grading of the
#: same answers drives the same sequences. Each run alone catches every mutant that names the
#: state machine as a target, within its first six examples; two make that independent of one
#: seed. Small probes, not one big one, so each stays far inside the grader's per-probe time
#: limit on a busy machine, and a class of a hundred is graded in seconds.
SM_RUNS: tuple[tuple[int, int, int], ...] = ((7, 8, 10), (2026, 8, 10))
SM_SETTINGS: dict[str, Any] = {
    "derandomize": True,
    "database": None,
    "deadline": None,
    "phases": [Phase.generate],
    "suppress_health_check": list(HealthCheck),
    "print_blob": False,
    "report_multiple_bugs": False,
}

good_items = st.builds(
    lambda i, v, n: {"id": i, "version": v, "payload": {"n": n}},
    st.sampled_from(SM_IDS),
    st.integers(0, 3),
    st.integers(0, 2),
)
poison_items = st.sampled_from(
    [
        {"version": 1, "payload": {"n": 0}},
        {"id": "b", "version": True, "payload": {"n": 0}},
        {"id": "c", "version": 1, "payload": {"n": {"$float": "nan"}}},
    ]
)
page_specs = st.lists(st.one_of(good_items, good_items, good_items, poison_items), max_size=4)


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


class IngestMachine(RuleBasedStateMachine):
    """Pages, redeliveries, faults, restarts and stale re-runs against one store. Every step
    is recorded with what came back and the store after it; nothing is asserted here."""

    ns: ModuleType
    traces: list[list[JSON]]
    #: Set once a call leaves its transaction open: every later step would only wait on the
    #: lock that transaction holds, and the judge fails the trace at that step anyway.
    stuck: list[bool]

    def __init__(self) -> None:
        super().__init__()
        self.path = fresh_path()
        self.trace: list[JSON] = []
        self.traces.append(self.trace)
        self.sent: list[tuple[str, list[JSON], str | None, str]] = []
        self.fresh = itertools.count(1)
        self.conn, opened = open_conn(self.ns, self.path)
        self.trace.append({"op": "open", "result": opened})
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=0.05)

    def stored(self, tenant: str) -> str | None:
        try:
            with ours(self.db) as db:
                row = db.execute(
                    "SELECT cursor FROM checkpoints WHERE tenant = ? AND source = ?",
                    (tenant, SOURCE),
                ).fetchone()
        except sqlite3.Error:
            return None
        return row[0] if row and isinstance(row[0], str) else None

    def record(self, step: dict[str, JSON]) -> None:
        if self.conn is not None:
            step["in_transaction"] = in_transaction(self.conn)
            if step["in_transaction"] is not False:
                self.stuck.append(True)
            reads = []
            for tenant in SM_TENANTS:
                reads.append(
                    attempt(lambda t=tenant: need(self.ns, "read_checkpoint")(self.conn, t, SOURCE))
                )
            step["read"] = reads
        step["state"] = snapshot(self.db)
        self.trace.append(step)

    def deliver(
        self,
        tenant: str,
        specs: list[JSON],
        expected: str | None,
        next_cursor: str,
        fault_step: Step | None = None,
        kind: str = "run",
    ) -> None:
        step: dict[str, JSON] = {
            "op": kind,
            "tenant": tenant,
            "items": specs,
            "expected": expected,
            "next": next_cursor,
            "fault": fault_step,
        }
        if self.conn is None:
            step["result"] = {"raised": "NoConnection", "message": "open_store failed"}
        else:
            if fault_step is not None:
                step["fault_installed"] = install_fault(self.db, fault_step)
            try:
                step["result"] = call_ingest(
                    self.ns,
                    self.conn,
                    tenant=tenant,
                    source=SOURCE,
                    items=[decode(s) for s in specs],
                    expected=expected,
                    next_cursor=next_cursor,
                )
            finally:
                if fault_step is not None:
                    clear_faults(self.db)
        self.sent.append((tenant, specs, expected, next_cursor))
        self.record(step)

    @rule(tenant=st.sampled_from(SM_TENANTS), specs=page_specs)
    def run_page(self, tenant: str, specs: list[JSON]) -> None:
        if self.stuck:
            return
        expected = self.stored(tenant)
        self.deliver(tenant, specs, expected, f"p{cursor_number(expected) + 1}")

    @rule(
        tenant=st.sampled_from(SM_TENANTS),
        specs=page_specs,
        where=st.sampled_from(["items", "failures", "checkpoints"]),
    )
    def fault_in_page(self, tenant: str, specs: list[JSON], where: str) -> None:
        """A page whose write fails: the new item's, the poison record's, or the checkpoint's."""
        if self.stuck:
            return
        expected = self.stored(tenant)
        specs = list(specs)
        target = None
        if where == "items":
            target = f"new-{next(self.fresh)}"
            specs.append({"id": target, "version": 0, "payload": {"n": 0}})
        elif where == "failures":
            specs.append({"version": 0, "payload": {"n": 9}})
        self.deliver(
            tenant,
            specs,
            expected,
            f"p{cursor_number(expected) + 1}",
            fault_step=fault(where, item=target),
            kind="fault",
        )

    @precondition(lambda self: bool(self.sent))
    @rule(data=st.data())
    def redeliver(self, data: st.DataObject) -> None:
        """An earlier page again, exactly as sent: a duplicate, or a worker that stalled."""
        if self.stuck:
            return
        index = data.draw(st.integers(0, len(self.sent) - 1))
        tenant, specs, expected, next_cursor = self.sent[index]
        self.deliver(tenant, specs, expected, next_cursor, kind="redeliver")

    @rule(tenant=st.sampled_from(SM_TENANTS), specs=page_specs)
    def rerun_from_scratch(self, tenant: str, specs: list[JSON]) -> None:
        if self.stuck:
            return
        self.deliver(tenant, specs, None, "p1", kind="scratch")

    @rule()
    def restart(self) -> None:
        if self.stuck:
            return
        if self.conn is not None:
            close(self.conn)
        self.conn, opened = open_conn(self.ns, self.path)
        self.record({"op": "restart", "result": opened})

    def teardown(self) -> None:
        if self.conn is not None:
            close(self.conn)
        self.db.close()
        remove_store(self.path)


def run_machine(ns: ModuleType, seed_value: int, examples: int, steps: int) -> list[list[JSON]]:
    traces: list[list[JSON]] = []
    machine = type("IngestMachine", (IngestMachine,), {"ns": ns, "traces": traces, "stuck": []})

    def factory() -> IngestMachine:
        # A function, not the class: hypothesis digests the factory's source, and finding
        # a class's source means parsing this whole file.
        return machine()

    run_state_machine_as_test(
        seed(seed_value)(factory),
        settings=settings(max_examples=examples, stateful_step_count=steps, **SM_SETTINGS),
    )
    return traces


def machine_probe(index: int) -> None:
    seed_value, examples, steps = SM_RUNS[index]

    def probe(ns: ModuleType) -> JSON:
        try:
            return {"traces": run_machine(ns, seed_value, examples, steps)}
        except BaseException as exc:  # hypothesis itself stopped: report it, keep what ran
            return {"stopped": raised(exc)}

    PROBES.add(f"state_machine_{index + 1}")(probe)


for _index in range(len(SM_RUNS)):
    machine_probe(_index)


def item_text(item: Any) -> str:
    """An item as the judges' messages show it."""
    if not isinstance(item, Mapping):
        return repr(item)
    shown = {}
    for key, value in item.items():
        if key == "payload" and isinstance(value, Mapping) and "name" in value:
            value = {"name": value["name"], "...": "..."}
        shown[key] = value
    return repr(shown)
