"""`workbook.commands.parts`: parts in lanes, their output whole, their proof kept under its key."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from workbook.commands import parts
from workbook.commands.parts import Part, run_parts, tree_key


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(parts, "CACHE", tmp_path / "cache")
    return tmp_path / "cache"


def say(*lines: str, code: int = 0) -> tuple[str, ...]:
    """A command that prints `lines` slowly enough to interleave, then exits `code`."""
    script = f"import sys, time\nfor x in {list(lines)!r}:\n    print(x, flush=True)\n"
    script += f"    time.sleep(0.05)\nsys.exit({code})"
    return (sys.executable, "-c", script)


def test_part_functions_run_in_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[Any] = []

    def first() -> int:
        calls.append(1)
        return 0

    listed = [Part("first part", call=first), Part("second part", call=lambda: 3)]
    assert run_parts(listed, None) == 1
    out = capsys.readouterr().out
    assert calls == [1] and "FAILED (exit 3)" in out and "make check failed: second part." in out


def test_lanes_run_at_once_and_each_part_reads_whole(capfd: pytest.CaptureFixture[str]) -> None:
    listed = [
        Part("alpha part", (say("a1", "a2", "a3", "a4"),), lane=0),
        Part("beta part", (say("b1", "b2", "b3", "b4"),), lane=1),
        Part("gamma part", (say("g1"),), lane=1),
    ]
    assert run_parts(listed, None) == 0
    out = capfd.readouterr().out
    assert "3 lanes" not in out and "2 lanes at once" in out
    for name, lines in (("alpha", "a1\na2\na3\na4\n"), ("beta", "b1\nb2\nb3\nb4\n")):
        assert f"━━ {name} part ━━\n{lines}" in out, out
    summary = out.split("━━ summary ━━")[1]
    assert summary.index("alpha") < summary.index("beta") < summary.index("gamma")
    assert "at once" in summary and "of parts" in summary


def test_a_passed_part_is_cached_on_its_key_and_a_failed_one_never(
    capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    touch = (sys.executable, "-c", f"open({str(ran)!r}, 'a').write('x')")
    part = Part("keyed part", (touch,), key="k1")
    assert run_parts([part], None) == 0
    assert run_parts([part], None) == 0
    assert ran.read_text() == "x"  # once: the second run was served from the cache
    assert "cached: passed on these exact inputs at" in capfd.readouterr().out
    assert run_parts([Part("keyed part", (touch,), key="k2")], None) == 0  # new inputs: runs
    assert run_parts([part], None, fresh=True) == 0  # FRESH=1: runs, and keeps the pass
    assert ran.read_text() == "xxx"
    assert run_parts([part], None) == 0
    assert ran.read_text() == "xxx"
    capfd.readouterr()
    failing = Part("failing part", (say("no", code=1),), key="k3")
    assert run_parts([failing], None) == 1
    assert run_parts([failing], None) == 1
    assert "cached" not in capfd.readouterr().out


def test_a_key_changes_with_any_byte_of_its_files(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one")
    first = tree_key("label", ["a.txt", "gone.txt"], root=tmp_path)
    assert first == tree_key("label", ["a.txt", "gone.txt"], root=tmp_path)
    (tmp_path / "a.txt").write_text("two")
    assert tree_key("label", ["a.txt", "gone.txt"], root=tmp_path) != first
    (tmp_path / "gone.txt").write_text("")
    assert tree_key("label", ["a.txt", "gone.txt"], root=tmp_path) != first
    assert tree_key("other", ["a.txt"], root=tmp_path) != tree_key(
        "label", ["a.txt"], root=tmp_path
    )
