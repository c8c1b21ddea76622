"""Build 07's judges of upsert_item (step 4): replace, never accumulate; only a newer
version wins.
"""

from __future__ import annotations

from collections.abc import Callable

from builds.build07.hidden import probes as P
from builds.build07.hidden.expected import judge_store, opened, seeded, state_difference
from builds.build07.hidden.model import Store
from grader.suites.digest import canonical_json
from grader.suites.judging import Observed, check, equal, listed, ok


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
