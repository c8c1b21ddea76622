"""The mutator: every operator fires, every mutant parses and differs, and a repeat is identical."""

from __future__ import annotations

import ast

import pytest

from workbook.checking.mutation import OPERATORS, mutants

SOURCE = '''
import asyncio

SEEN: set[str] = set()


def helper(x):
    return x


async def load(rows, inner, lock):
    """Write each new row once."""
    async with lock:
        fresh = [r for r in rows[1:] if r not in SEEN and r != ""]
        if not fresh:
            return 0
        try:
            written = await inner.load(fresh)
        except ValueError:
            raise
        SEEN.update(fresh)
        return max(written, 0) if True else min(written, 1)
'''


def test_every_operator_makes_at_least_one_mutant() -> None:
    found = {m.operator for m in mutants(SOURCE)}
    assert found == set(OPERATORS)


def test_each_mutant_parses_and_differs_from_the_original_and_the_others() -> None:
    made = mutants(SOURCE)
    texts = [m.source for m in made]
    assert len(set(texts)) == len(texts)
    for mutant in made:
        ast.parse(mutant.source)
        assert mutant.source != mutant.original
        assert mutant.diff.startswith(("-", "+")), mutant.id


def test_a_repeat_gives_the_same_mutants_in_the_same_order() -> None:
    assert [m.id for m in mutants(SOURCE)] == [m.id for m in mutants(SOURCE)]


def test_within_keeps_to_the_named_definitions_and_the_docstring_is_never_deleted() -> None:
    made = mutants(SOURCE, within=["load"])
    assert made and all(m.id.startswith("load:") for m in made)
    assert not any("Write each new row once" in m.description for m in made)


def test_the_replay_bug_is_among_the_mutants() -> None:
    """Forgetting to remember what was written is one statement deletion away."""
    descriptions = [m.description for m in mutants(SOURCE, operators=["delete"])]
    assert "deleted `SEEN.update(fresh)`" in descriptions


def test_removed_await_and_dropped_not_read_as_the_bug_they_are() -> None:
    by_operator = {m.operator: m for m in mutants(SOURCE, within=["load"])}
    assert "written = inner.load(fresh)" in by_operator["await"].source
    dropped = [m for m in mutants(SOURCE) if "lost its `not`" in m.description]
    assert dropped and "if fresh:" in dropped[0].source


def test_limit_and_unknown_operators() -> None:
    assert len(mutants(SOURCE, limit=3)) == 3
    with pytest.raises(ValueError, match="unknown mutation operator 'typo'"):
        mutants(SOURCE, operators=["typo"])
