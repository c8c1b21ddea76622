"""`grader.proofs.suitemutants`: the generic mutation run of the hidden suites.

The mutants are placed back into the export cell by cell (each marker's line count true, so
the kernel's cell-by-cell run is kept), named by ids that outlive unrelated edits, and the
survivors come out as ``[[equivalent]]`` tables that load once someone writes the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.proofs import suite_validity as validity
from grader.proofs.suitemutants import SuiteScore, equivalent_tables, generate, stable_id
from grader.suites.loading import SuiteError, load_equivalents
from workbook.shared.export import export_source, exported_sections
from workbook.shared.manifest import load_manifest


def solution_text(build: str) -> str:
    entry = load_manifest().entry(build)
    assert entry.solution
    return export_source(load_manifest().root / entry.solution)


def test_every_mutant_keeps_the_cells_apart() -> None:
    """A mutated cell's marker gives its new line count: the export still runs cell by cell."""
    text = solution_text("03")
    cells = len(exported_sections(text))
    made = generate(text)
    assert len(made) > 100
    for item in made:
        assert len(exported_sections(item.source)) == cells, item.where
        assert item.source != text


def test_ids_are_unique_and_outlive_an_unrelated_edit() -> None:
    """Editing one function renames no mutant of another: ids come from the diff, not from
    the mutant's place in the list."""
    text = solution_text("03")
    before = {item.id: item.mutant.diff for item in generate(text)}
    assert len(before) == len(generate(text))
    edited = text.replace(
        "    return rng.uniform(0.0, ceiling)",
        "    drawn = rng.uniform(0.0, ceiling)\n    return drawn",
    )
    assert edited != text
    after = {item.id: item.mutant.diff for item in generate(edited)}
    untouched = {i: d for i, d in before.items() if "uniform" not in d and "drawn" not in d}
    assert untouched and all(after.get(i) == d for i, d in untouched.items())
    assert stable_id("delete", "-x\n+pass") == stable_id("delete", "-x\n+pass")
    assert stable_id("delete", "-x\n+pass") != stable_id("constant", "-x\n+pass")


def test_survivors_come_out_as_tables_that_load_once_explained(tmp_path: Path) -> None:
    made = generate(solution_text("08"))[:3]
    report = SuiteScore(build="08", generated=3, survivors=list(made))
    path = tmp_path / "mutants.toml"
    path.write_text(equivalent_tables(report), encoding="utf-8")
    with pytest.raises(SuiteError, match="no reason"):
        load_equivalents(path)
    path.write_text(equivalent_tables(report).replace('why = ""', 'why = "same"'), "utf-8")
    loaded = load_equivalents(path)
    assert [(e.id, e.diff) for e in loaded] == [(m.id, m.mutant.diff) for m in made]


def test_an_id_recorded_twice_is_refused(tmp_path: Path) -> None:
    table = '[[equivalent]]\nid = "delete:1"\ndiff = "-x"\nwhy = "y"\n'
    path = tmp_path / "mutants.toml"
    path.write_text(table + "\n" + table, encoding="utf-8")
    with pytest.raises(SuiteError, match="twice"):
        load_equivalents(path)


@pytest.mark.slow
def test_validity_mutate_grades_the_generic_mutants(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m grader.validity --mutate 08``: the quiz's every mutant graded, and killed."""
    assert validity.main(["--mutate", "08", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "build 08:" in out and "0 survived" in out
