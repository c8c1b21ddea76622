"""`grader.proofs.visible_catches`: the visible checks alone catch the known bugs, and the
measurement says which ones they miss."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grader.proofs import visible_catches as coverage
from grader.suites.loading import Edit, Mutant, SuiteError

#: Two known bugs of build 03 for a suite of the test's own: one a visible check catches, one
#: that changes nothing a check can see.
MUTANTS = """
[[mutant]]
name = "kind_tag_dropped"
bug = "content_id hashes only canonical"
[[mutant.edit]]
old = '''    digest.update(kind.encode("utf-8"))
'''
new = ''

[[mutant]]
name = "comment_reworded"
bug = "a comment changes, nothing else"
[[mutant.edit]]
old = '''# ends the kind: ("ab", "c") and ("a", "bc") stay apart'''
new = '''# the boundary'''
"""


def cell(kind: str, source: str, *tags: str) -> dict[str, Any]:
    return {"cell_type": kind, "metadata": {"tags": list(tags)}, "source": source}


def test_mutate_edits_the_one_answer_cell_holding_the_text() -> None:
    cells = [
        cell("markdown", "f returns 1"),
        cell("code", "ONE = 1", "setup"),
        cell("code", "def f():\n    return 1\n", "answer"),
    ]
    mutated = coverage.mutate(cells, Mutant("m", "returns 2", (Edit("return 1", "return 2"),)))
    assert mutated[2]["source"] == "def f():\n    return 2\n"
    assert mutated[:2] == cells[:2]
    assert cells[2]["source"] == "def f():\n    return 1\n"  # the notebook itself is untouched


@pytest.mark.parametrize(
    ("sources", "said"),
    [
        (["def f(): pass"], "in no answer cell"),
        (["x = 1; x = 1"], "2 times"),
        (["x = 1", "y = 2; x = 1"], "2 times"),
    ],
)
def test_an_edit_that_does_not_apply_exactly_once_is_refused(sources: list[str], said: str) -> None:
    cells = [cell("code", source, "answer") for source in sources]
    with pytest.raises(SuiteError, match=said):
        coverage.mutate(cells, Mutant("m", "bug", (Edit("x = 1", "x = 2"),)))


def test_a_survivor_is_named_and_fails_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hidden = tmp_path / "builds"
    (hidden / "build03" / "hidden").mkdir(parents=True)
    (hidden / "build03" / "hidden" / "mutants.toml").write_text(MUTANTS, encoding="utf-8")

    result = coverage.measure_many(["03"], builds_dir=hidden, workers=1)[0]

    assert (result.caught, result.total, result.survivors) == (1, 2, ["comment_reworded"])
    assert not result.ok and not result.control
    caught = {v.mutant: v.caught_by for v in result.verdicts}
    assert caught["kind_tag_dropped"] == "same_content_hashes_stable_distinct_content_differs"
    listed = {v.mutant for v in result.verdicts if v.listed}
    # The wrong answer made of two mutants of the real suite is left out: this suite has neither.
    assert listed == {"retries_transient_errors_forever"} and not result.listed_survivors
    assert "survives: comment_reworded: a comment changes, nothing else" in result.details()
    assert coverage.main(["03", "--builds-dir", str(hidden), "--workers", "1"]) == 1
    out = capsys.readouterr().out
    assert "1 of 2 known bugs caught" in out and "coverage FAILED for build(s) 03" in out


def test_a_bug_left_to_the_graders_says_why(tmp_path: Path) -> None:
    (tmp_path / "builds" / "build03").mkdir(parents=True)
    (tmp_path / "builds" / "build03" / "build.toml").write_text(
        '[[left_to_graders]]\nname = "comment_reworded"\nwhy = "nothing to see"\n',
        encoding="utf-8",
    )
    left = coverage.left_to_graders("03", tmp_path)
    assert left == {"comment_reworded": "nothing to see"}
    result = coverage.Coverage(
        "03", (coverage.Verdict("comment_reworded", "a comment", None),), left_to_graders=left
    )
    assert result.details() == ["survives: comment_reworded: left to the graders: nothing to see"]
    assert not result.ok  # still not caught


@pytest.mark.slow
def test_every_build_reaches_the_target() -> None:
    """The measurement `make check` relies on: every known bug of every build caught, every
    wrong answer of issue 13 caught, the solutions themselves passing every visible check."""
    results = coverage.measure_many()
    assert {r.build for r in results} == {"03", "05", "07"}
    for result in results:
        assert result.ok, coverage.report(result)


def test_every_seam_needs_a_clause_and_every_clause_a_bug_both_sides_catch(
    tmp_path: Path,
) -> None:
    clauses = (
        coverage.Clause("f", "returns_one", "f() is 1", "step 1", ("f_returns_two",)),
        coverage.Clause("f", "raises_on_none", "f(None) raises", "step 1", ()),
        coverage.Clause("f", "is_fast", "f is fast", "step 2", ("not_a_mutant",)),
        coverage.Clause("g", "pure", "g changes nothing", "step 3", ("g_mutates",)),
    )
    problems = coverage.contract_problems(
        clauses, ["f_returns_two", "g_mutates"], {"f", "g", "H"}, caught={"f_returns_two"}
    )
    assert problems == [
        "H: no clause",
        "f.raises_on_none: no known bug breaks it",
        "f.is_fast: not_a_mutant is not a known bug of mutants.toml",
        "g.pure: its bug g_mutates survives the visible checks",
    ]
    assert (
        coverage.contract_problems(clauses[:1], ["f_returns_two"], {"f"}, {"f_returns_two"}) == []
    )


def test_a_contract_table_is_read_strictly(tmp_path: Path) -> None:
    folder = tmp_path / "build03" / "hidden"
    folder.mkdir(parents=True)
    assert coverage.load_contract("03", tmp_path) == ()
    clause = '[[clause]]\nseam = "f"\nname = "n"\nsays = "s"\ncites = "c"\nbugs = ["b"]\n'
    (folder / "contract.toml").write_text(clause, encoding="utf-8")
    assert coverage.load_contract("03", tmp_path) == (coverage.Clause("f", "n", "s", "c", ("b",)),)
    (folder / "contract.toml").write_text(clause * 2, encoding="utf-8")
    with pytest.raises(SuiteError, match="named twice"):
        coverage.load_contract("03", tmp_path)
    (folder / "contract.toml").write_text('[[clause]]\nseam = "f"\n', encoding="utf-8")
    with pytest.raises(SuiteError, match="seam/name/says/cites/bugs"):
        coverage.load_contract("03", tmp_path)


def test_the_answer_cells_public_names_are_the_seams() -> None:
    solution = coverage.repo_root() / "solutions" / "07_build_replay_safe_batch.ipynb"
    assert coverage.answer_names(solution) == {
        "SCHEMA",
        "open_store",
        "read_checkpoint",
        "advance_checkpoint",
        "poison_reason",
        "UPSERT_NEWER",
        "upsert_item",
        "RECORD_FAILURE",
        "RECOUNT",
        "ingest_page",
    }
