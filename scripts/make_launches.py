"""Writes etl/data/launches.json: a made-up but realistic set of launches, always the same.

The data is generated, not downloaded: a seeded RNG picks rockets, pads and dates, so
re-running this script reproduces the file byte for byte. Run: python scripts/make_launches.py
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from etl.rows import Launch

OUT = Path(__file__).resolve().parent.parent / "etl" / "data" / "launches.json"
COUNT = 300
SEED = 20240301

# (provider, rocket, mission prefix, pads it flies from, weight)
FLEET = [
    ("SpaceX", "Falcon 9", "Starlink Group", ["SLC-40", "LC-39A", "SLC-4E"], 40),
    ("SpaceX", "Falcon Heavy", "USSF", ["LC-39A"], 2),
    ("Rocket Lab", "Electron", "Mission", ["LC-1A", "LC-1B", "LC-2"], 10),
    (
        "China Aerospace Science and Technology Corporation",
        "Long March 2D",
        "Yaogan",
        ["LC-9401 (SLS-2)", "LC-3"],
        12,
    ),
    (
        "China Aerospace Science and Technology Corporation",
        "Long March 5",
        "Tianzhou",
        ["LC-101"],
        3,
    ),
    ("Roscosmos", "Soyuz 2.1a", "Progress MS", ["Site 31/6"], 6),
    ("Arianespace", "Ariane 6", "Galileo", ["ELA-4"], 3),
    ("Arianespace", "Vega-C", "Sentinel", ["ELV"], 2),
    ("United Launch Alliance", "Vulcan VC2S", "USSF", ["SLC-41"], 3),
    ("Indian Space Research Organization", "PSLV-XL", "EOS", ["First Launch Pad"], 4),
    ("Japan Aerospace Exploration Agency", "H3-22", "QZS", ["LA-Y2"], 2),
    ("Blue Origin", "New Glenn", "Blue Ring", ["LC-36"], 1),
]

# pad -> (pad name, location, latitude, longitude)
PADS = {
    "SLC-40": ("Space Launch Complex 40", "Cape Canaveral SFS, FL, USA", 28.56194122, -80.57735736),
    "LC-39A": ("Launch Complex 39A", "Kennedy Space Center, FL, USA", 28.60822681, -80.60428186),
    "SLC-4E": ("Space Launch Complex 4E", "Vandenberg SFB, CA, USA", 34.632, -120.611),
    "LC-1A": (
        "Rocket Lab Launch Complex 1A",
        "Onenui Station, Mahia Peninsula, New Zealand",
        -39.262833,
        177.864469,
    ),
    "LC-1B": (
        "Rocket Lab Launch Complex 1B",
        "Onenui Station, Mahia Peninsula, New Zealand",
        -39.261439,
        177.864731,
    ),
    "LC-2": ("Rocket Lab Launch Complex 2", "Wallops Island, Virginia, USA", 37.8337, -75.4881),
    "LC-9401 (SLS-2)": (
        "Launch Complex 9401 (SLS-2)",
        "Jiuquan, People's Republic of China",
        40.958,
        100.291,
    ),
    "LC-3": (
        "Launch Complex 3",
        "Xichang Satellite Launch Center, People's Republic of China",
        28.2455,
        102.0271,
    ),
    "LC-101": (
        "Wenchang Space Launch Site LC-101",
        "Wenchang, People's Republic of China",
        19.614492,
        110.951133,
    ),
    "Site 31/6": ("31/6", "Baikonur Cosmodrome, Republic of Kazakhstan", 45.996034, 63.564003),
    "ELA-4": ("Ariane Launch Area 4", "Guiana Space Centre, French Guiana", 5.2601, -52.7852),
    "ELV": ("Ariane Launch Area 1 (ELV)", "Guiana Space Centre, French Guiana", 5.236, -52.775),
    "SLC-41": ("Space Launch Complex 41", "Cape Canaveral SFS, FL, USA", 28.58341025, -80.58303644),
    "First Launch Pad": ("First Launch Pad", "Satish Dhawan Space Centre, India", 13.733, 80.235),
    "LA-Y2": ("Yoshinobu Launch Complex LP-2", "Tanegashima Space Center, Japan", 30.400, 130.977),
    "LC-36": ("Space Launch Complex 36", "Cape Canaveral SFS, FL, USA", 28.4705, -80.5383),
}

ORBITS = ["LEO", "SSO", "GTO", "MEO", "ISS", "PO"]


def main() -> None:
    rng = random.Random(SEED)
    start = datetime(2023, 1, 3, tzinfo=UTC)
    now = datetime(2024, 12, 1, tzinfo=UTC)
    weights = [entry[4] for entry in FLEET]
    counters: dict[str, int] = {}
    launches = []
    when = start
    for _ in range(COUNT):
        when += timedelta(minutes=rng.randrange(6 * 60, 5 * 24 * 60, 15))
        provider, rocket, prefix, pads, _w = rng.choices(FLEET, weights)[0]
        counters[prefix] = counters.get(prefix, rng.randrange(1, 40)) + 1
        mission = f"{prefix} {counters[prefix]}"
        pad_name, location, lat, lon = PADS[rng.choice(pads)]
        if when > now:
            status = rng.choice(["Go", "Go", "TBC", "TBD"])
        else:
            status = rng.choices(["Success", "Failure", "Partial Failure"], [95, 3, 2])[0]
        launch = Launch(
            id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            name=f"{rocket} | {mission}",
            net=when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            status=status,
            provider=provider,
            rocket=rocket,
            pad=pad_name,
            location=location,
            latitude=lat,
            longitude=lon,
            mission=mission,
            orbit=rng.choice(ORBITS),
        )
        launches.append(launch.to_api())
    OUT.write_text(json.dumps(launches, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(launches)} launches to {OUT}")


if __name__ == "__main__":
    main()
