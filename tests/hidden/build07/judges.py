"""Build 07's judges: run in the grading process, on the probes' plain JSON observations.

One judge per graded test of notebook 07 in ``workbook.toml``. Expected outcomes and states
come from `Store`, a model of the spec written here (dictionaries, no SQL): every scenario the
probes played, and every trace the state machine recorded, is replayed through it step by
step, and the first step whose outcome or store differs is the feedback, with the steps that
led there. Nothing expected ever enters the child. Judging the same observations twice gives
the same verdicts.

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

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.digest import canonical_json
from grader.judging import JSON, Fail, Judges, Observed, check, equal, not_done, ok
from grader.suites import load_probes
from workbook.feedback import message, show_json, show_outcome

P = load_probes(Path(__file__).with_name("probes.py"))
JUDGES = Judges()

MISSING_ID = "missing id"
BAD_VERSION = "version is not an integer"
NOT_CANONICAL = "payload has no canonical JSON form"
INT64 = (-(2**63), 2**63 - 1)
SHOWN_STEPS = 12

# ─────────────────────────────────────────────────────────────── the model


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
        next_cursor: str,
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
        count = sum(1 for t, s, _ in page.items if (t, s) == (tenant, source))
        page.checkpoints[(tenant, source)] = (next_cursor, count)
        self.items, self.checkpoints, self.failures = page.items, page.checkpoints, page.failures
        return outcome(applied, unchanged, rejected, True, next_cursor)

    def rows(self) -> JSON:
        return {
            "items": [[*k, v, p] for k, (v, p) in self.items.items()],
            "checkpoints": [[*k, c, n] for k, (c, n) in self.checkpoints.items()],
            "failures": [[*k, r, s] for k, (r, s) in self.failures.items()],
        }


def play(steps: Sequence[JSON]) -> list[tuple[JSON, JSON]]:
    """(expected result, expected store) after each scenario step."""
    store = Store()
    expected = []
    for step in steps:
        op = step["op"]
        result: JSON = {"ok": None}
        if op == "ingest":
            got = store.ingest(
                step["tenant"],
                step["source"],
                P.PAGES[step["page"]](),
                step["expected"],
                step["next"],
            )
            result = got if "raised" in got else {"ok": got}
        elif op == "fault":
            store.faults = [*store.faults, {"table": step["table"], "item": step["item"]}]
        elif op == "clear":
            store.faults = []
        expected.append((result, store.rows()))
    return expected


# ─────────────────────────────────────────────────────────────── comparing observations


def sort_rows(rows: Any) -> Any:
    if not isinstance(rows, list):
        return rows
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


def short(value: Any, width: int = 36) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def row_text(table: str, row: Any) -> str:
    if not isinstance(row, list):
        return show_json(row)
    cells = [short(cell) if isinstance(cell, str) else show_json(cell) for cell in row]
    return f"{table}({', '.join(cells)})"


def state_difference(got: JSON, want: JSON) -> str | None:
    """None when the stores hold the same rows; else which rows are missing and extra."""
    if "ok" not in got:
        return f"the store could not be read: {show_outcome(got)}"
    lines = []
    for table in P.COLUMNS:
        mine = sort_rows(got["ok"].get(table))
        theirs = sort_rows(want[table])
        if mine == theirs:
            continue
        if not isinstance(mine, list):
            lines.append(f"{table}: {show_json(mine)}")
            continue
        key = lambda row: json.dumps(row, sort_keys=True)  # noqa: E731
        mine_keys, their_keys = {key(r) for r in mine}, {key(r) for r in theirs}
        extra = [r for r in mine if key(r) not in their_keys]
        missing = [r for r in theirs if key(r) not in mine_keys]
        twice = len(mine) - len(mine_keys)
        for label, rows in (("unexpected", extra), ("missing", missing)):
            for row in rows[:3]:
                lines.append(f"{label}: {row_text(table, row)}")
            if len(rows) > 3:
                lines.append(f"... and {len(rows) - 3} more {label} {table} rows")
        if twice:
            lines.append(f"{table}: {twice} row(s) stored twice")
    return "\n          ".join(lines) if lines else None


def result_text(result: JSON) -> str:
    if "ok" in result and isinstance(result["ok"], dict) and "applied" in result["ok"]:
        fields = result["ok"]
        inner = ", ".join(f"{name}={show_json(fields.get(name))}" for name in P.FIELDS)
        kind = fields.get("type", "PageOutcome")
        return f"{kind}({inner})"
    return show_outcome(result)


def expected_text(result: JSON) -> str:
    if "raised" in result:
        return f"raises {result['raised']} (the database's own error, after rolling the page back)"
    if result.get("ok") is None:
        return "it runs"
    inner = ", ".join(f"{name}={show_json(result['ok'][name])}" for name in P.FIELDS)
    return f"PageOutcome({inner})"


def same_result(got: JSON, want: JSON) -> bool:
    if "raised" in want:
        return got.get("raised") == want["raised"]
    if want.get("ok") is None:
        return "ok" in got
    if "ok" not in got or not isinstance(got["ok"], dict):
        return False
    fields = got["ok"]
    return all(
        type(fields.get(name)) is type(want["ok"][name]) and fields.get(name) == want["ok"][name]
        for name in P.FIELDS
    )


def step_text(step: JSON) -> str:
    if step["op"] == "ingest":
        return (
            f"ingest_page(conn{step['who']}, tenant={step['tenant']!r},"
            f" source={step['source']!r}, items=<{step['say'] or step['page']}>,"
            f" expected_cursor={step['expected']!r}, next_cursor={step['next']!r})"
        )
    return step["say"]


def steps_text(steps: Sequence[JSON], upto: int) -> str:
    start = max(0, upto + 1 - SHOWN_STEPS)
    lines = [
        f"{n + 1}. {step_text(step)}" for n, step in enumerate(steps[: upto + 1]) if n >= start
    ]
    if start:
        lines.insert(0, f"(steps 1-{start} as before)")
    return "a fresh store (open_store), then:\n          " + "\n          ".join(lines)


def result_note(got: JSON, want: JSON) -> str:
    """What the difference in an outcome most likely means."""
    if "raised" in want:
        if "ok" in got:
            return (
                "The database refused a write of this page: ingest_page must let that error"
                " out (after ROLLBACK), not report an outcome."
            )
        return (
            "Raise the database's own exception: roll back, then a bare `raise`. If SQLite"
            " already ended the transaction, check conn.in_transaction before ROLLBACK."
        )
    if "raised" in got:
        if got.get("raised") == "OperationalError" and "transaction" in str(got.get("message")):
            return "An earlier call left its transaction open: ROLLBACK on every error path."
        return "A good page must not raise: poison items are recorded, not raised."
    fields = got.get("ok") if isinstance(got.get("ok"), dict) else {}
    wanted = want["ok"]
    if wanted["advanced"] is False and fields.get("advanced") is True:
        return (
            "The checkpoint was not at expected_cursor: compare-and-set must refuse, roll the"
            " page back and report the persisted winner."
        )
    if wanted["advanced"] is False:
        return "On a miss, report zeros, advanced=False and the cursor stored now."
    for name in P.FIELDS:
        if name in fields and type(fields[name]) is not type(wanted[name]):
            return f"{name} must be a {type(wanted[name]).__name__}."
    return (
        "applied: the item's row was inserted or replaced by a higher version; unchanged:"
        " the store already held that version or a newer one; rejected: poison, recorded."
    )


def judge_steps(
    steps: Sequence[JSON], observed: JSON, expected: Sequence[tuple[JSON, JSON]], note: str = ""
) -> None:
    """Fail at the first step whose result, transaction state or store is not the model's."""
    seen = observed.get("steps", [])
    for n, (step, (want_result, want_state)) in enumerate(zip(steps, expected, strict=False)):
        call = steps_text(steps, n)
        if n >= len(seen):
            stopped = observed.get("stopped", {})
            not_done(stopped, "open_store(path)")
            raise Fail(message(call, show_outcome(stopped), "every step runs"))
        got = seen[n]
        result = got.get("result", {})
        not_done(result, step_text(step))
        if step["op"] != "ingest" and "ok" not in result:
            raise Fail(message(call, show_outcome(result), "it runs"))
        if not same_result(result, want_result):
            raise Fail(
                message(
                    call,
                    result_text(result),
                    expected_text(want_result),
                    "\n".join(x for x in (result_note(result, want_result), note) if x),
                )
            )
        if step["op"] == "ingest" and got.get("in_transaction") is not False:
            raise Fail(
                message(
                    call,
                    f"conn.in_transaction is {show_json(got.get('in_transaction'))} afterwards",
                    "False: every call ends its transaction (COMMIT, or ROLLBACK on any error)",
                    note,
                )
            )
        difference = state_difference(got.get("state", {}), want_state)
        if difference:
            raise Fail(
                message(
                    f"{call}\n          then read every table",
                    difference,
                    "the store the spec gives after these steps",
                    note,
                )
            )


def scenario_judge(name: str, scenarios: Sequence[str], note: str = "") -> None:
    def judge(obs: Observed) -> None:
        seen = obs(name)
        for scenario in scenarios:
            steps = P.SCENARIOS[scenario]
            judge_steps(steps, seen[scenario], play(steps), note)

    JUDGES.add(name)(judge)


def opened(seen: JSON) -> None:
    result = seen.get("opened", {})
    not_done(result, "open_store(path)")
    if "ok" not in result:
        raise Fail(message("open_store(path)", show_outcome(result), "a sqlite3.Connection"))


# ─────────────────────────────────────────────────────────────── step 1: the store

UNIQUE_NOTE = (
    "Declare the identity in the schema: PRIMARY KEY (tenant, source, item_id) (or a UNIQUE"
    " constraint on them), so that the database itself refuses a second row."
)


@JUDGES.add("store_has_the_pinned_schema")
def judge_schema(obs: Observed) -> None:
    seen = obs("store_has_the_pinned_schema")
    opened(seen)
    check(
        seen["is_connection"] is True,
        "open_store(path)",
        f"a {seen['type']} object",
        "a sqlite3.Connection",
    )
    level = ok(seen["isolation_level"], "open_store(path).isolation_level")
    equal(
        "open_store(path).isolation_level",
        level,
        None,
        note="sqlite3.connect(path, isolation_level=None): no implicit transactions; each page"
        " opens its own with BEGIN IMMEDIATE.",
    )
    schema = ok(seen["schema"], "the tables of the new store")
    for table, columns in P.COLUMNS.items():
        if table not in schema:
            raise Fail(
                message(
                    "the tables of the new store", show_json(sorted(schema)), f"a table {table}"
                )
            )
        missing = [c for c in columns if c not in schema[table]["columns"]]
        check(
            not missing,
            f"the columns of {table}",
            show_json(schema[table]["columns"]),
            f"at least {', '.join(columns)}",
        )
        identity = list(P.IDENTITY[table])
        keys = schema[table]["unique"]
        exact = [k for k in keys if sorted(k) == sorted(identity)]
        check(
            bool(exact),
            f"the unique keys of {table}",
            show_json(keys) if keys else "none",
            f"one on exactly ({', '.join(identity)})",
            note=UNIQUE_NOTE if table == "items" else "",
        )
        leading = [k for k in exact if set(k[:2]) == {"tenant", "source"}]
        check(
            bool(leading),
            f"the unique key of {table}",
            show_json(exact[0]),
            "tenant and source as its leading columns",
            note="Lead with the boundary: all of one tenant's source is then one range of the"
            " index, and the key reads as what it means.",
        )


@JUDGES.add("identity_is_enforced_per_tenant")
def judge_identity(obs: Observed) -> None:
    seen = obs("identity_is_enforced_per_tenant")
    opened(seen)
    refused = {1, 6, 9}  # the second row of an identity already stored
    for n, ((table, row), got) in enumerate(zip(P.IDENTITY_INSERTS, seen["inserts"], strict=True)):
        call = f"INSERT INTO {table} {show_json(row)}"
        if n > 0:
            call = f"after the inserts before it, {call}"
        if n in refused:
            check(
                got.get("raised") == "IntegrityError",
                call,
                show_outcome(got) if "raised" in got else "the row was stored",
                "IntegrityError: that identity is already stored",
                note=UNIQUE_NOTE,
            )
        else:
            check(
                "ok" in got,
                call,
                show_outcome(got),
                "the row is stored: another tenant or source is another identity",
                note="Keep tenant and source in the key: an item id is unique only within its"
                " tenant's source. Columns you add need a default.",
            )


@JUDGES.add("reopening_keeps_the_data")
def judge_reopening(obs: Observed) -> None:
    seen = obs("reopening_keeps_the_data")
    opened(seen)
    store = Store()
    first = store.ingest(P.TENANT, P.SOURCE, P.PAGES["p1"](), None, "p1")
    call = "conn = open_store(path); ingest page 1; conn.close(); open_store(path) again"
    page = seen["page"]
    check(
        same_result(page, {"ok": first}),
        "ingest page 1",
        result_text(page),
        expected_text({"ok": first}),
    )
    reopened = seen["reopened"]
    check(
        "ok" in reopened,
        call,
        show_outcome(reopened),
        "the store opens again",
        note="Create the tables only if they do not exist yet: CREATE TABLE IF NOT EXISTS.",
    )
    difference = state_difference(seen["state"], store.rows())
    check(difference is None, f"{call}; read every table", difference or "", "page 1, kept")
    equal(
        f"{call}; read_checkpoint(conn, {P.TENANT!r}, {P.SOURCE!r})",
        ok(seen["read"], "read_checkpoint(...)"),
        "p1",
    )
    second = store.ingest(P.TENANT, P.SOURCE, P.PAGES["p2"](), "p1", "p2")
    check(
        same_result(seen["next"], {"ok": second}),
        f"{call}; ingest page 2 from 'p1'",
        result_text(seen["next"]),
        expected_text({"ok": second}),
    )
    difference = state_difference(seen["state_after"], store.rows())
    check(difference is None, f"{call}; page 2; read every table", difference or "", "pages 1-2")


# ─────────────────────────────────────────────────────────────── step 2: checkpoints


@JUDGES.add("checkpoint_moves_only_by_compare_and_set")
def judge_checkpoints(obs: Observed) -> None:
    seen = obs("checkpoint_moves_only_by_compare_and_set")
    opened(seen)
    cursors: dict[tuple[str, str], str] = {}
    done: list[str] = []
    for call, got in zip(P.CHECKPOINT_CALLS, seen["calls"], strict=True):
        if call[0] == "read":
            _, tenant, source = call
            text = f"read_checkpoint(conn, {tenant!r}, {source!r})"
            want: Any = cursors.get((tenant, source))
            note = "None means no checkpoint yet; read only this tenant's source."
        else:
            _, tenant, source, before, after = call
            text = f"advance_checkpoint(conn, {tenant!r}, {source!r}, {before!r}, {after!r})"
            want = cursors.get((tenant, source)) == before
            if want:
                cursors[(tenant, source)] = after
            note = (
                "Compare-and-set: move only from `expected_cursor` (None: insert the first row,"
                " only if there is none), and say whether it moved: rowcount == 1."
            )
        history = "; ".join(done[-4:])
        shown = f"after {history}: {text}" if history else text
        equal(shown, ok(got, text), want, note=note)
        done.append(text.replace("(conn, ", "("))
    rows = ok(seen["state"], "the checkpoints table")["checkpoints"]
    got_rows = sort_rows([r[:3] for r in rows]) if isinstance(rows, list) else rows
    want_rows = sort_rows([[t, s, c] for (t, s), c in cursors.items()])
    equal("the checkpoints table (tenant, source, cursor) after those calls", got_rows, want_rows)


# ─────────────────────────────────────────────────────────────── step 3: poison


@JUDGES.add("poison_items_are_classified")
def judge_poison(obs: Observed) -> None:
    reasons = obs("poison_items_are_classified")["reasons"]
    items = P.PAGES["every_poison"]() + P.PAGES["canonical"]() + P.PAGES["edge_versions"]()
    for item, got in zip(items, reasons, strict=True):
        call = f"poison_reason({P.item_text(item)})"
        want = reason_for(item)
        value = ok(got, call, show_json(want))
        note = ""
        if want is None:
            note = "This item can be stored: return None."
        elif want == BAD_VERSION:
            note = (
                "A version is an int (type(v) is int: True is an int too) that fits SQLite's"
                " 64-bit INTEGER."
            )
        elif want == NOT_CANONICAL:
            note = "Try canonical_json(item['payload']); a missing payload is not null."
        elif want == MISSING_ID:
            note = "An id is a non-empty str; something that is not a mapping has no id."
        equal(call, value, want, note=note + " Return one of the three reason constants.")


# ─────────────────────────────────────────────────────────────── step 4: upsert_item


def judge_upserts(name: str, calls: Sequence[tuple[str, dict[str, Any]]], note: str) -> None:
    def judge(obs: Observed) -> None:
        seen = obs(name)
        opened(seen)
        store = Store()
        done: list[str] = []
        for (tenant, item), got in zip(calls, seen["calls"], strict=True):
            key = (tenant, P.SOURCE, item["id"])
            stored = store.items.get(key)
            if stored is None or item["version"] > stored[0]:
                store.items[key] = (item["version"], canonical_json(item["payload"]))
                want = "applied"
            else:
                want = "unchanged"
            text = f"upsert_item(conn, {tenant!r}, {P.SOURCE!r}, {P.item_text(item)})"
            call = "; ".join([*done[-3:], text])
            equal(call, ok(got["result"], text), want, note=note)
            difference = state_difference(got["state"], store.rows())
            check(
                difference is None,
                f"{call}; then read every table",
                difference or "",
                "the item stored once, at the highest version seen, payload as canonical JSON",
                note=note,
            )
            done.append(f"upsert {item['id'][:8]} v{item['version']} for {tenant}")

    JUDGES.add(name)(judge)


judge_upserts(
    "replace_never_accumulate",
    P.UPSERT_CALLS["replace"],
    "INSERT ... ON CONFLICT (tenant, source, item_id) DO UPDATE SET version = excluded.version,"
    " payload = excluded.payload WHERE excluded.version > items.version; applied when"
    " cursor.rowcount == 1.",
)
judge_upserts(
    "newer_version_wins",
    P.UPSERT_CALLS["versions"],
    "Only a strictly higher version replaces the stored row; equal or lower: unchanged, the"
    " stored row untouched.",
)

# ─────────────────────────────────────────────────────────────── step 5 and hidden: scenarios

scenario_judge(
    "replay_same_batch_same_fixed_point",
    ["replay"],
    "Replaying a page (lost acknowledgement, re-run, restart) must leave the store as one run"
    " left it, and be refused by compare-and-set.",
)
scenario_judge(
    "item_failure_holds_checkpoint",
    ["item_fault", "first_page_faults"],
    "Items and checkpoint in one transaction: when an item's write fails, ROLLBACK and raise;"
    " the checkpoint must not move.",
)
scenario_judge(
    "checkpoint_failure_rolls_back_items",
    ["checkpoint_fault"],
    "One transaction: if the checkpoint write fails, the page's item writes roll back with it.",
)
scenario_judge(
    "stale_run_cannot_overwrite",
    ["stale"],
    "A late worker: its checkpoint must lose the compare-and-set (the persisted winner is"
    " reported), and an older version must never replace a newer one.",
)
scenario_judge(
    "tenants_never_collide",
    ["tenants"],
    "Every key, checkpoint and failure record is scoped by (tenant, source).",
)
scenario_judge(
    "outcome_counts_every_item_once",
    ["mixed"],
    "Every item of a page is counted exactly once: applied, unchanged or rejected.",
)
scenario_judge(
    "versions_decide_within_and_across_pages",
    ["versions"],
    "Items are written in page order; only a strictly higher version replaces the stored row.",
)
scenario_judge(
    "payload_stored_as_canonical_json",
    ["canonical"],
    "Store canonical_json(item['payload']): any JSON value, None included; versions across"
    " SQLite's whole 64-bit range.",
)
scenario_judge(
    "every_poison_item_is_recorded",
    ["every_poison"],
    "Every poison item gets a failure record with its reason; the good item is still applied.",
)
scenario_judge(
    "id_less_poison_recorded_where_it_was_seen",
    ["id_less"],
    'An item with no usable id is recorded as f"{expected_cursor}#{index}", seen_at ='
    " expected_cursor.",
)
scenario_judge(
    "replayed_poison_recorded_once",
    ["poison_again"],
    "One failure record per identity, the first one: INSERT ... ON CONFLICT DO NOTHING; a"
    " rolled-back page leaves no record.",
)
scenario_judge(
    "cas_miss_writes_nothing",
    ["cas"],
    "On a compare-and-set miss nothing of the page is written: no item, no failure record.",
)
scenario_judge(
    "database_error_rolls_back_and_propagates",
    ["failure_fault", "first_page_faults"],
    "A failing write is not poison: ROLLBACK, then raise the same exception.",
)
scenario_judge(
    "error_after_automatic_rollback_propagates",
    ["rollback_fault"],
    "When SQLite has already rolled back (conn.in_transaction is False), a second ROLLBACK"
    " raises 'cannot rollback - no transaction is active' and hides the real error: roll back"
    " only if conn.in_transaction.",
)
scenario_judge(
    "item_count_is_a_recount",
    ["counts"],
    "item_count is how many items the tenant's source holds: recount it (SELECT COUNT(*)),"
    " never add the page's applied count to it.",
)


@JUDGES.add("reasons_are_sanitized")
def judge_sanitized(obs: Observed) -> None:
    seen = obs("reasons_are_sanitized")
    steps = P.SCENARIOS["secrets"]
    observed = seen["secrets"]
    for got in observed.get("steps", []):
        state = got.get("state", {})
        if "ok" not in state:
            continue
        for row in state["ok"].get("failures", []):
            text = json.dumps(row, ensure_ascii=False)
            check(
                P.SECRET not in text,
                steps_text(steps, 0) + "\n          then read the failures table",
                f"a failure record holding the secret token: {row_text('failures', row)}",
                "records that say why in chosen words, never the item's data",
                note="Never copy an exception's text or the item's values into a reason: the"
                " record is shown to operators. Use the three reason constants.",
            )
    judge_steps(steps, observed, play(steps), "Reasons are the three constants, nothing else.")


@JUDGES.add("poison_item_recorded_later_items_terminal")
def judge_budget(obs: Observed) -> None:
    seen = obs("poison_item_recorded_later_items_terminal")
    opened(seen)
    steps = P.SCENARIOS["budget"]
    store = Store()
    for n, (step, page) in enumerate(zip(steps, seen["pages"], strict=True)):
        want = store.ingest(
            step["tenant"], step["source"], P.PAGES[step["page"]](), step["expected"], step["next"]
        )
        attempts = page["attempts"]
        first = attempts[0]
        call = steps_text(steps, n) + f"\n          (a worker retrying up to {P.BUDGET} times)"
        not_done(first, "ingest_page(...)")
        if "raised" in first:
            raise Fail(
                message(
                    call,
                    f"attempt 1 {show_outcome(first)}; {len(attempts)} attempt(s), the last"
                    f" {show_outcome(attempts[-1])}",
                    expected_text({"ok": want}) + " at the first attempt",
                    "A poison item fails the same way on every retry, so raising stalls the"
                    " source for good: record it in failures and finish the page.",
                )
            )
        check(
            same_result(first, {"ok": want}),
            call,
            result_text(first),
            expected_text({"ok": want}),
            note=result_note(first, {"ok": want}),
        )
        difference = state_difference(page["state"], store.rows())
        check(
            difference is None,
            call + "\n          then read every table",
            difference or "",
            "the good items stored, the poison one recorded in failures, the checkpoint moved",
            note="Dropping the poison item without a record loses it silently.",
        )


# ─────────────────────────────────────────────────────────────── hidden: the transaction


def transaction_problem(statements: list[str], *, ends: tuple[str, ...]) -> str | None:
    """What is wrong with one call's statements, or None."""
    kinds = [s for s in statements if s]
    begins = [i for i, s in enumerate(kinds) if s.startswith("BEGIN")]
    if len(begins) != 1:
        return f"{len(begins)} BEGIN statements (one page is one transaction: exactly one)"
    begin = begins[0]
    if kinds[begin] not in ("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE"):
        return (
            f"{kinds[begin]}: a deferred transaction takes the write lock only at its first"
            " write, so two workers can both read the old checkpoint; use BEGIN IMMEDIATE"
        )
    finishers = [i for i, s in enumerate(kinds) if s in ("COMMIT", "ROLLBACK")]
    if len(finishers) != 1 or finishers[0] < begin:
        return f"{len(finishers)} COMMIT/ROLLBACK after the BEGIN (exactly one ends the page)"
    end = finishers[0]
    if kinds[end] not in ends:
        return f"the transaction ends with {kinds[end]}"
    writes = [s for i, s in enumerate(kinds) if s in P.WRITES and not begin < i < end]
    if writes:
        return f"{writes[0]} outside the transaction (every write of a page goes inside it)"
    return None


@JUDGES.add("explicit_transaction_per_page")
def judge_transaction(obs: Observed) -> None:
    seen = obs("explicit_transaction_per_page")
    opened(seen)
    equal(
        "open_store(path).isolation_level",
        ok(seen["isolation_level"], "open_store(path).isolation_level"),
        None,
        note="isolation_level=None: sqlite3 then opens no transaction behind your back.",
    )
    cases = (
        ("first", "page 1 (with a poison item), no checkpoint yet", ("COMMIT",)),
        ("stale", "page 2 from no checkpoint, when one exists (a miss)", ("ROLLBACK", "COMMIT")),
        ("next", "page 2 from 'p1'", ("COMMIT",)),
        ("failing", "page 3 while the checkpoint write fails", ("ROLLBACK",)),
    )
    for key, what, ends in cases:
        got = seen[key]
        call = f"the statements ingest_page sent for {what}"
        if "statements" not in got:
            raise Fail(message(call, show_outcome(got), "a traced call"))
        not_done(got["result"], "ingest_page(...)")
        problem = transaction_problem(got["statements"], ends=ends)
        shown = " · ".join(s for s in got["statements"][:14] if s)
        check(
            problem is None,
            call,
            f"{shown}\n          ({problem})",
            "BEGIN IMMEDIATE, the page's writes, then " + " or ".join(ends),
        )


# ─────────────────────────────────────────────────────────────── hidden: concurrency


@JUDGES.add("concurrent_duplicates_one_durable_effect")
def judge_concurrent(obs: Observed) -> None:
    seen = obs("concurrent_duplicates_one_durable_effect")
    opened(seen)
    call = (
        f"{P.THREADS} threads, each with its own open_store(path), deliver page 1 at the same"
        " moment: ingest_page(conn, expected_cursor=None, next_cursor='t1')"
    )
    check(
        all(seen["finished"]),
        call,
        "a worker was still running after 5 s",
        "every worker returns",
        note="Is a transaction left open, holding the write lock?",
    )
    store = Store()
    won = store.ingest(P.TENANT, P.SOURCE, P.PAGES["for_threads"](), None, "t1")
    lost = outcome(0, 0, 0, False, "t1")
    results = seen["results"]
    for result in results:
        not_done(result, "ingest_page(...)")
        if "raised" in result:
            raise Fail(
                message(
                    call,
                    f"a worker {show_outcome(result)}",
                    "every worker returns an outcome",
                    "With BEGIN IMMEDIATE a second worker waits for the write lock (up to the"
                    " connection's timeout, 5 s by default) instead of failing.",
                )
            )
    winners = [r for r in results if same_result(r, {"ok": won})]
    losers = [r for r in results if same_result(r, {"ok": lost})]
    check(
        len(winners) == 1 and len(losers) == P.THREADS - 1,
        call,
        "; ".join(result_text(r) for r in results),
        f"one {expected_text({'ok': won})} and {P.THREADS - 1} times {expected_text({'ok': lost})}",
        note="One durable effect: the first worker's compare-and-set wins, every other one"
        " misses and writes nothing.",
    )
    difference = state_difference(seen["state"], store.rows())
    check(difference is None, call + "; then read every table", difference or "", "page 1, once")


# ─────────────────────────────────────────────────────────────── hidden: a kill mid-page


@JUDGES.add("killed_mid_page_then_replay_converges")
def judge_killed(obs: Observed) -> None:
    seen = obs("killed_mid_page_then_replay_converges")
    opened(seen)
    store = Store()
    first = store.ingest(P.TENANT, P.SOURCE, P.PAGES["p1"](), None, "p1")
    check(
        same_result(seen["page1"], {"ok": first}),
        "ingest page 1",
        result_text(seen["page1"]),
        expected_text({"ok": first}),
    )
    call = (
        "page 2 from 'p1', in a process killed (os._exit) right after the page's third item is"
        " written, before anything commits"
    )
    exit_code = seen["child_exit"]
    check(
        exit_code == P.KILLED_EXIT,
        call,
        f"the process ended with exit code {exit_code}",
        "it is killed while writing the third item",
        note="Write every valid new item of the page (the third one included).",
    )
    difference = state_difference(seen["after_kill"], store.rows())
    check(
        difference is None,
        call + "; then read every table",
        difference or "",
        "exactly the store before page 2: an uncommitted transaction leaves no trace",
        note="Items and checkpoint in one BEGIN IMMEDIATE ... COMMIT: nothing may be committed"
        " before the end of the page.",
    )
    again = store.ingest(P.TENANT, P.SOURCE, P.PAGES["for_the_kill"](), "p1", "p2")
    replay = seen.get("replay", seen.get("reopened", {}))
    check(
        same_result(replay, {"ok": again}),
        call + "; a new process opens the store and replays page 2",
        result_text(replay),
        expected_text({"ok": again}),
    )
    difference = state_difference(seen["after_replay"], store.rows())
    check(difference is None, call + "; replay; read", difference or "", "pages 1-2, once")


# ─────────────────────────────────────────────────────────────── hidden: the state machine


def fault_text(fault: JSON) -> str:
    if fault.get("item"):
        return f"item {fault['item']!r}"
    return {"failures": "a failure record", "checkpoints": "the checkpoint"}.get(
        fault.get("table"), str(fault.get("table"))
    )


def sm_step_text(step: JSON) -> str:
    op = step["op"]
    if op == "open":
        return "open_store(path)"
    if op == "restart":
        return "restart: conn.close(); conn = open_store(path)"
    what = {
        "run": "a worker runs the page after the checkpoint",
        "fault": "a worker runs a page while the database refuses to write "
        + fault_text(step.get("fault") or {}),
        "redeliver": "an earlier page is delivered again, exactly as sent",
        "scratch": "a worker re-runs from scratch (no checkpoint)",
    }[op]
    items = ", ".join(json.dumps(s, separators=(",", ":")) for s in step["items"])
    return (
        f"{what}: ingest_page(conn, tenant={step['tenant']!r}, items=[{items}],"
        f" expected_cursor={step['expected']!r}, next_cursor={step['next']!r})"
    )


def sm_trace_text(trace: Sequence[JSON], upto: int) -> str:
    start = max(0, upto + 1 - SHOWN_STEPS)
    lines = [f"{n}. {sm_step_text(s)}" for n, s in enumerate(trace[: upto + 1]) if n >= start]
    if start:
        lines.insert(0, f"(steps 0-{start - 1} omitted)")
    return (
        "a state machine (hypothesis) of pages, redeliveries, faults, restarts and stale"
        ' re-runs ({"$float": "nan"} is a NaN):\n          ' + "\n          ".join(lines)
    )


def judge_trace(trace: Sequence[JSON]) -> None:
    store = Store()
    for n, step in enumerate(trace):
        call = sm_trace_text(trace, n)
        result = step.get("result", {})
        if step["op"] in ("open", "restart"):
            not_done(result, "open_store(path)")
            check("ok" in result, call, show_outcome(result), "the store opens")
            if step["op"] == "open":
                continue
        else:
            items = [P.decode(s) for s in step["items"]]
            fault = step.get("fault")
            if fault is not None:
                installed = step.get("fault_installed", {})
                check(
                    "ok" in installed,
                    call,
                    f"the fault could not be installed: {show_outcome(installed)}",
                    "the store is free to change between pages",
                    note="A transaction left open by an earlier call still holds the lock.",
                )
                store.faults = [{"table": fault["table"], "item": fault["item"]}]
            want = store.ingest(step["tenant"], P.SOURCE, items, step["expected"], step["next"])
            store.faults = []
            want_result = want if "raised" in want else {"ok": want}
            not_done(result, "ingest_page(...)")
            if not same_result(result, want_result):
                raise Fail(
                    message(
                        call,
                        result_text(result),
                        expected_text(want_result),
                        result_note(result, want_result),
                    )
                )
        if step.get("in_transaction") is not False:
            raise Fail(
                message(
                    call,
                    f"conn.in_transaction is {show_json(step.get('in_transaction'))} afterwards",
                    "False: every call ends its transaction",
                )
            )
        reads = step.get("read", [])
        for tenant, got in zip(P.SM_TENANTS, reads, strict=False):
            want_cursor = store.cursor(tenant, P.SOURCE)
            if got != {"ok": want_cursor}:
                raise Fail(
                    message(
                        f"{call}\n          then read_checkpoint(conn, {tenant!r}, {P.SOURCE!r})",
                        show_outcome(got),
                        show_json(want_cursor),
                    )
                )
        difference = state_difference(step.get("state", {}), store.rows())
        if difference:
            raise Fail(
                message(
                    f"{call}\n          then read every table",
                    difference,
                    "the store the spec gives after these steps: each step converges to one"
                    " successful run's state",
                )
            )


@JUDGES.add("state_machine_invariants_hold")
def judge_state_machine(obs: Observed) -> None:
    runs = [obs(f"state_machine_{n + 1}") for n in range(len(P.SM_RUNS))]
    examples = 0
    for run in runs:
        if "stopped" in run:
            not_done(run["stopped"], "the state machine")
            raise Fail(
                message("the state machine", show_outcome(run["stopped"]), "it runs every example")
            )
        for trace in run["traces"]:
            if trace:
                first = trace[0].get("result", {})
                not_done(first, "open_store(path)")
            judge_trace(trace)
            examples += 1
    check(examples > 0, "the state machine", "no example ran", "at least one example")
