"""Where rows end up. A sink's one promise: `await sink.load(rows)` returns how many it wrote."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from etl.errors import ParseError


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
    """Appends each row as one JSON object per line. Append-only: a repeat appends again.

    A crash in the middle of a write can leave a torn last line (no newline, not JSON). The
    next load cuts that fragment off before appending, so the file stays one object per line;
    the row it belonged to was never fully written, and a re-run writes it again.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    async def load(self, rows: Sequence[Any]) -> int:
        if not rows:
            return 0
        # Serialise everything first, so a bad row fails the batch before a byte is written.
        text = "".join(row_to_json(row) + "\n" for row in rows).encode("utf-8")
        with self.path.open("ab") as out:
            out.seek(0, 2)
            tail = _torn_tail(self.path)
            if tail is not None:
                out.truncate(out.tell() - len(tail))
            elif out.tell() and not _ends_with_newline(self.path):
                text = b"\n" + text  # a complete last object someone wrote without a newline
            out.write(text)
        return len(rows)

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r})"


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every object in a JSON-lines file, in order; an absent file holds none.

    A torn last line (what a crash mid-write leaves) is skipped; a bad line anywhere else
    raises `ParseError` naming it, since something other than a crash wrote it.
    """
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    objects = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            objects.append(json.loads(line))
        except ValueError as exc:
            if number == len(lines):  # no newline after it: the torn end of a write
                break
            raise ParseError(f"{path.name}, line {number}: not JSON ({exc})") from None
    return objects


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as data:
        data.seek(0, 2)
        if data.tell() == 0:
            return True
        data.seek(-1, 2)
        return data.read(1) == b"\n"


def _torn_tail(path: Path) -> bytes | None:
    """The bytes after the last newline when they are not a JSON object, else None."""
    if _ends_with_newline(path):
        return None
    data = path.read_bytes()
    tail = data[data.rfind(b"\n") + 1 :]
    try:
        json.loads(tail)
    except ValueError:
        return tail
    return None


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
