"""Build 07's judge of concurrent duplicate deliveries: one durable effect."""

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
from builds.build07.hidden.model import Store, kept_state, outcome
from grader.suites.judging import Observed, check, listed, not_done


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
