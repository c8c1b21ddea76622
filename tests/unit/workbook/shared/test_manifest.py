"""The manifest: the arc as ARC.md pins it, and clear errors for a malformed one."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbook.shared.errors import ManifestError
from workbook.shared.manifest import (
    UnknownBuild,
    copy_manifest,
    load_manifest,
    manifest_files,
    pick_builds,
)


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


def test_an_unknown_number_or_test_is_named_with_what_there_is() -> None:
    manifest = load_manifest()
    with pytest.raises(ManifestError, match=r"no notebook '09' in the manifest \(it has 01, 02,"):
        manifest.entry("09")
    with pytest.raises(ManifestError, match="notebook 03 has no test named 'nope'"):
        manifest.entry("03").test("nope")
    build = manifest.entry("03")
    assert build.test(build.tests[0].name) == build.tests[0]
    assert build.max_points == sum(t.points for t in build.every_test) > 0


def test_builds_and_graded_entries_keep_arc_order() -> None:
    manifest = load_manifest()
    assert [e.number for e in manifest.builds] == ["03", "05", "07"]
    assert [e.number for e in manifest.graded] == ["03", "05", "07", "08"]


@pytest.mark.parametrize(
    ("values", "picked"),
    [
        ([], ["03", "05", "07"]),
        (["05"], ["05"]),
        (["7 3"], ["03", "07"]),
        (["5,3", "07"], ["03", "05", "07"]),
    ],
)
def test_pick_builds_reads_numbers_in_any_spelling_in_arc_order(
    values: list[str], picked: list[str]
) -> None:
    assert pick_builds(values, ["03", "05", "07"]) == picked


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["04"], "BUILD=04: no build 04 here; the builds are 03, 05."),
        (["x", "3"], "BUILD=x 3: no build x here; the builds are 03, 05."),
        ([" "], "BUILD= : no build number here; the builds are 03, 05."),
    ],
)
def test_pick_builds_refuses_unknown_numbers_in_one_line(values: list[str], message: str) -> None:
    with pytest.raises(UnknownBuild) as raised:
        pick_builds(values, ["03", "05"])
    assert str(raised.value) == message


def test_a_copied_manifest_reads_the_same_from_its_new_root(tmp_path: Path, root: Path) -> None:
    """Copying twice is harmless; only the entries' root differs."""
    copy = copy_manifest(root, tmp_path)
    assert copy_manifest(root, tmp_path) == copy == tmp_path / "workbook.toml"
    assert [p.relative_to(tmp_path) for p in manifest_files(tmp_path)] == [
        p.relative_to(root) for p in manifest_files(root)
    ]
    copied = load_manifest(copy)
    assert copied.root == tmp_path and copied.entries == load_manifest().entries


def test_a_build_without_its_build_toml_names_the_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "workbook.toml"
    path.write_text('[[notebook]]\nnumber="03"\nkind="build"\ntitle="t"\npath="p"\noutcome="o"\n')
    with pytest.raises(ManifestError, match=r"build03/build.toml: not there"):
        load_manifest(path)


def test_a_number_listed_twice_is_refused(tmp_path: Path) -> None:
    entry = '[[notebook]]\nnumber="01"\nkind="concept"\ntitle="t"\npath="p"\noutcome="o"\n'
    path = tmp_path / "workbook.toml"
    path.write_text(entry + entry)
    with pytest.raises(ManifestError, match="notebook #2: number 01 appears twice"):
        load_manifest(path)
