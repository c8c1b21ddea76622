"""Build 07's judges, their shared half: comparing observations with the model's.

The judges are the ``test_*.py`` beside this module, one per step of notebook 07 and one per
hidden concern (the transaction, concurrency, a kill mid-page, the state machine): one
``test_<name>(observed)`` per graded test in ``workbook.toml``. Expected outcomes and states
come from `model.Store`, the spec written as dictionaries: every scenario the probes played,
and every step of the state machine, is run through it step by step, and the first step whose
outcome or store differs is the feedback, with the steps that led there (`judge_steps`,
`scenario_judge`). Nothing expected ever enters the child.

What the probes report is a claim, so no judge stops there. Every probe is seeded: the judge
draws the submission's own launches, cursors and ids again (`seeded`, `Observed.seeded` bound
to this build's probes; `probes.Inputs`), and the state machine's steps too, so each step must
be answered, in order, for the steps drawn here. And the stores themselves are read here
(`model.kept_state`, `model.kept_schema`, `judge_store`): the schema from the database file,
the rows a scenario left from the file, the transactions a page committed from the file's
header (`model.commits`), not from a trace the learner's objects could rewrite. Judging the
same observations twice gives the same verdicts. No judges module is imported here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from builds.build07.hidden import probes as P
from builds.build07.hidden.model import kept_state, play
from grader.suites.judging import JSON, Fail, Observed, is_kind, learner_text, not_done
from workbook.checking.feedback import message, show_json, show_outcome

SHOWN_STEPS = 12


#: ``seeded(observed, name)``: the probe's observation and the parent's own generator of its
#: inputs, `Observed.seeded` bound to this build's probes.
seeded = partial(Observed.seeded, probes=P.PROBES)


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
