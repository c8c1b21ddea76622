"""Every notebook of the arc, as a learner's JupyterLab opens it: nothing to save on open, and a
save without a change gives back the very same bytes (so `git status` stays clean, and closing
the tab never asks). Each one ends with a link that opens the next notebook of the arc.

All of them are opened in one go, on this module's own copies, so their kernels start together;
the server runs with the config `make lab` writes, and its log must hold no warning a learner
cannot act on.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.browser.actions import close, follow_link, is_dirty, local_links, save_all
from tests.browser.harness import (
    COPIED,
    ROOT,
    WORK,
    LabPage,
    LabServer,
    OpenNotebook,
    copy_notebooks,
    wait_until,
)
from tests.unit.test_notebook_files import next_in_arc

#: Every notebook of the arc, as a path relative to the repository (and to `HERE`).
NOTEBOOKS = sorted(
    f"{folder}/{p.name}" for folder in COPIED for p in (ROOT / folder).glob("*.ipynb")
)
#: This module's own copies: other tests leave their copies run and unsaved in open tabs.
HERE = WORK / "roundtrip"


@dataclass
class Visit:
    """One notebook's round trip: whether it opened "modified", its bytes before and after a
    save, the files its last cell links to, and the one the link to the next notebook opened."""

    dirty_on_open: bool = False
    before: bytes = b""
    after: bytes = b""
    links: list[str] = field(default_factory=list)
    opened: str | None = None


def served(relative: str) -> str:
    """`relative` (a path under `HERE`) as the server names it."""
    return (HERE / relative).relative_to(ROOT).as_posix()


@pytest.fixture(scope="module")
def visits(lab_page: LabPage) -> Iterator[dict[str, Visit]]:
    copy_notebooks(ROOT, HERE)
    opened: dict[str, OpenNotebook] = {}
    found: dict[str, Visit] = {}
    try:
        for relative in NOTEBOOKS:
            path = HERE / relative
            if not path.exists():
                continue
            before = path.read_bytes()
            cells = len(json.loads(before)["cells"])
            # Opened one after another, their kernels starting meanwhile, as tabs a learner opens.
            opened[relative] = lab_page.open(served(relative), cells, wait_kernel=False)
            found[relative] = Visit(before=before)
        with lab_page.timings("every notebook", "wait for their kernels"):
            for nb in opened.values():
                nb.kernel_id = wait_until(nb.kernel_ready, 60.0, nb.path, lab_page.pause)
        for relative, nb in opened.items():
            found[relative].dirty_on_open = is_dirty(nb)
        with lab_page.timings("every notebook", "File > Save All, nothing changed"):
            save_all(lab_page, [nb.path for nb in opened.values()])
        for relative, nb in opened.items():
            visit, target = found[relative], next_in_arc(relative)
            visit.after = (HERE / relative).read_bytes()
            last = nb.cells.count() - 1
            visit.links = local_links(nb, last)
            if target is not None and served(target) in visit.links:
                follow_link(nb, last, served(target))
                visit.opened = target
        yield found
    finally:
        for nb in opened.values():
            nb.shut_down()
        if not lab_page.page.locator(".jp-Dialog").count():
            for nb in opened.values():
                if not is_dirty(nb):
                    close(nb)


@pytest.mark.parametrize("relative", NOTEBOOKS)
def test_opening_and_saving_changes_no_byte(visits: dict[str, Visit], relative: str) -> None:
    if relative not in visits:
        pytest.skip(f"{relative} does not exist here")
    visit = visits[relative]
    if visit.after != visit.before:
        diff = difflib.unified_diff(
            visit.before.decode().splitlines(), visit.after.decode().splitlines(), lineterm=""
        )
        shown = "\n".join(list(diff)[2:40])
        pytest.fail(
            f"JupyterLab's save rewrote {relative} (fix: .venv/bin/python"
            f" scripts/normalize_notebooks.py):\n{shown}"
        )
    assert not visit.dirty_on_open, f"{relative} is marked modified as soon as it opens"


@pytest.mark.parametrize("relative", NOTEBOOKS)
def test_the_last_cell_links_to_the_next_notebook(visits: dict[str, Visit], relative: str) -> None:
    if relative not in visits:
        pytest.skip(f"{relative} does not exist here")
    target = next_in_arc(relative)
    if target is None:
        pytest.skip(f"{relative} is the last notebook of the arc")
    visit = visits[relative]
    assert visit.opened == target, (
        f"the last cell of {relative} has no link that opens {target}"
        f" (its links: {visit.links or 'none'})"
    )


def test_the_server_log_has_no_warning_a_learner_cannot_act_on(
    visits: dict[str, Visit], lab: LabServer
) -> None:
    """Every kernel started, every notebook opened and saved: with `make lab`'s config, the
    kernels' connections are encrypted, trust is not mentioned, and tornado has no word on
    the websocket pings."""
    assert visits
    log = lab.log.read_text(encoding="utf-8", errors="replace")
    for noise in ("without encryption", "is not trusted", "websocket_ping_timeout"):
        assert noise not in log, f"the server log says {noise!r}:\n{lab.log_tail()}"
