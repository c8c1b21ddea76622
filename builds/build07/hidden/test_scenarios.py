"""Build 07's judges of ingest_page's scenarios (step 5 and hidden): each played step
by step through the model, then its kept store; poison recorded, reasons
sanitized.
"""

from __future__ import annotations

import json

from builds.build07.hidden import probes as P
from builds.build07.hidden.expected import (
    expected_text,
    judge_store,
    opened,
    result_note,
    result_text,
    row_text,
    same_result,
    scenario_judge,
    seeded,
    state_difference,
    steps_text,
)
from builds.build07.hidden.model import Store, kept_state
from grader.suites.judging import Fail, Observed, check, listed, not_done
from workbook.checking.feedback import message, show_outcome

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
