"""The grader's canonical JSON and content ids, defined once.

- `canonical_json(value)`: one text per value (keys sorted, no spaces, UTF-8 as is, no NaN).
- `content_id(kind, canonical)`: ``sha256(kind ‖ 0x00 ‖ canonical)`` in hex, the same ids the
  workbook's build 03 teaches; the grade cache keys on them and the hidden judges compute the
  expected ids with them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

#: The `json.dumps` options of canonical JSON (a judge varies one to name a learner's bug).
CANONICAL_OPTIONS: Final[Mapping[str, Any]] = MappingProxyType(
    {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False, "allow_nan": False}
)


def canonical_json(value: Any) -> str:
    """`value` as canonical JSON; a value with no JSON form (NaN, a set, ...) raises."""
    return json.dumps(value, **CANONICAL_OPTIONS)


def content_id(kind: str, canonical: str) -> str:
    """sha256(kind ‖ 0x00 ‖ canonical) in hex: the kind keeps equal texts of different kinds
    apart, the NUL keeps ``("ab", "c")`` apart from ``("a", "bc")``."""
    digest = hashlib.sha256(kind.encode())
    digest.update(b"\x00")
    digest.update(canonical.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()
