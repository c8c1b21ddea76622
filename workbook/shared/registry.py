"""The one registry type: named entries in declaration order, each name once.

Visible checks (`workbook.checks.Checks`), hidden probes (`grader.suites.observe.Probes`) and judges
(`grader.suites.judging.Judges`) are all registries: a subclass adds an ``add`` decorator that
builds its own kind of entry. Registering a name twice is an error, never a silent replacement, so a
copied check cannot shadow the one before it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries by name, in the order they were registered."""

    kind = "entry"
    """What an entry is called in the duplicate-name error ("check", "probe", "judge")."""

    def __init__(self) -> None:
        self.by_name: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Add `entry` under `name`; raises `ValueError` when the name is taken."""
        if name in self.by_name:
            raise ValueError(f"{self.kind} {name!r} declared twice")
        self.by_name[name] = entry
        return entry

    def include(self, other: Registry[T]) -> None:
        """Register every entry of `other`, in its order (checks kept in a module of their
        own join a build's registry this way, never by an import that registers as it runs)."""
        for name, entry in other.by_name.items():
            self.register(name, entry)

    @property
    def names(self) -> list[str]:
        return list(self.by_name)

    def __iter__(self) -> Iterator[T]:
        return iter(self.by_name.values())

    def __len__(self) -> int:
        return len(self.by_name)

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    def get(self, name: str) -> T | None:
        return self.by_name.get(name)
