"""`workbook.shared.modules.parse` from many threads at once (CPython gh-106905 on 3.11.7 and
older)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from workbook.shared.modules import parse

#: Deep enough that the converter recurses, short enough to parse in microseconds.
NESTED = "x = " + "(" * 40 + "1" + ")" * 40 + "\n" + "def f():\n    return [[[[1]]]]\n" * 20


def _hammer(parser: Callable[[str], ast.Module]) -> list[str]:
    def work(_: int) -> str:
        try:
            for _ in range(200):
                parser(NESTED)
        except SystemError as exc:
            return str(exc)
        return ""

    with ThreadPoolExecutor(max_workers=4) as pool:
        return [e for e in pool.map(work, range(8)) if e]


def test_parsing_in_threads_never_trips_the_shared_recursion_counter() -> None:
    assert _hammer(parse) == []
