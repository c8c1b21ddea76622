"""The one feedback vocabulary: what was called, what came back, what was expected, the hint.

Self-checks (live Python values, in the learner's kernel) and graded feedback (plain JSON
observations, judged in the grader) both speak it, so a learner reads the same shape in the
notebook and in the instructor's feedback file:

    called:   with_retry(policy, op) with op failing twice with NetworkError
    got:      raised NetworkError('down')
    expected: returns 'ok' after 2 retries
    hint:     ...

Values are shown as a learner would type them, cut to `LIMIT` characters, memory addresses
left out and sets sorted, so showing the same value twice gives the same text, in any process.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: Longest value text shown; longer ones end in "...". Learner-made text is cut too.
LIMIT = 200
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class Message(str):
    """A feedback block as text that keeps its ``got`` part: what came back, for whoever
    needs it alone (the class summary's most common wrong answer), never parsed back out."""

    got: str

    def __new__(cls, text: str, got: str = "") -> Message:
        made = super().__new__(cls, text)
        made.got = got
        return made

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]  # copy and pickle keep `got`
        return str(self), self.got


def message(call: str, got: str, expected: str, note: str = "", hint: str = "") -> Message:
    """The feedback block: ``called`` / ``got`` / ``expected`` lines, then the note and hint."""
    lines = [f"called:   {call}", f"got:      {got}", f"expected: {expected}"]
    if note:
        lines.append(note)
    if hint:
        lines.append(f"hint:     {hint}")
    return Message("\n".join(lines), got)


def cut(text: str, limit: int = LIMIT) -> str:
    """`text` without memory addresses, at most `limit` characters."""
    text = _ADDRESS.sub("", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def raised_text(kind: str, text: str) -> str:
    """An exception as feedback shows it: ``raised ParseError('bad row')``."""
    return f"raised {cut(kind, 80)}({cut(text)!r})"


def show(value: Any) -> str:
    """A live value as a learner would type it; an exception as ``raised Kind('message')``."""
    if isinstance(value, BaseException):
        return raised_text(type(value).__name__, str(value))
    return cut(stable_repr(value))


def stable_repr(value: Any, _open: frozenset[int] = frozenset()) -> str:
    """`repr`, but a set's members sorted: a set's order follows `hash()`, which differs from
    one process to the next (neither a kernel's nor the grader's is pinned), and the same
    value must read the same. Only plain containers are looked into, as deep as `DEPTH`;
    anything else, and a container holding itself, reads as `repr` has it."""
    kind = type(value)
    if kind not in (set, frozenset, dict, list, tuple) or len(_open) >= DEPTH:
        return repr(value)
    if id(value) in _open:  # as repr shows a container inside itself
        return "[...]" if kind is list else "{...}" if kind is dict else repr(value)
    inner = _open | {id(value)}
    if kind is dict:
        pairs = (f"{stable_repr(k, inner)}: {stable_repr(v, inner)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    parts = [stable_repr(v, inner) for v in value]
    if kind is list:
        return "[" + ", ".join(parts) + "]"
    if kind is tuple:
        return f"({parts[0]},)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"
    if not parts:
        return repr(value)  # set() and frozenset()
    members = "{" + ", ".join(sorted(parts)) + "}"
    return members if kind is set else f"frozenset({members})"


#: How deep `stable_repr` looks into nested containers before leaving the rest to `repr`.
DEPTH = 50


def said(ok: bool, value: Any) -> str:
    """What a call did: ``returned 42`` or ``raised ParseError('...')``."""
    return f"returned {show(value)}" if ok else show(value)


def show_json(value: Any) -> str:
    """An observed JSON value (see `grader.suites.observe.plain`) as a learner would type it: a
    non-finite float as ``float('nan')``, an object the probe could not convert by its type."""
    if isinstance(value, dict):
        if "float" in value:
            return f"float({value['float']!r})"
        if "type" in value:
            return f"a {cut(str(value['type']), 80)} object ({cut(str(value.get('repr', '')))})"
    return cut(repr(value))


def show_outcome(outcome: Mapping[str, Any]) -> str:
    """An observed call (``{"ok": v}``, ``{"raised": k, "message": m}`` or
    ``{"missing": name}``) as feedback shows it."""
    if "ok" in outcome:
        return show_json(outcome["ok"])
    if "missing" in outcome:
        return f"NameError: `{outcome['missing']}` is not defined in your answer cells"
    return raised_text(str(outcome.get("raised")), str(outcome.get("message", "")))
