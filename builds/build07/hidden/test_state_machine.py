"""Build 07's judge of the state machine: pages, redeliveries, faults, restarts and
stale re-runs, every step answered as the model says.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from builds.build07.hidden import probes as P
from builds.build07.hidden.expected import (
    SHOWN_STEPS,
    expected_text,
    judge_store,
    result_note,
    result_text,
    same_result,
    seeded,
    state_difference,
)
from builds.build07.hidden.model import Store
from grader.suites.judging import JSON, Fail, Observed, listed, not_done
from workbook.checking.feedback import message, show_json, show_outcome


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
