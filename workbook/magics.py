"""IPython-only lines in a graded cell, made plain Python the way a learner would expect.

A kernel runs ``%time load(rows)`` or ``!ls`` in a cell; plain Python calls them syntax
errors. A learner who timed an answer once should not lose the whole build for it, and the
self-check and the grader must agree (both go through `workbook.export`). So a cell that does
not compile as it stands is tried once more with its IPython lines rewritten, line for line
(every other line keeps its number):

- ``%time STMT``, ``%timeit [-n N -r R] STMT``, ``%prun STMT``: ``STMT``, run once, untimed;
- ``%%time``, ``%%timeit``, ``%%capture``, ``%%prun`` on a cell's first line: the line goes,
  the body runs as Python;
- any other line magic, shell escape (``!cmd``) or ``x = !cmd``/``x = %magic``: ``pass``,
  with the line kept as a comment (nothing of it runs);
- any other cell magic (``%%bash``, ``%%writefile``...): the whole cell is comments.

The rewrite is used only when it compiles; a cell that is valid Python is never touched, and
rewriting twice changes nothing more.
"""

from __future__ import annotations

import re

#: Magics whose argument is a statement: graded, it runs once without the timing.
_RUN_ONCE = ("time", "timeit", "prun")
_BODY_KEPT = ("time", "timeit", "capture", "prun")
_LINE = re.compile(r"^(?P<indent>[ \t]*)(?P<rest>(?:%|!|\w+[ \t]*=[ \t]*[%!]).*)$")
_MAGIC = re.compile(r"^%(?P<name>\w+)(?P<args>.*)$")
_OPTIONS = re.compile(r"^(?:[ \t]*-\w+(?:[ \t]+\d+)?)*[ \t]*")
NOTE = "IPython only, not run at grading"


def as_python(source: str) -> str | None:
    """For a cell that does not compile: its IPython lines made Python (see the module), or
    None when it has none or the rewrite does not compile either (its own error stands)."""
    text = _rewrite(source)
    if text is None:
        return None
    try:
        compile(text, "<cell>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return text


def _rewrite(source: str) -> str | None:
    lines = source.split("\n")
    head = next((i for i, line in enumerate(lines) if line.strip()), None)
    if head is not None and lines[head].lstrip().startswith("%%"):
        name = lines[head].lstrip()[2:].split(maxsplit=1)
        if name and name[0] in _BODY_KEPT:
            lines[head] = f"# {lines[head].strip()}  ({NOTE})"
            body = "\n".join(lines)
            return _rewrite(body) or body
        else:
            return "\n".join(f"# {line}" if line.strip() else line for line in lines)
    changed = False
    for i, line in enumerate(lines):
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
