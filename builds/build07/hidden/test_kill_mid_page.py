"""Build 07's judge of a process killed mid-page: nothing committed, and the replay
converges.
"""

from __future__ import annotations

from builds.build07.hidden import probes as P
from builds.build07.hidden.expected import (
    expected_text,
    opened,
    result_text,
    same_result,
    seeded,
    state_difference,
)
from builds.build07.hidden.model import Store, kept_state
from grader.suites.judging import Observed, check
from workbook.checking.feedback import show_json


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
