"""`grader.runtime.escape`: learner-chosen text made safe for a terminal, a CSV cell,
Markdown, a code fence and a file name, leaving plain text as it was."""

from __future__ import annotations

import pytest

from grader.runtime.escape import (
    NAME_BYTES,
    code,
    csv_cell,
    fenced,
    file_names,
    markdown,
    printable,
    shown,
)


def test_shown_leaves_plain_text_alone() -> None:
    assert shown("ada lovelace: all 3 tests passed") == "ada lovelace: all 3 tests passed"


def test_shown_escapes_terminal_sequences_bidi_overrides_and_backslashes() -> None:
    assert shown("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"
    assert shown("abc\u202edef") == "abc\\u202edef"
    assert shown("a\\x1b") == "a\\\\x1b"  # a backslash the learner typed stays distinguishable
    assert shown("line\nnext") == "line\\x0anext"


def test_shown_writes_a_byte_that_is_not_utf8_as_that_byte() -> None:
    name = b"caf\xe9".decode("utf-8", "surrogateescape")
    assert shown(name) == "caf\\xe9"


def test_printable_keeps_lines_tabs_and_backslashes() -> None:
    assert printable("a\n\tb\\c") == "a\n\tb\\c"
    assert printable("a\nb\x07") == "a\nb\\x07"


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("  @SUM(A1)", "'  @SUM(A1)"),
        ("-2", "'-2"),
        ("\tx", "\\x09x"),  # shown first: the tab is now visible text, no formula
        ("ada", "ada"),
        ("a=b", "a=b"),
    ],
)
def test_csv_cell_neutralises_formulas(text: str, cell: str) -> None:
    assert csv_cell(text) == cell


def test_markdown_escapes_markup_and_keeps_ordinary_text() -> None:
    assert markdown("snake_case_name, repr('x')") == "snake_case_name, repr('x')"
    assert markdown("*x* _c_ <b>") == "\\*x\\* \\_c\\_ &lt;b>"
    assert markdown("&amp; a|b $x$") == "&amp;amp; a\\|b \\$x\\$"
    assert markdown("[l](u) https://x.y www.z") == "[l\\](u) https\\://x.y www\\.z"
    assert markdown("a # ##") == "a \\# \\#\\#"


def test_code_uses_a_backtick_run_longer_than_any_inside() -> None:
    assert code("x") == "`x`"
    assert code("a`b") == "``a`b``"
    assert code("`x") == "`` `x ``"  # padded so the span does not start with a backtick


def test_fenced_uses_a_fence_longer_than_any_inside() -> None:
    assert fenced("x = 1", "python") == "```python\nx = 1\n```"
    assert fenced("x```y") == "````text\nx```y\n````"


def test_plain_learner_ids_are_their_own_file_names() -> None:
    assert file_names(["bob", "ada.l", "x-1", "bob"]) == {
        "bob": "bob",
        "ada.l": "ada.l",
        "x-1": "x-1",
    }


def test_ids_that_fold_to_the_same_name_all_get_digests() -> None:
    names = file_names(["ada", "Ada", "bob"])
    assert names["bob"] == "bob"
    assert names["ada"].startswith("ada~") and names["Ada"].startswith("Ada~")
    assert len({n.casefold() for n in names.values()}) == 3


def test_hostile_or_long_ids_get_a_bounded_readable_stem_and_a_digest() -> None:
    names = file_names(["../etc", "", "x" * 500, "\x1b[2J"])
    assert names["../etc"].startswith("etc~") and "/" not in names["../etc"]
    assert names[""].startswith("learner~")
    assert names["x" * 500] == "x" * NAME_BYTES + "~" + names["x" * 500].split("~")[1]
    assert all(len(n.encode()) <= NAME_BYTES + 20 for n in names.values())
    assert file_names(["../etc"]) == {"../etc": names["../etc"]}  # the same on every run
