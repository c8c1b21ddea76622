"""IPython-only lines in a graded cell, made plain Python the way a learner would expect.

A kernel runs ``%time load(rows)`` or ``!ls`` in a cell; plain Python calls them syntax
errors. A learner who timed an answer once should not lose the whole build for it, and the
self-check and the grader must agree (both go through `workbook.shared.export`). So a cell that does
not compile as it stands is tried once more with its IPython lines rewritten, line for line
(every other line keeps its number):

- ``%time STMT``, ``%prun STMT``: ``STMT``, run once, untimed (both run it in the kernel's
  namespace); ``%timeit STMT`` runs it in a function of its own, so nothing of it stays: ``pass``;
- ``%%time``, ``%%capture``, ``%%prun`` on a cell's first line: the line goes,
  the body runs as Python;
- any other line magic, shell escape (``!cmd``) or ``x = !cmd``/``x = %magic``: ``pass``,
  with the line kept as a comment (nothing of it runs);
- a line inside a string, inside brackets or after a backslash is never one of these (found
  with `tokenize`), so a string's ``%d`` line stays as written;
- any other cell magic (``%%timeit``, ``%%bash``, ``%%writefile``...): the whole cell is comments.

The rewrite is used only when it compiles; a cell that is valid Python is never touched, and
rewriting twice changes nothing more.
"""

from __future__ import annotations

import io
import re
import tokenize

#: Magics that run their statement in the kernel's namespace: graded, it runs once, untimed.
#: (``%timeit`` runs it in a function of its own, so nothing it binds stays: graded, ``pass``.)
_RUN_ONCE = ("time", "prun")
_BODY_KEPT = ("time", "capture", "prun")
_LINE = re.compile(r"^(?P<indent>[ \t]*)(?P<rest>(?:%|!|\w+[ \t]*=[ \t]*[%!]).*)$")
_MAGIC = re.compile(r"^%(?P<name>\w+)(?P<args>.*)$")
_OPTIONS = re.compile(r"^(?:[ \t]*-\w+(?:[ \t]+\d+)?)*[ \t]*")
NOTE = "IPython only, not run at grading"


def readable(source: str, filename: str = "<cell>") -> str:
    """A cell as the export (and so the grader and the self-check) reads it: `source` when it
    compiles, else its IPython lines made Python when that compiles; else the `SyntaxError`
    of `source` itself is raised (as are `compile`'s other errors)."""
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError:
        python = as_python(source)
        if python is None:
            raise
        return python
    return source


def as_python(source: str) -> str | None:
    """For a cell that does not compile: its IPython lines made Python (see the module), or
    None when it has none or the rewrite does not compile either (its own error stands)."""
    text = rewritten(source)
    if text is None:
        return None
    try:
        compile(text, "<cell>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return text


def rewritten(source: str) -> str | None:
    """`source` with its IPython lines made Python (see the module), compiled or not (the
    export compiles a large cell's rewrite in a bounded child first); None when it has none."""
    lines = source.split("\n")
    head = next((i for i, line in enumerate(lines) if line.strip()), None)
    if head is not None and lines[head].lstrip().startswith("%%"):
        name = lines[head].lstrip()[2:].split(maxsplit=1)
        if name and name[0] in _BODY_KEPT:
            lines[head] = f"# {lines[head].strip()}  ({NOTE})"
            body = "\n".join(lines)
            return rewritten(body) or body
        else:
            return "\n".join(f"# {line}" if line.strip() else line for line in lines)
    changed = False
    inside = _not_statements(source)
    for i, line in enumerate(lines):
        if i + 1 in inside:
            continue
        match = _LINE.match(line)
        if match is None:
            continue
        indent, rest = match["indent"], match["rest"]
        magic = _MAGIC.match(rest)
        if magic is not None and magic["name"] in _RUN_ONCE:
            statement = _OPTIONS.sub("", magic["args"], count=1).strip()
            if statement:
                lines[i], changed = f"{indent}{statement}  # {rest.strip()} ({NOTE})", True
                continue
        lines[i], changed = f"{indent}pass  # {rest.strip()} ({NOTE})", True
    return "\n".join(lines) if changed else None


def _not_statements(source: str) -> set[int]:
    """The lines (from 1) that do not start a statement, so are never an IPython line: inside
    a string, inside brackets, or after a backslash. Found with `tokenize`, which reads
    ``%time`` and ``!ls`` as tokens too; where it cannot read the cell, none."""
    inside: set[int] = set()
    depth, last_row = 0, 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            (row, _), (end, _) = token.start, token.end
            if row > last_row and depth > 0:
                inside.update(range(last_row + 1, row + 1))  # lines that start within brackets
            last_row = max(last_row, end)
            if token.type == tokenize.STRING and end > row:
                inside.update(range(row + 1, end + 1))
            elif token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth = max(0, depth - 1)
    except (tokenize.TokenError, SyntaxError):
        return set()
    lines = source.split("\n")
    inside.update(i + 2 for i, line in enumerate(lines[:-1]) if line.endswith("\\"))
    return inside
