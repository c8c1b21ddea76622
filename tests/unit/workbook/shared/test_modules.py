"""`workbook.shared.modules`: fresh modules for text, `registered` for the time code runs,
`import_path` once per name, and `parse` from many threads at once (CPython gh-106905 on 3.11.7
and older)."""

from __future__ import annotations

import ast
import linecache
import sys
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from workbook.shared.modules import execute, fresh_module, import_path, parse, registered

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


def test_parse_gives_a_tree_and_raises_as_ast_parse_does() -> None:
    tree = parse("x = 1\n", "cell.py")
    assert isinstance(tree.body[0], ast.Assign)
    with pytest.raises(SyntaxError) as raised:
        parse("def f(:\n    pass\n", "cell.py")
    assert (raised.value.filename, raised.value.lineno) == ("cell.py", 1)


def test_fresh_modules_are_empty_new_and_in_no_registry() -> None:
    first, second = fresh_module("answers"), fresh_module("answers", "/tmp/answers.py")
    assert first is not second and "answers" not in sys.modules
    assert not hasattr(first, "__file__") and second.__file__ == "/tmp/answers.py"


def test_registered_holds_the_module_only_while_the_block_runs() -> None:
    """Whatever held the name before is put back, even after an exception."""
    module = fresh_module("workbook_test_registered")
    with registered(module) as inside:
        assert sys.modules["workbook_test_registered"] is module is inside
    assert "workbook_test_registered" not in sys.modules
    other = fresh_module("json")
    with pytest.raises(RuntimeError), registered(other):
        assert sys.modules["json"] is other
        raise RuntimeError("inside")
    assert sys.modules["json"] is not other and sys.modules["json"].__name__ == "json"


def test_execute_runs_text_in_the_module_with_its_own_future_imports() -> None:
    """A ``from __future__`` line applies to its text alone; a traceback shows the text's lines."""
    module = fresh_module("cells")
    lazy = "from __future__ import annotations\ndef f(x: Missing) -> int:\n    return 1\n"
    execute(module, lazy, "c1.py")
    assert module.f(0) == 1
    with pytest.raises(NameError):
        execute(module, "def g(x: Missing) -> int:\n    return 2\n", "c2.py")
    with pytest.raises(ZeroDivisionError) as raised:
        execute(module, "A = 1\nB = A / 0\n", "c3.py")
    assert module.A == 1
    assert linecache.getline("c3.py", 2) == "B = A / 0\n"
    assert "B = A / 0" in "".join(traceback.format_exception(raised.value))


def test_import_path_imports_once_and_a_failure_leaves_nothing(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text("COUNT = [1]\n", encoding="utf-8")
    bad = tmp_path / "bad.py"
    bad.write_text("raise ImportError('broken on purpose')\n", encoding="utf-8")
    try:
        first = import_path(good, "workbook_test_good")
        good.write_text("COUNT = [2]\n", encoding="utf-8")
        assert import_path(good, "workbook_test_good") is first and first.COUNT == [1]
        with pytest.raises(ImportError, match="broken on purpose"):
            import_path(bad, "workbook_test_bad")
        assert "workbook_test_bad" not in sys.modules
        with pytest.raises(ImportError, match="cannot be imported"):
            import_path(tmp_path / "notes.txt", "workbook_test_txt")
    finally:
        sys.modules.pop("workbook_test_good", None)
