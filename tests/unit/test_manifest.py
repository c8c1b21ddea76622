"""The manifest: the arc as ARC.md pins it, and clear errors for a malformed one."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbook.shared.errors import ManifestError
from workbook.shared.manifest import load_manifest


def test_arc_numbers_and_folders() -> None:
    """The numbers and folders are the contract; slugs may change."""
    manifest = load_manifest()
    layout = {e.number: (e.kind, e.path.split("/")[0]) for e in manifest.entries}
    assert layout == {
        "01": ("concept", "notebooks"),
        "02": ("concept", "notebooks"),
        "03": ("build", "exercises"),
        "04": ("concept", "notebooks"),
        "05": ("build", "exercises"),
        "06": ("concept", "notebooks"),
        "07": ("build", "exercises"),
        "08": ("quiz", "exercises"),
    }
    for entry in manifest.entries:
        assert Path(entry.path).name.startswith(entry.number + "_")
        if entry.solution:
            assert entry.solution == entry.path.replace("exercises/", "solutions/")


def test_every_existing_notebook_is_in_the_manifest(root: Path) -> None:
    """No notebook ships outside the arc."""
    listed = {e.path for e in load_manifest().entries}
    on_disk = {
        str(p.relative_to(root))
        for folder in ("notebooks", "exercises")
        for p in (root / folder).glob("*.ipynb")
    }
    assert on_disk <= listed


def test_first_existing_is_the_first_on_disk() -> None:
    manifest = load_manifest()
    first = manifest.first_existing()
    assert first is not None
    earlier = manifest.entries[: manifest.entries.index(first)]
    assert not any((manifest.root / e.path).exists() for e in earlier)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[notebook]\n", "not valid TOML"),
        ('[[notebook]]\nnumber = "01"\n', "missing key"),
        (
            '[[notebook]]\nnumber="01"\nkind="lecture"\ntitle="t"\npath="p"\noutcome="o"\n',
            "kind 'lecture'",
        ),
    ],
)
def test_malformed_manifest(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "workbook.toml"
    path.write_text(text)
    with pytest.raises(ManifestError, match=message):
        load_manifest(path)
