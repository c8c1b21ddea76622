"""The row the pipeline moves: one rocket launch, shaped after Launch Library 2.

A `Launch` is a frozen dataclass holding only JSON-native values (str, float, None), so
`dataclasses.asdict(launch)` is its whole content and a canonical JSON form can be computed
from it. The pad's latitude and longitude are floats, which is how a NaN can sneak in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from etl.errors import ParseError


@dataclass(frozen=True)
class Launch:
    """One launch. Equal launches are the same row; any changed field is a different row."""

    id: str
    name: str
    net: str
    """No Earlier Than: the scheduled time, ISO 8601 in UTC (e.g. ``2024-03-01T12:30:00Z``)."""
    status: str
    """Launch Library 2's status abbreviation: Success, Failure, Partial Failure, Go, TBD, TBC."""
    provider: str
    rocket: str
    pad: str
    location: str
    latitude: float
    longitude: float
    mission: str | None = None
    orbit: str | None = None

    @classmethod
    def from_api(cls, result: Any) -> Launch:
        """Build a row from one entry of a Launch Library 2 ``results`` list.

        Raises `ParseError` naming the missing or mistyped field; never guesses a default.
        """
        try:
            pad = _field(result, "pad", dict)
            mission = result.get("mission")
            orbit = mission.get("orbit") if isinstance(mission, dict) else None
            return cls(
                id=_field(result, "id", str),
                name=_field(result, "name", str),
                net=_field(result, "net", str),
                status=_field(_field(result, "status", dict), "abbrev", str),
                provider=_field(_field(result, "launch_service_provider", dict), "name", str),
                rocket=_field(
                    _field(_field(result, "rocket", dict), "configuration", dict), "name", str
                ),
                pad=_field(pad, "name", str),
                location=_field(_field(pad, "location", dict), "name", str),
                latitude=_coordinate(pad, "latitude"),
                longitude=_coordinate(pad, "longitude"),
                mission=mission.get("name") if isinstance(mission, dict) else None,
                orbit=orbit.get("abbrev") if isinstance(orbit, dict) else None,
            )
        except AttributeError as exc:
            raise ParseError(f"launch is not a JSON object: {exc}") from None

    def to_api(self) -> dict[str, Any]:
        """The Launch Library 2 shape this row came from (what the fixture server serves)."""
        result: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "net": self.net,
            "status": {"abbrev": self.status},
            "launch_service_provider": {"name": self.provider},
            "rocket": {"configuration": {"name": self.rocket}},
            "pad": {
                "name": self.pad,
                "latitude": self.latitude,
                "longitude": self.longitude,
                "location": {"name": self.location},
            },
            "mission": None,
        }
        if self.mission is not None:
            result["mission"] = {
                "name": self.mission,
                "orbit": {"abbrev": self.orbit} if self.orbit is not None else None,
            }
        return result


def _field(obj: Any, name: str, kind: type) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind):
        raise ParseError(f"field {name!r}: expected {kind.__name__}, got {value!r}")
    return value


def _coordinate(pad: Any, name: str) -> float:
    # Launch Library 2 has sent coordinates both as numbers and as numeric strings.
    value = pad.get(name)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ParseError(f"pad {name}: expected a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number):
        raise ParseError(f"pad {name}: expected a finite number, got {value!r}")
    return number
