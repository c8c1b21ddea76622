"""The Launch row (`etl.rows`), and the fixture data it parses."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

import etl
from etl import Launch, ParseError


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


@pytest.mark.parametrize("result", [["not", "a", "dict"], "text", None])
def test_from_api_refuses_what_is_not_a_json_object(result: object) -> None:
    """A results entry that is not an object is a ParseError saying so, not an AttributeError."""
    with pytest.raises(ParseError, match="launch is not a JSON object"):
        Launch.from_api(result)


def test_a_launch_without_a_mission_round_trips_with_mission_null() -> None:
    """No mission: to_api sends ``"mission": null`` and from_api reads mission and orbit as None."""
    bare = dataclasses.replace(etl.launches()[0], mission=None, orbit=None)
    assert bare.to_api()["mission"] is None
    assert Launch.from_api(bare.to_api()) == bare


def test_a_boolean_coordinate_is_refused() -> None:
    """``true`` parses as 1.0 to float(), yet it is no coordinate."""
    result = etl.launch_results()[0]
    result["pad"]["latitude"] = True
    with pytest.raises(ParseError, match="pad latitude: expected a finite number, got True"):
        Launch.from_api(result)
