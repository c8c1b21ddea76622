"""The sinks (`etl.sinks`): the append-only JSONL file, the in-memory sink, and reading back."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from pathlib import Path

import pytest

import etl
from etl import JsonlSink, Launch, MemorySink, ParseError, read_jsonl


def test_jsonl_sink_appends_one_object_per_line(tmp_path: Path) -> None:
    """Two loads of the same rows append them twice: the file sink is not idempotent."""
    path = tmp_path / "out.jsonl"
    sink = JsonlSink(path)
    rows = etl.launches()[:3]
    assert asyncio.run(sink.load(rows)) == 3
    assert asyncio.run(sink.load(rows)) == 3
    assert asyncio.run(sink.load([])) == 0
    written = read_jsonl(path)
    assert len(written) == 6
    assert [Launch(**obj) for obj in written] == rows + rows


def test_jsonl_sink_refuses_nan_and_writes_nothing(tmp_path: Path) -> None:
    """A NaN row fails the whole batch before a byte is written."""
    path = tmp_path / "out.jsonl"
    good = etl.launches()[0]
    bad = dataclasses.replace(good, latitude=math.nan)
    with pytest.raises(ValueError):
        asyncio.run(JsonlSink(path).load([good, bad]))
    assert read_jsonl(path) == []


def test_memory_sink_counts_rows_and_calls() -> None:
    sink = MemorySink()
    rows = etl.launches()[:2]
    assert asyncio.run(sink.load(rows)) == 2
    assert asyncio.run(sink.load(rows[:1])) == 1
    assert (len(sink.rows), sink.calls) == (3, [2, 1])


def test_a_torn_last_line_is_skipped_and_cut_before_the_next_write(tmp_path: Path) -> None:
    """A crash mid-write leaves half a line: readers skip it, the next load replaces it."""
    path = tmp_path / "out.jsonl"
    first, second = etl.launches()[:2]
    asyncio.run(JsonlSink(path).load([first]))
    with path.open("a", encoding="utf-8") as out:
        out.write(etl.row_to_json(second)[:40])  # the process died here
    assert [Launch(**obj) for obj in read_jsonl(path)] == [first]
    asyncio.run(JsonlSink(path).load([second]))
    assert [Launch(**obj) for obj in read_jsonl(path)] == [first, second]
    assert path.read_text(encoding="utf-8").count("\n") == 2


def test_a_complete_last_object_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    first, second = etl.launches()[:2]
    path.write_text(etl.row_to_json(first), encoding="utf-8")
    asyncio.run(JsonlSink(path).load([second]))
    assert [Launch(**obj) for obj in read_jsonl(path)] == [first, second]


def test_a_bad_line_in_the_middle_is_a_parse_error(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text('{"a": 1}\nnot json\n{"b": 2}\n', encoding="utf-8")
    with pytest.raises(ParseError, match="line 2"):
        read_jsonl(path)


def test_row_to_json_is_one_line_keeping_non_ascii_and_refusing_infinity() -> None:
    """One line of strict JSON, names written as they are, an infinite coordinate refused."""
    row = dataclasses.replace(etl.launches()[0], name="Zoë\nLaunch")
    line = etl.row_to_json(row)
    assert "\n" not in line and "Zoë" in line
    assert Launch(**json.loads(line)) == row
    with pytest.raises(ValueError, match="JSON compliant"):
        etl.row_to_json(dataclasses.replace(row, longitude=math.inf))


def test_reading_an_absent_file_gives_no_rows(tmp_path: Path) -> None:
    """An absent file holds none; a sink that never loaded has created nothing."""
    path = tmp_path / "never.jsonl"
    assert read_jsonl(path) == []
    assert asyncio.run(JsonlSink(path).load([])) == 0
    assert not path.exists()


def test_sinks_show_what_they_hold() -> None:
    """The reprs name the file, or count the rows and calls."""
    sink = MemorySink()
    asyncio.run(sink.load(etl.launches()[:3]))
    assert repr(sink) == "MemorySink(rows=3, calls=1)"
    assert repr(JsonlSink("out.jsonl")) == "JsonlSink('out.jsonl')"
