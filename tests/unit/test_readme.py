"""The README and the manifest tell the same story."""

from __future__ import annotations

from pathlib import Path

from workbook.shared.manifest import load_manifest


def test_arc_table_matches_the_manifest(root: Path) -> None:
    """Every notebook appears as one row: number, title, kind, outcome."""
    readme = (root / "README.md").read_text(encoding="utf-8")
    for entry in load_manifest().entries:
        row = f"| {entry.number} | {entry.title} | {entry.kind} | {entry.outcome} |"
        assert row in readme, f"README's arc table lacks or differs from: {row}"


def test_readme_opens_with_the_two_commands(root: Path) -> None:
    head = (root / "README.md").read_text(encoding="utf-8")[:1500]
    assert "make lab" in head and "make check" in head and "Python 3.11" in head
