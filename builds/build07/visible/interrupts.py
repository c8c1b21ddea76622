"""Visible checks of build 07 for what stops a page half-way: a payload nested too deep to
serialise (poison, like any payload with no canonical form) and a KeyboardInterrupt in the
middle of a page (rolled back, never recorded as poison), and the payloads that cause them
(which the hidden probes use too). `answer_checks` includes these checks last.

Each check opens stores of its own (`sqlite_harness`) and keeps nothing: running one twice
gives the same verdict. This module ships to learners and holds no reference seam.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from builds.build07.visible.sqlite_harness import (
    NOT_CANONICAL,
    ROLLBACK_NOTE,
    expect_outcome,
    expect_same_state,
    item,
    page,
    scratch_store,
)
from workbook.checks import Checks, expect, expect_equal, expect_raises

CHECKS = Checks("07")

#: Lists inside lists, far past any recursion limit: json.dumps raises RecursionError.
DEPTH = 3_000


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


class Interrupting(Mapping[str, Any]):
    """An item that raises KeyboardInterrupt as soon as it is read: Ctrl-C mid-page."""

    def __getitem__(self, key: str) -> Any:
        raise KeyboardInterrupt("Ctrl-C while reading an item")

    def __iter__(self) -> Iterator[str]:
        raise KeyboardInterrupt("Ctrl-C while reading an item")

    def __len__(self) -> int:
        raise KeyboardInterrupt("Ctrl-C while reading an item")


class InterruptingPayload(dict[str, Any]):
    """A payload that raises KeyboardInterrupt while json.dumps reads it (it asks a dict
    subclass for its items): Ctrl-C during the canonical-form check."""

    def items(self) -> Any:
        raise KeyboardInterrupt("Ctrl-C while serialising a payload")

    def keys(self) -> Any:
        raise KeyboardInterrupt("Ctrl-C while serialising a payload")


@CHECKS.add(step="poison_reason")
def deep_payload_is_poison(ns: Any) -> None:
    got = ns.poison_reason({"id": "deep", "version": 1, "payload": nested(DEPTH)})
    expect_equal(
        f"poison_reason({{'id': 'deep', 'version': 1, 'payload': [[[...]]]}}), {DEPTH} lists deep",
        got,
        NOT_CANONICAL,
        note="Too deep to serialise is no canonical form either: catch RecursionError with"
        " TypeError and ValueError.",
    )


@CHECKS.add(step="ingest_page")
def ctrl_c_mid_page_rolls_back(ns: Any) -> None:
    note = "Roll back on BaseException, not only Exception: " + ROLLBACK_NOTE
    with scratch_store(ns) as s:
        empty = s.state()
        call = "ingest_page(conn, ..., page 1 with a KeyboardInterrupt at its third item)"
        items = [item(70), item(71), Interrupting(), item(72)]
        expect_raises(KeyboardInterrupt, call, lambda: s.ingest(items, None, "p1"), note)
        expect(not s.conn.in_transaction, call, "a transaction still open", "none open", note)
        expect_same_state(call, s.state(), empty, "nothing written", note)
        again = f"{call}; then page 1 again, whole, on the same connection"
        expect_outcome(again, s.ingest(page(70), None, "p1"), (4, 0, 0, True, "p1"), note)
        after = s.state()
        stop = {"id": "stop", "version": 1, "payload": InterruptingPayload(a=1)}
        call = "then page 2, its second item's payload raising KeyboardInterrupt as it is read"
        items = [item(80), stop, item(81)]
        expect_raises(KeyboardInterrupt, call, lambda: s.ingest(items, "p1", "p2"), note)
        expect(not s.conn.in_transaction, call, "a transaction still open", "none open", note)
        expect_same_state(call, s.state(), after, "page 2 written not at all", note)
