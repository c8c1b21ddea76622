"""Where rows end up. A sink's one promise: `await sink.load(rows)` returns how many it wrote."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol


class Sink(Protocol):
    """Anything rows can be loaded into. Loading the same rows twice writes them twice,
    unless the sink (or a decorator around it) makes the load idempotent."""

    async def load(self, rows: Sequence[Any]) -> int:
        """Write `rows`; return how many were written."""
        ...


def row_to_json(row: Any) -> str:
    """One row as one JSON line. Refuses NaN and infinity rather than writing invalid JSON."""
    return json.dumps(dataclasses.asdict(row), ensure_ascii=False, allow_nan=False)


class JsonlSink:
    """Appends each row as one JSON object per line. Append-only: a repeat appends again."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    async def load(self, rows: Sequence[Any]) -> int:
        if not rows:
            return 0
        # Serialise everything first, so a bad row fails the batch before a byte is written.
        text = "".join(row_to_json(row) + "\n" for row in rows)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(text)
        return len(rows)

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r})"


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every object in a JSON-lines file, in order; an absent file holds none."""
    path = Path(path)
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


class MemorySink:
    """An in-memory sink that counts: `rows` holds everything written, `calls` each load."""

    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.calls: list[int] = []

    async def load(self, rows: Sequence[Any]) -> int:
        self.calls.append(len(rows))
        self.rows.extend(rows)
        return len(rows)

    def __repr__(self) -> str:
        return f"MemorySink(rows={len(self.rows)}, calls={len(self.calls)})"
