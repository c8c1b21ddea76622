"""The shipped fixture data: 300 generated launches in Launch Library 2's shape."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from etl.rows import Launch


@cache
def _text() -> str:
    return resources.files(__name__).joinpath("launches.json").read_text(encoding="utf-8")


def launch_results() -> list[dict[str, Any]]:
    """The fixture launches as Launch Library 2 ``results`` entries: fresh copies each call,
    parsed again from the file's text (read once), so no caller can change another's."""
    copies: list[dict[str, Any]] = json.loads(_text())
    return copies


@cache
def _rows() -> tuple[Launch, ...]:
    return tuple(Launch.from_api(result) for result in launch_results())


def launches() -> list[Launch]:
    """The fixture launches as rows, in launch order: a new list each call, of rows parsed
    once (a `Launch` is frozen, so sharing them is safe; the visible checks ask ~150 times)."""
    return list(_rows())
