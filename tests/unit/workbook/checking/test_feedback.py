"""`workbook.checking.feedback`: the same value reads the same, in any process."""

from __future__ import annotations

import collections
import math
import os
import subprocess
import sys

import pytest

from workbook.checking.feedback import DEPTH, show, stable_repr
from workbook.shared.manifest import repo_root


def test_a_set_reads_the_same_under_every_hash_seed() -> None:
    # A set's order follows hash(), which neither a kernel nor the grader pins.
    script = (
        "from workbook.checking.feedback import show; print(show({'kiwi': {'fig', 'yam', 'pea'}}))"
    )
    shown = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=repo_root(),
        ).stdout
        for seed in ("1", "2", "3", "4", "5")
    }
    assert shown == {"{'kiwi': {'fig', 'pea', 'yam'}}\n"}


def _itself() -> list[object]:
    value: list[object] = [1]
    value.append(value)
    return value


def _deep(levels: int) -> list[object]:
    value: list[object] = []
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, (2,)], "b": ()},
        ("x",),
        [math.nan, -math.inf, b"\x00", None, "text"],
        set(),
        frozenset(),
        frozenset({1, 2}),
        collections.OrderedDict(a={1}),
        _itself(),
        _deep(DEPTH + 10),
    ],
    ids=repr,
)
def test_anything_but_a_sets_order_reads_as_repr_has_it(value: object) -> None:
    assert stable_repr(value) == repr(value)


def test_show_sorts_sets_inside_containers() -> None:
    assert show([{"b", "a"}, ({"d", "c"},)]) == "[{'a', 'b'}, ({'c', 'd'},)]"
