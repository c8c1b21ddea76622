"""`grader.classes.reteach`: failures matched to known bugs by Jaccard, and kept signatures read
only when they have the shape they were written with."""

from __future__ import annotations

import json
from pathlib import Path

from grader.classes.reteach import THRESHOLD, Bug, _read, jaccard, match


def bug(name: str, *fails: str) -> Bug:
    return Bug(name, f"the {name} bug", frozenset(fails))


BUGS = [bug("a", "t1", "t2"), bug("b", "t2", "t3"), bug("c", "t4"), bug("quiet")]


def test_the_best_overlap_wins_from_the_threshold_on() -> None:
    assert jaccard(frozenset({"t1", "t2"}), frozenset({"t2", "t3"})) == 1 / 3
    assert THRESHOLD == 0.5
    assert [b.name for b in match(frozenset({"t1", "t2"}), BUGS)] == ["a"]
    assert [b.name for b in match(frozenset({"t4", "t5"}), BUGS)] == ["c"]  # 1/2: at the line
    assert match(frozenset({"t4", "t5", "t6"}), BUGS) == []  # 1/3: no known bug
    assert match(frozenset(), BUGS) == []  # nothing wrong, nothing to reteach


def test_a_tie_names_every_tied_bug() -> None:
    assert [b.name for b in match(frozenset({"t2"}), BUGS)] == ["a", "b"]


def test_kept_signatures_of_another_shape_are_graded_again(tmp_path: Path) -> None:
    path = tmp_path / "03.json"
    for bad in ({"bug": 5}, None, [], "abc", {}, {"bug": [1]}):
        path.write_text(json.dumps(bad))
        assert _read(path) is None, bad
    path.write_text("{not json")
    assert _read(path) is None
    path.write_text(json.dumps({"bug": ["t1", "t2"]}))
    assert _read(path) == {"bug": ["t1", "t2"]}
    assert _read(tmp_path / "missing.json") is None
