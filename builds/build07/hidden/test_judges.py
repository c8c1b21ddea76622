"""Build 07's judges: pytest tests run in the grading process, on the probes' observations.

One ``test_<name>(observed)`` per graded test of notebook 07 in ``workbook.toml``. Expected
outcomes and states come from `model.Store`, the spec written as dictionaries: every scenario
the probes played, and every step of the state machine, is run through it step by step, and
the first step whose outcome or store differs is the feedback, with the steps that led there.
Nothing expected ever enters the child.

What the probes report is a claim, so no judge stops there. Every probe is seeded: the judge
draws the submission's own launches, cursors and ids again (`probes.Inputs`), and the state
machine's steps too, so each step must be answered, in order, for the steps drawn here. And
the stores themselves are read here (`model.kept_state`, `model.kept_schema`): the schema
from the database file, the rows a scenario left from the file, the transactions a page
committed from the file's header (`model.commits`), not from a trace the learner's objects
could rewrite. Judging the same observations twice gives the same verdicts.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Sequence
from typing import Any

from builds.build07.hidden import probes as P
from builds.build07.hidden.model import (
    BAD_VERSION,
    MISSING_ID,
    NOT_CANONICAL,
    Store,
    commits,
    kept_schema,
    kept_state,
    outcome,
    play,
    reason_for,
)
from grader.digest import canonical_json
from grader.judging import (
    JSON,
    Fail,
    Observed,
    check,
    equal,
    is_kind,
    learner_text,
    listed,
    not_done,
    ok,
)
from workbook.feedback import message, show_json, show_outcome

SHOWN_STEPS = 12


def seeded(observed: Observed, name: str) -> tuple[JSON, random.Random]:
    return observed.seeded(name, P.PROBES)


# ─────────────────────────────────────────────────────────────── comparing observations


def sort_rows(rows: Any) -> Any:
    if not isinstance(rows, list):
        return rows
    return sorted(rows, key=key)


def short(value: Any, width: int = 36) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


#: ``json.dumps(row, sort_keys=True)``, with one encoder made once instead of one per call.
_SORTED = json.JSONEncoder(sort_keys=True).encode


def key(row: Any) -> str:
    return _SORTED(row)


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
        kind = learner_text(fields.get("type", "PageOutcome"))
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
        return is_kind(got, want["raised"])
    if want.get("ok") is None:
        return "ok" in got
    if "ok" not in got or not isinstance(got["ok"], dict):
        return False
    fields = got["ok"]
    return all(
        type(fields.get(name)) is type(want["ok"][name]) and fields.get(name) == want["ok"][name]
        for name in P.FIELDS
    )


def step_text(s: P.Inputs, step: JSON) -> str:
    if step["op"] == "ingest":
        return (
            f"ingest_page(conn{step['who']}, tenant={step['tenant']!r},"
            f" source={step['source']!r}, items=<{step['say'] or step['page']}>,"
            f" expected_cursor={s.cursor(step['expected'])!r},"
            f" next_cursor={s.cursor(step['next'])!r})"
        )
    return str(step["say"])


def steps_text(s: P.Inputs, steps: Sequence[JSON], upto: int) -> str:
    start = max(0, upto + 1 - SHOWN_STEPS)
    lines = [
        f"{n + 1}. {step_text(s, step)}" for n, step in enumerate(steps[: upto + 1]) if n >= start
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


def judge_store(observed: Observed, ref: JSON, want: JSON, call: str, note: str = "") -> None:
    """Fail unless the database the probe kept holds exactly the rows `want`: read here."""
    difference = state_difference(kept_state(observed, ref), want)
    if difference:
        raise Fail(
            message(
                f"{call}\n          then read every table of the database file",
                difference,
                "the store the spec gives after these steps",
                note,
            )
        )


def judge_steps(
    s: P.Inputs,
    steps: Sequence[JSON],
    seen: JSON,
    expected: Sequence[tuple[JSON, JSON]],
    note: str = "",
) -> None:
    """Fail at the first step whose result, transaction state or store is not the model's."""
    answered = seen.get("steps", [])
    for n, (step, (want_result, want_state)) in enumerate(zip(steps, expected, strict=True)):

        def call(n: int = n) -> str:  # the steps so far, written only for a failure
            return steps_text(s, steps, n)

        if n >= len(answered):
            stopped = seen.get("stopped", {})
            not_done(stopped, "open_store(path)")
            raise Fail(message(call(), show_outcome(stopped), "every step runs"))
        got = answered[n]
        result = got.get("result", {})
        not_done(result, step_text(s, step))
        if step["op"] != "ingest" and "ok" not in result:
            raise Fail(message(call(), show_outcome(result), "it runs"))
        if not same_result(result, want_result):
            raise Fail(
                message(
                    call(),
                    result_text(result),
                    expected_text(want_result),
                    "\n".join(x for x in (result_note(result, want_result), note) if x),
                )
            )
        if step["op"] == "ingest" and got.get("in_transaction") is not False:
            raise Fail(
                message(
                    call(),
                    f"conn.in_transaction is {show_json(got.get('in_transaction'))} afterwards",
                    "False: every call ends its transaction (COMMIT, or ROLLBACK on any error)",
                    note,
                )
            )
        difference = state_difference(got.get("state", {}), want_state)
        if difference:
            raise Fail(
                message(
                    f"{call()}\n          then read every table",
                    difference,
                    "the store the spec gives after these steps",
                    note,
                )
            )
    if len(answered) != len(steps):
        raise Fail(message(steps_text(s, steps, len(steps) - 1), "more steps", "these steps"))


def scenario_judge(name: str, names: Sequence[str], note: str = "") -> Callable[[Observed], None]:
    """The judge of scenario probe `name`: each scenario step by step, then its kept store."""

    def judge(observed: Observed) -> None:
        seen, rng = seeded(observed, name)
        s = P.Inputs(rng)
        played = P.scenarios(s)
        for scenario in names:
            steps = played[scenario]
            expected, store = play(s, steps)
            judge_steps(s, steps, seen[scenario], expected, note)
            judge_store(
                observed,
                seen[scenario].get("store"),
                store.rows(),
                steps_text(s, steps, len(steps) - 1),
                note,
            )

    return judge


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


def test_store_has_the_pinned_schema(observed: Observed) -> None:
    seen, rng = seeded(observed, "store_has_the_pinned_schema")
    s = P.Inputs(rng)
    opened(seen)
    check(
        seen["is_connection"] is True,
        "open_store(path)",
        f"a {learner_text(seen['type'])} object",
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
    schema = kept_schema(observed, seen.get("store"))
    call = "the tables of the new store (read from its file)"
    if not isinstance(schema, dict):
        raise Fail(message(call, "no database file, or not one SQLite can read", "a store"))
    for table, columns in P.COLUMNS.items():
        if table not in schema:
            raise Fail(message(call, show_json(sorted(schema)), f"a table {table}"))
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
    marker = P.marker_row(s)
    state = kept_state(observed, seen.get("store"))
    rows = state.get("ok", {}).get("items", []) if isinstance(state.get("ok"), dict) else []
    check(
        [list(marker.values())] == rows,
        "open_store(path); conn.close(); an item inserted by another connection; read items",
        show_json(rows),
        show_json([list(marker.values())]),
        note="The store is a file any connection can read: keep nothing in memory only.",
    )


def test_identity_is_enforced_per_tenant(observed: Observed) -> None:
    seen, rng = seeded(observed, "identity_is_enforced_per_tenant")
    s = P.Inputs(rng)
    opened(seen)
    inserts = P.identity_inserts(s)
    results = listed(seen["inserts"], len(inserts), "the inserts", "results")
    store = Store()
    for n, ((table, row), got) in enumerate(zip(inserts, results, strict=True)):
        call = f"INSERT INTO {table} {show_json(row)}"
        if n > 0:
            call = f"after the inserts before it, {call}"
        if n in P.REFUSED:
            check(
                is_kind(got, "IntegrityError"),
                call,
                show_outcome(got) if "raised" in got else "the row was stored",
                "IntegrityError: that identity is already stored",
                note=UNIQUE_NOTE,
            )
            continue
        check(
            "ok" in got,
            call,
            show_outcome(got),
            "the row is stored: another tenant or source is another identity",
            note="Keep tenant and source in the key: an item id is unique only within its"
            " tenant's source. Columns you add need a default.",
        )
        identity = (row["tenant"], row["source"])
        if table == "items":
            store.items[(*identity, row["item_id"])] = (row["version"], row["payload"])
        elif table == "checkpoints":
            store.checkpoints[identity] = (row["cursor"], row["item_count"])
        else:
            store.failures[(*identity, row["item_id"])] = (row["reason"], None)
    judge_store(observed, seen.get("store"), store.rows(), "those inserts", UNIQUE_NOTE)


def test_reopening_keeps_the_data(observed: Observed) -> None:
    seen, rng = seeded(observed, "reopening_keeps_the_data")
    s = P.Inputs(rng)
    opened(seen)
    store = Store()
    first = store.ingest(P.TENANT, P.SOURCE, s.page("p1"), None, s.cursor("p1"))
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
    for state in (seen["state"], kept_state(observed, seen.get("kept"))):
        difference = state_difference(state, store.rows())
        check(difference is None, f"{call}; read every table", difference or "", "page 1, kept")
    equal(
        f"{call}; read_checkpoint(conn, {P.TENANT!r}, {P.SOURCE!r})",
        ok(seen["read"], "read_checkpoint(...)"),
        s.cursor("p1"),
    )
    second = store.ingest(P.TENANT, P.SOURCE, s.page("p2"), s.cursor("p1"), s.cursor("p2"))
    check(
        same_result(seen["next"], {"ok": second}),
        f"{call}; ingest page 2 from {s.cursor('p1')!r}",
        result_text(seen["next"]),
        expected_text({"ok": second}),
    )
    difference = state_difference(seen["state_after"], store.rows())
    check(difference is None, f"{call}; page 2; read every table", difference or "", "pages 1-2")
    judge_store(observed, seen.get("store"), store.rows(), f"{call}; page 2")


# ─────────────────────────────────────────────────────────────── step 2: checkpoints


def test_checkpoint_moves_only_by_compare_and_set(observed: Observed) -> None:
    seen, rng = seeded(observed, "checkpoint_moves_only_by_compare_and_set")
    s = P.Inputs(rng)
    opened(seen)
    cursors: dict[tuple[str, str], str | None] = {}
    done: list[str] = []
    calls = listed(seen["calls"], len(P.CHECKPOINT_CALLS), "the calls", "results")
    for call, got in zip(P.CHECKPOINT_CALLS, calls, strict=True):
        if call[0] == "read":
            _, tenant, source = call
            text = f"read_checkpoint(conn, {tenant!r}, {source!r})"
            want: Any = cursors.get((tenant, source))
            note = "None means no checkpoint yet; read only this tenant's source."
        else:
            _, tenant, source, before, after = call
            before, after = s.cursor(before), s.cursor(after)
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
    # advance_checkpoint alone never counts items: a first row's item_count is 0.
    want_rows = sort_rows([[t, src, c, 0] for (t, src), c in cursors.items()])
    for state in (seen["state"], kept_state(observed, seen.get("store"))):
        rows = ok(state, "the checkpoints table")["checkpoints"]
        equal(
            "the checkpoints table (tenant, source, cursor, item_count) after those calls",
            sort_rows(rows),
            want_rows,
            note="A first row is (tenant, source, next_cursor, 0); cursor is TEXT: the str"
            " it was given, even when it looks like a number.",
        )


# ─────────────────────────────────────────────────────────────── step 3: poison


def test_poison_items_are_classified(observed: Observed) -> None:
    seen, rng = seeded(observed, "poison_items_are_classified")
    items = P.classified_items(P.Inputs(rng), rng)
    reasons = listed(seen["reasons"], len(items), "poison_reason of each item", "reasons")
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
    order = P.rule_order_items()
    reasons = listed(seen["rule_order"], len(order), "poison_reason of each item", "reasons")
    for (label, item), got in zip(order, reasons, strict=True):
        call = f"poison_reason({label})"
        want = reason_for(item)
        equal(
            call,
            ok(got, call, show_json(want)),
            want,
            note="The first rule an item breaks decides, in order: id, version, payload. A"
            " payload too deeply nested to serialise (RecursionError) has no canonical form.",
        )


# ─────────────────────────────────────────────────────────────── step 4: upsert_item


def upsert_judge(name: str, which: str, note: str) -> Callable[[Observed], None]:
    def judge(observed: Observed) -> None:
        seen, rng = seeded(observed, name)
        s = P.Inputs(rng)
        calls = P.upsert_calls(s)[which]
        opened(seen)
        store = Store()
        done: list[str] = []
        results = listed(seen["calls"], len(calls), "the calls", "results")
        for (tenant, item), got in zip(calls, results, strict=True):
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
        judge_store(observed, seen.get("store"), store.rows(), "those calls", note)

    return judge


test_replace_never_accumulate = upsert_judge(
    "replace_never_accumulate",
    "replace",
    "INSERT ... ON CONFLICT (tenant, source, item_id) DO UPDATE SET version = excluded.version,"
    " payload = excluded.payload WHERE excluded.version > items.version; applied when"
    " cursor.rowcount == 1.",
)
test_newer_version_wins = upsert_judge(
    "newer_version_wins",
    "versions",
    "Only a strictly higher version replaces the stored row; equal or lower: unchanged, the"
    " stored row untouched.",
)

# ─────────────────────────────────────────────────────────────── step 5 and hidden: scenarios

test_replay_same_batch_same_fixed_point = scenario_judge(
    "replay_same_batch_same_fixed_point",
    ["replay"],
    "Replaying a page (lost acknowledgement, re-run, restart) must leave the store as one run"
    " left it, and be refused by compare-and-set.",
)
test_item_failure_holds_checkpoint = scenario_judge(
    "item_failure_holds_checkpoint",
    ["item_fault", "first_page_faults"],
    "Items and checkpoint in one transaction: when an item's write fails, ROLLBACK and raise;"
    " the checkpoint must not move.",
)
test_checkpoint_failure_rolls_back_items = scenario_judge(
    "checkpoint_failure_rolls_back_items",
    ["checkpoint_fault"],
    "One transaction: if the checkpoint write fails, the page's item writes roll back with it.",
)
test_stale_run_cannot_overwrite = scenario_judge(
    "stale_run_cannot_overwrite",
    ["stale"],
    "A late worker: its checkpoint must lose the compare-and-set (the persisted winner is"
    " reported), and an older version must never replace a newer one.",
)
test_tenants_never_collide = scenario_judge(
    "tenants_never_collide",
    ["tenants"],
    "Every key, checkpoint and failure record is scoped by (tenant, source).",
)
test_outcome_counts_every_item_once = scenario_judge(
    "outcome_counts_every_item_once",
    ["mixed"],
    "Every item of a page is counted exactly once: applied, unchanged or rejected.",
)
test_versions_decide_within_and_across_pages = scenario_judge(
    "versions_decide_within_and_across_pages",
    ["versions"],
    "Items are written in page order; only a strictly higher version replaces the stored row.",
)
test_payload_stored_as_canonical_json = scenario_judge(
    "payload_stored_as_canonical_json",
    ["canonical"],
    "Store canonical_json(item['payload']): any JSON value, None included; versions across"
    " SQLite's whole 64-bit range.",
)
test_every_poison_item_is_recorded = scenario_judge(
    "every_poison_item_is_recorded",
    ["every_poison"],
    "Every poison item gets a failure record with its reason; the good item is still applied.",
)
test_id_less_poison_recorded_where_it_was_seen = scenario_judge(
    "id_less_poison_recorded_where_it_was_seen",
    ["id_less"],
    'An item with no usable id is recorded as f"{expected_cursor}#{index}", seen_at ='
    " expected_cursor.",
)
test_replayed_poison_recorded_once = scenario_judge(
    "replayed_poison_recorded_once",
    ["poison_again"],
    "One failure record per identity, the first one: INSERT ... ON CONFLICT DO NOTHING; a"
    " rolled-back page leaves no record.",
)
test_cas_miss_writes_nothing = scenario_judge(
    "cas_miss_writes_nothing",
    ["cas"],
    "On a compare-and-set miss nothing of the page is written: no item, no failure record.",
)
test_database_error_rolls_back_and_propagates = scenario_judge(
    "database_error_rolls_back_and_propagates",
    ["failure_fault", "first_page_faults"],
    "A failing write is not poison: ROLLBACK, then raise the same exception.",
)
test_error_after_automatic_rollback_propagates = scenario_judge(
    "error_after_automatic_rollback_propagates",
    ["rollback_fault"],
    "When SQLite has already rolled back (conn.in_transaction is False), a second ROLLBACK"
    " raises 'cannot rollback - no transaction is active' and hides the real error: roll back"
    " only if conn.in_transaction.",
)
test_item_count_is_a_recount = scenario_judge(
    "item_count_is_a_recount",
    ["counts"],
    "item_count is how many items the tenant's source holds: recount it (SELECT COUNT(*)),"
    " never add the page's applied count to it.",
)
_sanitized_steps = scenario_judge(
    "reasons_are_sanitized", ["secrets"], "Reasons are the three constants, nothing else."
)


def test_reasons_are_sanitized(observed: Observed) -> None:
    seen, rng = seeded(observed, "reasons_are_sanitized")
    s = P.Inputs(rng)
    steps = P.scenarios(s)["secrets"]
    played = seen["secrets"]
    states = [got.get("state", {}) for got in played.get("steps", [])]
    for state in (*states, kept_state(observed, played.get("store"))):
        if "ok" not in state:
            continue
        for row in state["ok"].get("failures", []):
            text = json.dumps(row, ensure_ascii=False)
            check(
                P.SECRET not in text,
                steps_text(s, steps, 0) + "\n          then read the failures table",
                f"a failure record holding the secret token: {row_text('failures', row)}",
                "records that say why in chosen words, never the item's data",
                note="Never copy an exception's text or the item's values into a reason: the"
                " record is shown to operators. Use the three reason constants.",
            )
    _sanitized_steps(observed)


def test_poison_item_recorded_later_items_terminal(observed: Observed) -> None:
    seen, rng = seeded(observed, "poison_item_recorded_later_items_terminal")
    s = P.Inputs(rng)
    opened(seen)
    steps = P.scenarios(s)["budget"]
    store = Store()
    pages = listed(seen["pages"], len(steps), "the pages", "pages")
    for n, (step, page) in enumerate(zip(steps, pages, strict=True)):
        want = store.deliver(s, step)
        attempts = page["attempts"]
        first = attempts[0]
        call = steps_text(s, steps, n) + f"\n          (a worker retrying up to {P.BUDGET} times)"
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
    judge_store(observed, seen.get("store"), store.rows(), steps_text(s, steps, len(steps) - 1))


# ─────────────────────────────────────────────────────────────── hidden: the transaction


def transaction_problem(
    statements: list[str], locked: list[JSON], *, ends: tuple[str, ...]
) -> str | None:
    """What is wrong with one call's statements, or None."""
    kinds = [s for s in statements if s]
    begins = [i for i, s in enumerate(kinds) if s.startswith("BEGIN")]
    if len(begins) != 1:
        return f"{len(begins)} BEGIN statements (one page is one transaction: exactly one)"
    begin = begins[0]
    if kinds[begin] not in ("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE") or locked != [True]:
        return (
            f"{kinds[begin]}, and the write lock was not held after it: a deferred transaction"
            " takes the write lock only at its first write, so two workers can both read the"
            " old checkpoint; use BEGIN IMMEDIATE"
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


TRANSACTION_CASES = (
    ("first", "page 1 (with a poison item), no checkpoint yet", ("COMMIT",), 1),
    ("stale", "page 2 from no checkpoint, when one exists (a miss)", ("ROLLBACK", "COMMIT"), 0),
    ("next", "page 2 from page 1's cursor", ("COMMIT",), 1),
    ("failing", "page 3 while the checkpoint write fails", ("ROLLBACK",), 0),
)
#: The kept stores around each call, in order (the probe's own trigger commits once between).
KEPT = ("before", "after_first", "after_stale", "after_next", "faulted", "after_failing")


def test_interrupted_page_rolls_back(observed: Observed) -> None:
    seen, rng = seeded(observed, "interrupted_page_rolls_back")
    s = P.Inputs(rng)
    opened(seen)
    at = P.interrupted_at(s, rng)
    call = (
        f"ingest_page(conn, ..., items=page 1 with an item raising KeyboardInterrupt at index"
        f" {at}, expected_cursor=None, next_cursor={s.cursor('p1')!r})"
    )
    note = (
        "Roll back on every exception, BaseException included (except BaseException: ROLLBACK;"
        " raise): a KeyboardInterrupt mid-page must not leave the page's transaction open."
    )
    got = seen["interrupted"]
    not_done(got, call)
    check(is_kind(got, "KeyboardInterrupt"), call, show_outcome(got), "raises KeyboardInterrupt")
    check(
        seen["interrupted_in_transaction"] is False,
        call,
        f"conn.in_transaction is {show_json(seen['interrupted_in_transaction'])} afterwards",
        "False: the interrupted page was rolled back",
        note,
    )
    judge_store(observed, seen["after_interrupted"], Store().rows(), call, note)
    store = Store()
    want = {"ok": store.ingest(P.TENANT, P.SOURCE, s.page("p2"), None, s.cursor("p1"))}
    again = f"{call}\n          then the same page again, whole, on the same connection"
    result = seen["again"]
    not_done(result, again)
    if not same_result(result, want):
        raise Fail(message(again, result_text(result), expected_text(want), note))
    judge_store(observed, seen["after_again"], store.rows(), again, note)
    payload = (
        f"{again}\n          then page 2 with an item whose payload raises KeyboardInterrupt"
        f" while it is serialised, at index {at}"
    )
    got = seen["payload"]
    not_done(got, payload)
    check(
        is_kind(got, "KeyboardInterrupt"),
        payload,
        show_outcome(got) if "ok" not in got else result_text(got),
        "raises KeyboardInterrupt",
        "Catch TypeError, ValueError and RecursionError around canonical_json: those mean no"
        " canonical form. A KeyboardInterrupt means stop, not poison.",
    )
    check(
        seen["payload_in_transaction"] is False,
        payload,
        f"conn.in_transaction is {show_json(seen['payload_in_transaction'])} afterwards",
        "False: the interrupted page was rolled back",
        note,
    )
    judge_store(observed, seen["after_payload"], store.rows(), payload, note)


def test_explicit_transaction_per_page(observed: Observed) -> None:
    seen, rng = seeded(observed, "explicit_transaction_per_page")
    s = P.Inputs(rng)
    opened(seen)
    equal(
        "open_store(path).isolation_level",
        ok(seen["isolation_level"], "open_store(path).isolation_level"),
        None,
        note="isolation_level=None: sqlite3 then opens no transaction behind your back.",
    )
    for key, what, ends, _ in TRANSACTION_CASES:
        got = seen[key]
        call = f"the statements ingest_page sent for {what}"
        if "statements" not in got:
            raise Fail(message(call, show_outcome(got), "a traced call"))
        not_done(got["result"], "ingest_page(...)")
        problem = transaction_problem(got["statements"], got["locked"], ends=ends)
        shown = " · ".join(str(s) for s in got["statements"][:14] if s)
        check(
            problem is None,
            call,
            f"{learner_text(shown)}\n          ({problem})",
            "BEGIN IMMEDIATE, the page's writes, then " + " or ".join(ends),
        )
    # What committed is read from the database file's header, not from any trace.
    counts = [commits(observed, seen.get(key)) for key in KEPT]
    if None in counts:
        raise Fail(message("the store's file", "no readable database file", "a store"))
    deltas = [b - a for a, b in itertools.pairwise(c for c in counts if c is not None)]
    check(deltas[3] == 1, "a trigger installed between the calls", f"{deltas[3]} commits", "1")
    for (_, what, _, want), delta in zip(TRANSACTION_CASES, deltas[:3] + deltas[4:], strict=True):
        check(
            delta == want,
            f"ingest_page for {what}: transactions it committed (the database file's counter)",
            str(delta),
            str(want),
            note="One page is one transaction: it commits once, or (refused, failed) not at all.",
        )
    store = Store()
    store.ingest(P.TENANT, P.SOURCE, s.page("with_poison"), None, s.cursor("p1"))
    store.ingest(P.TENANT, P.SOURCE, s.page("p2"), s.cursor("p1"), s.cursor("p2"))
    judge_store(observed, seen.get("after_failing"), store.rows(), "pages 1 and 2, page 3 failing")


# ─────────────────────────────────────────────────────────────── hidden: concurrency


def test_concurrent_duplicates_one_durable_effect(observed: Observed) -> None:
    seen, rng = seeded(observed, "concurrent_duplicates_one_durable_effect")
    s = P.Inputs(rng)
    opened(seen)
    call = (
        f"{P.THREADS} workers, each with its own open_store(path), deliver page 1:"
        f" ingest_page(conn, expected_cursor=None, next_cursor={s.cursor('t1')!r}), each"
        " duplicate delivered as soon as the worker before it holds no lock"
    )
    store = Store()
    won = store.ingest(P.TENANT, P.SOURCE, s.page("for_threads"), None, s.cursor("t1"))
    lost = outcome(0, 0, 0, False, s.cursor("t1"))
    results = listed(seen["results"], P.THREADS, call, "results")
    for result in results:
        not_done(result, "ingest_page(...)")
    wanted = [{"ok": won}] + [{"ok": lost}] * (P.THREADS - 1)
    check(
        all(same_result(r, w) for r, w in zip(results, wanted, strict=True)),
        call,
        "; ".join(result_text(r) for r in results),
        f"{expected_text({'ok': won})}, then {P.THREADS - 1} times {expected_text({'ok': lost})}",
        note="One durable effect: the first worker's compare-and-set wins, every other one"
        " misses and writes nothing. Commit the items and the checkpoint together: a"
        " duplicate arriving between two transactions of one page wins the checkpoint.",
    )
    for state in (seen["state"], kept_state(observed, seen.get("store"))):
        difference = state_difference(state, store.rows())
        check(
            difference is None, call + "; then read every table", difference or "", "page 1, once"
        )


# ─────────────────────────────────────────────────────────────── hidden: a kill mid-page


def test_killed_mid_page_then_replay_converges(observed: Observed) -> None:
    seen, rng = seeded(observed, "killed_mid_page_then_replay_converges")
    s = P.Inputs(rng)
    opened(seen)
    store = Store()
    first = store.ingest(P.TENANT, P.SOURCE, s.page("p1"), None, s.cursor("p1"))
    check(
        same_result(seen["page1"], {"ok": first}),
        "ingest page 1",
        result_text(seen["page1"]),
        expected_text({"ok": first}),
    )
    call = (
        f"page 2 from {s.cursor('p1')!r}, in a process killed (os._exit) right after the page's"
        " third item is written, before anything commits"
    )
    exit_code = seen["child_exit"]
    check(
        exit_code == P.KILLED_EXIT,
        call,
        f"the process ended with exit code {show_json(exit_code)}",
        "it is killed while writing the third item",
        note="Write every valid new item of the page (the third one included).",
    )
    note = (
        "Items and checkpoint in one BEGIN IMMEDIATE ... COMMIT: nothing may be committed"
        " before the end of the page."
    )
    for state in (seen["after_kill"], kept_state(observed, seen.get("killed"))):
        difference = state_difference(state, store.rows())
        check(
            difference is None,
            call + "; then read every table",
            difference or "",
            "exactly the store before page 2: an uncommitted transaction leaves no trace",
            note=note,
        )
    again = store.ingest(P.TENANT, P.SOURCE, s.page("for_the_kill"), s.cursor("p1"), s.cursor("p2"))
    replay = seen.get("replay", seen.get("reopened", {}))
    check(
        same_result(replay, {"ok": again}),
        call + "; a new process opens the store and replays page 2",
        result_text(replay),
        expected_text({"ok": again}),
    )
    for state in (seen["after_replay"], kept_state(observed, seen.get("store"))):
        difference = state_difference(state, store.rows())
        check(difference is None, call + "; replay; read", difference or "", "pages 1-2, once")


# ─────────────────────────────────────────────────────────────── hidden: the state machine


def fault_text(fault: JSON) -> str:
    if fault.get("item"):
        return f"item {fault['item']!r}"
    return {"failures": "a failure record", "checkpoints": "the checkpoint"}.get(
        fault.get("table"), str(fault.get("table"))
    )


def sm_step_text(s: P.Inputs, step: JSON) -> str:
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
    items = ", ".join(json.dumps(spec, separators=(",", ":")) for spec in step["items"])
    return (
        f"{what}: ingest_page(conn, tenant={step['tenant']!r}, items=[{items}],"
        f" expected_cursor={s.cursor(step['expected'])!r},"
        f" next_cursor={s.cursor(step['next'])!r})"
    )


def sm_trace_text(s: P.Inputs, steps: Sequence[JSON], upto: int) -> str:
    start = max(0, upto + 1 - SHOWN_STEPS)
    lines = [f"{n}. {sm_step_text(s, st)}" for n, st in enumerate(steps[: upto + 1]) if n >= start]
    if start:
        lines.insert(0, f"(steps 0-{start - 1} omitted)")
    return (
        "a state machine of pages, redeliveries, faults, restarts and stale re-runs"
        ' ({"$float": "nan"} is a NaN):\n          ' + "\n          ".join(lines)
    )


def judge_example(observed: Observed, s: P.Inputs, steps: Sequence[JSON], seen: JSON) -> None:
    """Every step drawn here, answered in order, as the model says; then the kept store."""
    answers = seen.get("answers") if isinstance(seen, dict) else None
    if not isinstance(answers, list) or not answers:
        raise Fail(message(sm_trace_text(s, steps, 0), "no answer", "every step answered"))
    store = Store()
    for n, step in enumerate(steps):

        def call(n: int = n) -> str:  # the trace so far, written only for a failure
            return sm_trace_text(s, steps, n)

        if n >= len(answers):
            raise Fail(message(call(), "no answer for this step", "every step answered"))
        answer = answers[n]
        result = answer.get("result", {})
        if step["op"] in ("open", "restart"):
            not_done(result, "open_store(path)")
            if "ok" not in result:
                raise Fail(message(call(), show_outcome(result), "the store opens"))
            if step["op"] == "open":
                continue
        else:
            items = [P.decode(spec) for spec in step["items"]]
            fault = step.get("fault")
            if fault is not None:
                installed = answer.get("fault_installed", {})
                if "ok" not in installed:
                    raise Fail(
                        message(
                            call(),
                            f"the fault could not be installed: {show_outcome(installed)}",
                            "the store is free to change between pages",
                            "A transaction left open by an earlier call still holds the lock.",
                        )
                    )
                store.faults = [{"table": fault["table"], "item": fault["item"]}]
            want = store.ingest(
                step["tenant"],
                P.SOURCE,
                items,
                s.cursor(step["expected"]),
                s.cursor(step["next"]),
            )
            store.faults = []
            want_result = want if "raised" in want else {"ok": want}
            not_done(result, "ingest_page(...)")
            if not same_result(result, want_result):
                raise Fail(
                    message(
                        call(),
                        result_text(result),
                        expected_text(want_result),
                        result_note(result, want_result),
                    )
                )
        if answer.get("in_transaction") is not False:
            raise Fail(
                message(
                    call(),
                    f"conn.in_transaction is {show_json(answer.get('in_transaction'))} afterwards",
                    "False: every call ends its transaction",
                )
            )
        reads = listed(answer.get("read"), len(P.SM_TENANTS), call, "checkpoint reads")
        for tenant, got in zip(P.SM_TENANTS, reads, strict=True):
            want_cursor = store.cursor(tenant, P.SOURCE)
            if got != {"ok": want_cursor}:
                raise Fail(
                    message(
                        f"{call()}\n          then read_checkpoint(conn, {tenant!r}, {P.SOURCE!r})",
                        show_outcome(got),
                        show_json(want_cursor),
                    )
                )
        difference = state_difference(answer.get("state", {}), store.rows())
        if difference:
            raise Fail(
                message(
                    f"{call()}\n          then read every table",
                    difference,
                    "the store the spec gives after these steps: each step converges to one"
                    " successful run's state",
                )
            )
    if len(answers) != len(steps):
        raise Fail(message(sm_trace_text(s, steps, len(steps) - 1), "more answers", "these"))
    judge_store(observed, seen.get("store"), store.rows(), sm_trace_text(s, steps, len(steps) - 1))


def test_state_machine_invariants_hold(observed: Observed) -> None:
    for index in range(P.SM_PROBES):
        seen, rng = seeded(observed, f"state_machine_{index + 1}")
        s = P.Inputs(rng)
        plan = P.machine_plan(rng)
        examples = listed(seen.get("examples"), len(plan), "the state machine", "examples")
        for steps, example in zip(plan, examples, strict=True):
            if example.get("answers"):
                not_done(example["answers"][0].get("result", {}), "open_store(path)")
            judge_example(observed, s, steps, example)
