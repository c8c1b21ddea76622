"""The harness itself, on a scratch notebook: the kernel runs on the interpreter the suite was
pointed at, an ipywidgets slider renders and answers the keyboard, and the page cannot reach
anything but this machine."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.browser.harness import WORK, OpenNotebook

CELLS = [
    "import sys\n\nimport ipywidgets as widgets\n\nprint(sys.prefix)",
    "slider = widgets.IntSlider(value=3, min=1, max=9, description='n')\nslider",
    "print('done')",
]


def scratch_notebook() -> Path:
    cells: list[dict[str, object]] = [
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": s}
        for s in CELLS
    ]
    kernelspec = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    notebook = {"cells": cells, "metadata": {"kernelspec": kernelspec}}
    path = WORK / "scratch" / "smoke.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**notebook, "nbformat": 4, "nbformat_minor": 5}), "utf-8")
    return path


def test_kernel_widgets_and_network_fence(
    open_notebook: Callable[[Path], OpenNotebook], kernel_prefix: str
) -> None:
    nb = open_notebook(scratch_notebook())
    nb.run_all()
    assert nb.prompts() == ["[1]:", "[2]:", "[3]:"]
    # With WORKBOOK_JUPYTER_PYTHON set (the Binder check), this is that venv, not ours.
    assert nb.output_text(0).strip() == kernel_prefix
    handle = nb.cells.nth(1).locator(".widget-slider .noUi-handle")
    handle.wait_for(state="visible")
    assert float(handle.get_attribute("aria-valuenow") or "nan") == 3
    handle.focus()
    handle.press("ArrowRight")
    nb.cells.nth(1).locator(".widget-readout", has_text="4").wait_for()
    assert "Error displaying widget" not in nb.all_output_text()
    nb.screenshot("00_smoke_widget")

    outcome = nb.page.evaluate(
        "url => fetch(url, {mode: 'no-cors'}).then(() => 'reached', () => 'refused')",
        "https://cdn.jsdelivr.net/npm/nothing.js",
    )
    assert outcome == "refused", "a request left this machine"
