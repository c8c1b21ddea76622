"""Build 07's judges of ingest_page's transaction: one BEGIN IMMEDIATE ... COMMIT per
page (the statements sent, the commits in the file's header), rolled back when
interrupted.
"""

from __future__ import annotations

import itertools

from builds.build07.hidden import probes as P
from builds.build07.hidden.expected import (
    expected_text,
    judge_store,
    opened,
    result_text,
    same_result,
    seeded,
)
from builds.build07.hidden.model import Store, commits
from grader.suites.judging import (
    JSON,
    Fail,
    Observed,
    check,
    equal,
    is_kind,
    learner_text,
    not_done,
    ok,
)
from workbook.checking.feedback import message, show_json, show_outcome


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
