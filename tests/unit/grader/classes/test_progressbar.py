"""`grader.classes.progressbar`: one line of counts on stderr, in place on a terminal, a line
per tenth elsewhere, and silent once its stream breaks."""

from __future__ import annotations

import io
import re

from grader.classes.progressbar import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Broken(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_off_a_terminal_it_writes_a_line_per_tenth() -> None:
    out = io.StringIO()
    bar = Progress(40, out, width=10)
    for i in range(40):
        bar.advance(cached=i % 2 == 0)
    lines = out.getvalue().splitlines()
    assert len(lines) == 11  # the first notebook, then one a tenth
    assert lines[0].startswith("grading ░░░░░░░░░░ 1/40 notebooks (1 from cache)")
    assert re.fullmatch(r"grading █░{9} 4/40 notebooks \(2 from cache\) +\d+\.\d s", lines[1])
    assert lines[-1].startswith("grading ██████████ 40/40 notebooks (20 from cache)")
    assert bar.done == 40 and bar.cached == 20


def test_on_a_terminal_it_redraws_in_place_and_ends_the_line() -> None:
    out = Terminal()
    bar = Progress(3, out, width=3)
    for _ in range(3):
        bar.advance()
    text = out.getvalue()
    assert text.count("\r") == 3
    assert text.endswith("\n") and text.count("\n") == 1
    assert "\rgrading ██░ 2/3 notebooks" in text


def test_an_empty_class_still_has_a_total() -> None:
    bar = Progress(0, io.StringIO())
    assert bar.total == 1


def test_a_broken_stream_turns_the_bar_off_without_stopping() -> None:
    bar = Progress(5, Broken())
    for _ in range(5):
        bar.advance()
    assert bar.off and bar.done == 5
    closed = io.StringIO()
    closed.close()
    late = Progress(2, closed)
    late.advance()
    assert late.off and not late.tty
