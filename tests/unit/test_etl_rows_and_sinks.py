"""The Launch row, the fixture data and the sinks."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from pathlib import Path

import pytest

import etl
from etl import JsonlSink, Launch, MemorySink, ParseError, read_jsonl


def test_fixture_has_a_few_hundred_distinct_launches() -> None:
    """300 launches, unique ids, in launch order."""
    launches = etl.launches()
    assert len(launches) == 300
    assert len({launch.id for launch in launches}) == 300
    assert [launch.net for launch in launches] == sorted(launch.net for launch in launches)


def test_launch_holds_only_json_native_values() -> None:
    """asdict(launch) round-trips through strict JSON unchanged."""
    for launch in etl.launches():
        data = dataclasses.asdict(launch)
        assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert any(isinstance(f.type, str) and "float" in f.type for f in dataclasses.fields(Launch))


def test_from_api_round_trips() -> None:
    """to_api and from_api are inverses on the fixture."""
    for launch in etl.launches()[:50]:
        assert Launch.from_api(launch.to_api()) == launch


def test_launch_is_frozen() -> None:
    launch = etl.launches()[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        launch.name = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.pop("id"), "'id'"),
        (lambda r: r.update(status=None), "'status'"),
        (lambda r: r["pad"].update(latitude="north"), "latitude"),
        (lambda r: r["pad"].update(longitude=math.nan), "longitude"),
    ],
)
def test_from_api_names_what_is_wrong(mutate, field: str) -> None:  # type: ignore[no-untyped-def]
    """A missing or mistyped field is a ParseError naming it, never a default."""
    result = etl.launch_results()[0]
    mutate(result)
    with pytest.raises(ParseError, match=field):
        Launch.from_api(result)


def test_from_api_accepts_string_coordinates() -> None:
    """Launch Library 2 has sent coordinates as strings; they parse to floats."""
    result = etl.launch_results()[0]
    result["pad"]["latitude"] = "28.5"
    assert Launch.from_api(result).latitude == 28.5


def test_each_call_hands_out_fresh_fixture_results() -> None:
    """Changing what one call returned, however deep, changes nothing the next call returns."""
    first = etl.launch_results()
    first[0]["pad"]["location"]["name"] = "changed"
    first.pop()
    again = etl.launch_results()
    assert again[0]["pad"]["location"]["name"] != "changed"
    assert len(again) == 300
    assert [Launch.from_api(r) for r in again] == etl.launches()


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
