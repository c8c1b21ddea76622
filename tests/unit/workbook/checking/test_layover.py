"""`workbook.checking.layover`: layers that leave only the seams behind, a rewrite that behaves the
same, and the one scoring rule of a learner test."""

from __future__ import annotations

import asyncio
import types
from typing import Any

from workbook.checking.layover import (
    LaidOver,
    defined_names,
    over,
    same_behaviour,
    score,
    seal,
    wrap_seams,
)

CODE = """
import itertools

class Counter:
    start = 0

    def __init__(self, step):
        self.step = step

    @classmethod
    def from_ten(cls):
        return cls(10)

    @staticmethod
    def double(x):
        total = x + x
        return total

    def walk(self, n):
        seen = []
        for i in range(n):
            value = i * self.step
            seen.append(value)
        yield from seen


async def twice(op):
    first = await op()
    second = await op()
    return [first, second]


def tally(rows):
    counts = {}
    for row in rows:
        try:
            counts[row] = counts.get(row, 0) + 1
        except TypeError as err:
            counts[repr(err)] = 1
    return sorted(counts.items(), key=lambda kv: kv[0])
"""


def module(*texts: str) -> dict[str, Any]:
    space: dict[str, Any] = {"__name__": "m"}
    for text in texts:
        exec(compile(text, "<m>", "exec"), space)
    return space


def behaviour(space: dict[str, Any]) -> list[Any]:
    async def op() -> int:
        return 7

    counter = space["Counter"].from_ten()
    return [
        list(counter.walk(3)),
        space["Counter"].double(4),
        asyncio.run(space["twice"](op)),
        space["tally"](["a", "b", "a"]),
    ]


def test_the_rewrite_behaves_the_same_and_shares_no_code() -> None:
    names = defined_names([CODE])
    assert names == ["Counter", "twice", "tally"]
    original = module(CODE)
    rewritten = module(same_behaviour(CODE, names), wrap_seams(names))
    assert behaviour(rewritten) == behaviour(original)
    for pick in (
        lambda s: s["tally"],
        lambda s: s["twice"],
        lambda s: s["Counter"].walk,
        lambda s: s["Counter"].__dict__["double"].__func__,
    ):
        assert pick(rewritten).__code__.co_code != pick(original).__code__.co_code
    assert "counts_w" in same_behaviour(CODE, names)  # a local renamed, a parameter kept
    assert "def tally(rows)" in same_behaviour(CODE, names)


def test_a_layer_leaves_only_the_names_it_rebinds_and_stacks() -> None:
    bump = LaidOver("bump", "adds one", "import math as _laid_math\n" + over("f", BUMP))
    space = module("def f(x):\n    return x\n", bump.source, bump.source)
    assert space["f"](1) == 3  # two layers, each wrapping the one below
    assert not [n for n in space if "laid" in n.lower()]
    assert seal(bump.source) == bump.source  # sealing twice changes nothing
    no_newline = module("g = 1", seal("g = g + 1"))
    assert no_newline["g"] == 2


BUMP = "def f(x):\n    return under(x) + 1\n"


def test_score_is_a_share_with_a_gate_and_wheats() -> None:
    words = {"a": "bug a", "b": "bug b", "c": "bug c"}
    both: dict[str, Any] = {"points": 3, "catches": ["a", "b", "c"], "gate": "a", "words": words}
    full = score(caught={"a": True, "b": True, "c": True}, **both)
    assert (full.points, full.done, full.lines) == (3, True, ())
    part = score(caught={"a": True, "b": False, "c": True}, **both)
    assert (part.points, part.done) == (2, False) and part.lines == ("it still passes when bug b",)
    no_gate = score(caught={"a": False, "b": True, "c": True}, **both)
    assert no_gate.points == 0 and "bug a: the bug it must catch first" in no_gate.lines[0]
    untried = score(caught={"a": True}, **both)
    assert untried.points == 1  # a bug not tried counts as missed
    wheat = score(caught={"a": True, "b": True, "c": True}, wheat_failure="fails", **both)
    assert (wheat.points, wheat.done, wheat.problem) == (0, False, "fails")


def test_wrappers_keep_every_kind_of_function() -> None:
    text = "async def agen():\n    yield 1\n    yield 2\n"
    space = module(text, wrap_seams(["agen"]))

    async def collect() -> list[int]:
        return [x async for x in space["agen"]()]

    assert asyncio.run(collect()) == [1, 2]
    assert isinstance(space["agen"], types.FunctionType)
