"""Learner-controlled text made safe for each place the grader writes it.

A learner chooses their folder's name, their files' names and every message their code
raises, so all of it is hostile text by the time it reaches an output:

- `shown`: control and format characters (terminal escape sequences, bidi overrides, a lone
  byte of a name that is not UTF-8) written as visible ``\\x1b``-style escapes; for a terminal
  and as the first step of every other form;
- `csv_cell`: `shown`, and a cell a spreadsheet would read as a formula (OWASP's CSV
  injection rule: a leading ``= + - @``, tab or CR) prefixed with a single quote;
- `markdown` and `code`: `shown`, and whatever Markdown or HTML would render as markup
  (emphasis, links, autolinks, tags, entities, table pipes) escaped, so the text reads as
  written; `fenced` for a block in a code fence;
- `file_names`: a bounded, collision-free file name per learner id for ``feedback/``.

Each is a pure function of its input: the same text gives the same output on every run, and
plain text (ASCII names, ordinary messages) comes back unchanged.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

#: Unicode categories never shown as themselves: controls, format characters (bidi
#: overrides, zero-width joiners), line and paragraph separators, surrogates, private use.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
#: A spreadsheet reads a cell starting with one of these as a formula (OWASP).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: Longest readable part of a file name made from a learner id, in UTF-8 bytes.
NAME_BYTES = 80


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a name that is not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _hidden(ch: str, keep: str) -> bool:
    return ch not in keep and unicodedata.category(ch) in _HIDDEN_CATEGORIES


def shown(text: str) -> str:
    """`text` with every control or format character (and the backslash, so the escapes
    stay unambiguous) written as a visible escape: safe to print to a terminal."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(
        "\\\\" if ch == "\\" else _escape_char(ch) if _hidden(ch, "") else ch for ch in text
    )


def printable(text: str) -> str:
    """`text` with control and format characters escaped but lines, tabs and backslashes
    kept: for multi-line messages shown in a code fence."""
    if text.replace("\n", "").replace("\t", "").isprintable():  # in C: the usual case
        return text
    return "".join(_escape_char(ch) if _hidden(ch, "\n\t") else ch for ch in text)


def csv_cell(text: str) -> str:
    """`text` as a CSV cell no spreadsheet evaluates: `shown`, then a leading formula
    character (after any spaces) behind a single quote."""
    text = shown(text)
    return "'" + text if text.lstrip(" ").startswith(_FORMULA_START) else text


# Markdown, inline. Learner text never starts a line in our outputs (it follows a heading
# mark, a table pipe or a list dash), so only inline markup needs escaping: each rule below
# escapes a character only where it could start or end markup, which keeps ordinary text
# (reprs, paths, names with underscores) byte for byte as it was.
_ALWAYS = {
    "\\": "\\\\",
    "`": "\\`",
    "*": "\\*",
    "~": "\\~",
    "|": "\\|",
    "$": "\\$",
    "@": "\\@",
    "<": "&lt;",
}
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{0,31});")


def markdown(text: str) -> str:
    """`text` as inline Markdown that renders as written: no emphasis, code, link, autolink,
    HTML tag, entity, math or table cell boundary comes from it."""
    text = shown(text)
    out = []
    for i, ch in enumerate(text):
        if ch in _ALWAYS:
            out.append(_ALWAYS[ch])
        elif ch == "&" and _ENTITY.match(text, i):
            out.append("&amp;")
        elif (ch == "." and text[max(i - 3, 0) : i].lower() == "www") or (
            ch == ":" and text[i + 1 : i + 3] == "//"
        ):  # what GitHub would turn into a link by itself
            out.append("\\" + ch)
        elif ch == "_":
            inside = 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
            out.append("_" if inside else "\\_")
        elif ch == "]" and text[i + 1 : i + 2] in ("(", "[", ":"):
            out.append("\\]")
        elif ch == "#" and not text[i:].strip("# "):  # a heading's closing sequence
            out.append("\\#")
        else:
            out.append(ch)
    return "".join(out)


def code(text: str) -> str:
    """`text` as a Markdown code span: `shown`, between backtick runs longer than any inside."""
    text = shown(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fenced(text: str, info: str = "text") -> str:
    """`text` (`printable`) in a code fence longer than any run of backticks inside it."""
    text = printable(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


# File names.
_PLAIN_EXTRA = frozenset("._-")


def _plain(name: str) -> bool:
    return (
        bool(name)
        and name[0].isalnum()
        and all(ch.isalnum() or ch in _PLAIN_EXTRA for ch in name)
        and not name.endswith(".")
        and len(name.encode("utf-8", "surrogatepass")) <= NAME_BYTES
        and name.isprintable()
        and unicodedata.normalize("NFC", name) == name
        and not any(0xD800 <= ord(ch) <= 0xDFFF for ch in name)
    )


def _readable_part(name: str) -> str:
    """The name's letters and digits, other runs as one ``_``, at most `NAME_BYTES` bytes."""
    kept = re.sub(r"_+", "_", "".join(ch if _plain(ch) else "_" for ch in name)).strip("._-")
    out, size = [], 0
    for ch in kept:
        size += len(ch.encode("utf-8"))
        if size > NAME_BYTES:
            break
        out.append(ch)
    return "".join(out).rstrip("._-") or "learner"


def _digest(name: str, length: int) -> str:
    return hashlib.sha256(os.fsencode(name)).hexdigest()[:length]


def file_names(ids: Iterable[str]) -> dict[str, str]:
    """A file name stem for each learner id: the id itself when it is plain (letters, digits,
    ``._-``, short, and unique however a file system folds case), otherwise its readable part,
    ``~`` and a digest of the whole id. Never longer than ~100 bytes, never two the same (a
    plain stem has no ``~``; digests are lengthened until they differ)."""
    ids = list(dict.fromkeys(ids))
    folded = Counter(unicodedata.normalize("NFC", i).casefold() for i in ids if _plain(i))
    names = {
        i: i for i in ids if _plain(i) and folded[unicodedata.normalize("NFC", i).casefold()] == 1
    }
    odd = [i for i in ids if i not in names]
    stems: dict[str, str] = {}
    for length in (16, 32, 64):
        stems = {i: f"{_readable_part(i)}~{_digest(i, length)}" for i in odd}
        if len({s.casefold() for s in stems.values()}) == len(stems):
            break
    names.update(stems)
    return names
