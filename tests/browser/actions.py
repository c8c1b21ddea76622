"""What a learner does to one cell or one notebook in JupyterLab, beyond Run All: type into a
cell, run just that cell, save, and see whether the tab says "modified".

Every wait polls the page for a condition; nothing sleeps a fixed time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote, urlsplit

from tests.browser.harness import LabPage, OpenNotebook, menu, wait_until

if TYPE_CHECKING:
    from playwright.sync_api import Response

#: The tab of a notebook with unsaved changes carries this class (the dot instead of the ×).
DIRTY = "jp-mod-dirty"

#: Is the tab of the notebook at this path (as the server names it) the one in front?
CURRENT_TAB = """path => {
  const tab = [...document.querySelectorAll('.lm-DockPanel-tabBar .lm-TabBar-tab')]
    .find(t => (t.getAttribute('title') || '').split('\\n').includes('Path: ' + path));
  return !!tab && tab.classList.contains('lm-mod-current');
}"""

#: The prompt of cell `index` shows an execution count that differs from `before`.
RAN = """([scope, index, before]) => {
  const cell = document.querySelectorAll(`${scope} .jp-Notebook .jp-Cell`)[index];
  const prompt = cell.querySelector('.jp-InputPrompt').textContent.trim();
  return /^\\[\\d+\\]:$/.test(prompt) && prompt !== before;
}"""


def tab_classes(nb: OpenNotebook) -> str:
    tab = nb.page.locator(f'.lm-DockPanel-tabBar .lm-TabBar-tab[data-id="{nb.panel_id}"]')
    return tab.get_attribute("class") or ""


def close(nb: OpenNotebook) -> None:
    """Close the tab (a saved notebook asks nothing), so later tests open theirs in a page
    that is not carrying every earlier notebook's cells."""
    tab = nb.page.locator(f'.lm-DockPanel-tabBar .lm-TabBar-tab[data-id="{nb.panel_id}"]')
    tab.locator(".lm-TabBar-tabCloseIcon").click()
    nb.panel.wait_for(state="detached", timeout=10_000)


def is_dirty(nb: OpenNotebook) -> bool:
    """Would closing the tab ask to save?"""
    return DIRTY in tab_classes(nb).split()


def save(nb: OpenNotebook) -> int:
    """File > Save (Ctrl+S) and wait until the server has written the file (the PUT answered:
    Jupyter Server writes in place, so the file is only whole once it has). The status."""
    nb.activate()

    def is_save(response: Response) -> bool:
        return response.request.method == "PUT" and "/api/contents/" in response.url

    with nb.page.expect_response(is_save, timeout=30_000) as answer:
        nb.page.keyboard.press("Control+s")
    nb.page.wait_for_function(
        "([sel, cls]) => !document.querySelector(sel).classList.contains(cls)",
        arg=[f'.lm-TabBar-tab[data-id="{nb.panel_id}"]', DIRTY],
        timeout=10_000,
    )
    return answer.value.status


def set_source(nb: OpenNotebook, index: int, code: str) -> None:
    """Replace cell `index`'s text with `code`, as pasting it over a select-all does (one
    input event, so the editor neither auto-indents nor closes brackets on the way)."""
    nb.activate()
    editor = nb.cells.nth(index).locator(".cm-content")
    editor.click()
    nb.page.keyboard.press("Control+a")
    nb.page.keyboard.insert_text(code)
    nb.page.keyboard.press("Escape")  # back to command mode, the cell still selected


def run_cell(nb: OpenNotebook, index: int, timeout_ms: int = 30_000) -> str:
    """Select cell `index`, run it in place (Ctrl+Enter) and wait for its new execution count.
    Its output text."""
    nb.activate()
    cell = nb.cells.nth(index)
    prompt = cell.locator(".jp-InputPrompt")
    before = prompt.text_content() or ""
    prompt.click()  # command mode, this cell selected
    nb.page.keyboard.press("Control+Enter")
    nb.page.wait_for_function(
        RAN, arg=[nb.scope, index, before.strip()], timeout=timeout_ms, polling=100
    )
    return nb.output_text(index)


def save_all(lab_page: LabPage, paths: Iterable[str], timeout: float = 60.0) -> dict[str, int]:
    """File > Save All, and wait until the server has answered the save of each of `paths`
    (as the server names them). Their statuses; every open document is saved, as in Lab."""
    wanted = {f"/api/contents/{quote(path)}" for path in paths}
    answered: dict[str, int] = {}

    def record(response: Response) -> None:
        where = urlsplit(response.url).path
        if response.request.method == "PUT" and where in wanted:
            answered[unquote(where.removeprefix("/api/contents/"))] = response.status

    lab_page.page.on("response", record)
    try:
        menu(lab_page.page, "File", "docmanager:save-all")
        wait_until(lambda: len(answered) == len(wanted), timeout, "every save", lab_page.pause)
    finally:
        lab_page.page.remove_listener("response", record)
    return answered


def local_links(nb: OpenNotebook, index: int) -> list[str]:
    """The files the links of markdown cell `index` open, as the server names them.

    JupyterLab renders a relative link as ``/files/<path>?_xsrf=...``, resolved against the
    notebook's folder, and opens it in a tab when clicked."""
    hrefs: list[str] = (
        nb.cells.nth(index)
        .locator(".jp-RenderedMarkdown a[href]")
        .evaluate_all("links => links.map(a => a.getAttribute('href'))")
    )
    files = f"{nb.server.base}/files/"
    return [unquote(urlsplit(h).path.removeprefix("/files/")) for h in hrefs if h.startswith(files)]


def follow_link(nb: OpenNotebook, index: int, path: str) -> None:
    """Click the link of cell `index` that opens `path`, and wait until its tab is in front."""
    nb.activate()
    link = nb.cells.nth(index).locator(f'a[href^="{nb.server.base}/files/{quote(path)}?"]')
    link.first.click()
    nb.page.wait_for_function(CURRENT_TAB, arg=path, timeout=15_000)
