"""Build 07's model of the spec, and the parent's reading of the stores the probes kept.

`Store` is the spec written as dictionaries (no SQL): the judges run every scenario step, and
every step of the state machine, through it, and compare what the learner's code did with what
it gives. `kept_state` and `commits` read a database the worker kept (`grader.suites.observe.keep`)
here, in the parent, after the worker ended: what it holds is the truth a probe's report only
claims. Running the same steps twice gives the same model.

The spec, as the model states it (the notebook says the same in words):
- an item is poison when it is not a mapping or has no non-empty str ``id`` (reason
  MISSING_ID), has no int ``version`` in SQLite's 64-bit range, bool excluded (BAD_VERSION),
  or has no ``payload`` with a canonical JSON form (NOT_CANONICAL), checked in that order;
- a valid item is *applied* when its identity is new or its version is higher than the stored
  one, which it then replaces; otherwise it is *unchanged* (equal or lower version);
- a poison item is *rejected*: upserted into ``failures`` under its id, or under
  ``f"{expected_cursor}#{index}"`` when it has no usable id, with the reason and ``seen_at =
  expected_cursor``; the first record of an identity stands;
- the checkpoint moves by compare-and-set from ``expected_cursor`` (None: no row yet), and its
  ``item_count`` is the number of items the tenant's source holds after the page;
- one transaction: a compare-and-set miss writes nothing and reports the persisted cursor; a
  database error writes nothing and propagates as itself.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from builds.build07.hidden import probes as P
from grader.suites.digest import canonical_json
from grader.suites.judging import JSON, Observed

MISSING_ID = "missing id"
BAD_VERSION = "version is not an integer"
NOT_CANONICAL = "payload has no canonical JSON form"
INT64 = (-(2**63), 2**63 - 1)
#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def reason_for(item: Any) -> str | None:
    if not isinstance(item, Mapping):
        return MISSING_ID
    item_id = item.get("id")
    if not isinstance(item_id, str) or not item_id:
        return MISSING_ID
    version = item.get("version")
    if type(version) is not int or not INT64[0] <= version <= INT64[1]:
        return BAD_VERSION
    if "payload" not in item:
        return NOT_CANONICAL
    try:
        canonical_json(item["payload"])
    except (TypeError, ValueError, RecursionError):
        return NOT_CANONICAL
    return None


def outcome(applied: int, unchanged: int, rejected: int, advanced: bool, cursor: Any) -> JSON:
    return {
        "applied": applied,
        "unchanged": unchanged,
        "rejected": rejected,
        "advanced": advanced,
        "cursor": cursor,
    }


class Faulted(Exception):
    """The model's page hit an injected fault: nothing is written, IntegrityError is raised."""


@dataclass
class Store:
    """The spec's store: rows by identity."""

    items: dict[tuple[str, str, str], tuple[int, str]] = field(default_factory=dict)
    checkpoints: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)
    failures: dict[tuple[str, str, str], tuple[str, str | None]] = field(default_factory=dict)
    faults: list[JSON] = field(default_factory=list)

    def copy(self) -> Store:
        return Store(dict(self.items), dict(self.checkpoints), dict(self.failures), self.faults)

    def cursor(self, tenant: str, source: str) -> str | None:
        row = self.checkpoints.get((tenant, source))
        return row[0] if row else None

    def fires(self, table: str, item_id: str | None = None) -> bool:
        return any(
            f["table"] == table and (f.get("item") is None or f.get("item") == item_id)
            for f in self.faults
        )

    def ingest(
        self,
        tenant: str,
        source: str,
        items: Sequence[Any],
        expected: str | None,
        next_cursor: str | None,
    ) -> JSON:
        """The outcome fields, or ``{"raised": "IntegrityError"}`` when a fault fires."""
        current = self.cursor(tenant, source)
        if current != expected:
            return outcome(0, 0, 0, False, current)
        page = self.copy()
        applied = unchanged = rejected = 0
        try:
            for index, item in enumerate(items):
                why = reason_for(item)
                if why is None:
                    key = (tenant, source, item["id"])
                    stored = page.items.get(key)
                    if stored is None or item["version"] > stored[0]:
                        if page.fires("items", item["id"]):
                            raise Faulted
                        page.items[key] = (item["version"], canonical_json(item["payload"]))
                        applied += 1
                    else:
                        unchanged += 1
                else:
                    ref = item["id"] if why != MISSING_ID else f"{expected}#{index}"
                    if page.fires("failures"):
                        raise Faulted
                    page.failures.setdefault((tenant, source, ref), (why, expected))
                    rejected += 1
            if page.fires("checkpoints"):
                raise Faulted
        except Faulted:
            return {"raised": "IntegrityError"}
        assert next_cursor is not None
        count = sum(1 for t, s, _ in page.items if (t, s) == (tenant, source))
        page.checkpoints[(tenant, source)] = (next_cursor, count)
        self.items, self.checkpoints, self.failures = page.items, page.checkpoints, page.failures
        return outcome(applied, unchanged, rejected, True, next_cursor)

    def deliver(self, s: P.Inputs, step: P.Step) -> JSON:
        """`ingest` of a scenario step's page, its cursors as the probes sent them."""
        return self.ingest(
            step["tenant"],
            step["source"],
            s.page(step["page"]),
            s.cursor(step["expected"]),
            s.cursor(step["next"]),
        )

    def rows(self) -> JSON:
        return {
            "items": [[*k, v, p] for k, (v, p) in self.items.items()],
            "checkpoints": [[*k, c, n] for k, (c, n) in self.checkpoints.items()],
            "failures": [[*k, r, s] for k, (r, s) in self.failures.items()],
        }


def play(s: P.Inputs, steps: Sequence[P.Step]) -> tuple[list[tuple[JSON, JSON]], Store]:
    """(expected result, expected store) after each scenario step, and the store at the end."""
    store = Store()
    expected = []
    for step in steps:
        op = step["op"]
        result: JSON = {"ok": None}
        if op == "ingest":
            got = store.deliver(s, step)
            result = got if "raised" in got else {"ok": got}
        elif op == "fault":
            store.faults = [*store.faults, {"table": step["table"], "item": step["item"]}]
        elif op == "clear":
            store.faults = []
        expected.append((result, store.rows()))
    return expected, store


# ─────────────────────────────────────────────────────────────── the kept stores


def kept_state(observed: Observed, ref: JSON) -> JSON:
    """The tables of a kept database as the probes' snapshots report them (``{"ok": state}``),
    read here; ``{"raised": ..., "message": ...}`` when there is no such file or it cannot be
    read as a store."""
    try:
        with observed.database(ref) as db:
            if db is None:
                return {"raised": "NoFile", "message": "the probe kept no database"}
            return {"ok": P.read_tables(db)}
    except sqlite3.Error as exc:
        return {"raised": type(exc).__name__, "message": str(exc)[:200]}


def kept_schema(observed: Observed, ref: JSON) -> JSON:
    """The schema of a kept database (`probes.schema_of`), read here, or None."""
    try:
        with observed.database(ref) as db:
            return None if db is None else P.schema_of(db)
    except sqlite3.Error:
        return None


def commits(observed: Observed, ref: JSON) -> int | None:
    """How many write transactions a kept database has committed since it was made: the file
    change counter of its header (rollback journal), plus the commit frames of its WAL when
    it is in WAL mode. None when it is not an SQLite database."""
    main = observed.artefact(ref)
    if main is None or len(main) < 100 or not main.startswith(SQLITE_HEADER):
        return None
    count = int.from_bytes(main[24:28], "big")
    wal = observed.artefact(ref, "-wal")
    if main[18] == 2 and wal is not None and len(wal) >= 32:
        page_size, salts = int.from_bytes(wal[8:12], "big"), wal[16:24]
        offset = 32
        while page_size and offset + 24 + page_size <= len(wal):
            frame = wal[offset : offset + 24]
            if frame[8:16] != salts:  # a frame of an earlier generation of the log
                break
            count += int.from_bytes(frame[4:8], "big") != 0  # a commit frame
            offset += 24 + page_size
    return count
