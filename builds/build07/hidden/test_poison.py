"""Build 07's judges of the poison check (step 3): each item's reason, the first
rule it breaks.
"""

from __future__ import annotations

from builds.build07.hidden import probes as P
from builds.build07.hidden.expected import seeded
from builds.build07.hidden.model import BAD_VERSION, MISSING_ID, NOT_CANONICAL, reason_for
from grader.suites.judging import Observed, equal, listed, ok
from workbook.checking.feedback import show_json


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
