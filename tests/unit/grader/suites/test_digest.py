"""`grader.suites.digest`: one canonical JSON text per value, and content ids over it."""

from __future__ import annotations

import hashlib
import math

import pytest

from grader.suites.digest import canonical_json, content_id


def test_canonical_json_sorts_keys_drops_spaces_and_keeps_unicode() -> None:
    assert canonical_json({"b": [1, 2.5], "a": "é"}) == '{"a":"é","b":[1,2.5]}'


def test_canonical_json_is_the_same_whatever_the_key_order() -> None:
    assert canonical_json({"x": 1, "y": {"q": 2, "p": 3}}) == canonical_json(
        {"y": {"p": 3, "q": 2}, "x": 1}
    )


@pytest.mark.parametrize("value", [math.nan, math.inf, {"n": -math.inf}])
def test_a_value_without_a_json_form_raises(value: object) -> None:
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        canonical_json(value)


def test_a_set_has_no_canonical_form() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        canonical_json({1, 2})


def test_content_id_is_sha256_of_kind_nul_and_text() -> None:
    expected = hashlib.sha256(b"row\x00" + b'{"id":1}').hexdigest()
    assert content_id("row", '{"id":1}') == expected
    assert len(expected) == 64


def test_the_nul_keeps_kind_and_text_apart() -> None:
    assert content_id("ab", "c") != content_id("a", "bc")
    assert content_id("row", "x") != content_id("item", "x")


def test_content_id_hashes_a_lone_surrogate_instead_of_raising() -> None:
    assert len(content_id("row", "\udc80")) == 64
