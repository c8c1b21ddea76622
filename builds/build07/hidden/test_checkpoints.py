"""Build 07's judges of read_checkpoint and advance_checkpoint (step 2): the
checkpoint moves only by compare-and-set.
"""

from __future__ import annotations

from typing import Any

from builds.build07.hidden import probes as P
from builds.build07.hidden.expected import opened, seeded, sort_rows
from builds.build07.hidden.model import kept_state
from grader.suites.judging import Observed, equal, listed, ok


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
