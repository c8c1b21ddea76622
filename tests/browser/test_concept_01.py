"""Concept notebook 01 in JupyterLab: Run All, then drive the backoff explorer like a learner,
once with the mouse and arrow keys, once from the keyboard alone.

Each move of a control must redraw the plot exactly once (the one image's `src` changes, then
stays; no second image appears) and the summary line must say what the formula says: with
N attempts there are N-1 sleeps, and without jitter they total
sum(min(base * 2**(k-1), cap) for k in 1..N-1). The line under the plot, and the image's alt,
must say what `workbook.explorer.describe` says of the settings the controls show.

The notebook is opened and run once for this file. Each test starts from the explorer in its
opening state: the first from the one Run All drew, a later one after running the explorer's
cell (the one tagged ``explorer``) again, so either test may run first.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

import pytest

from tests.browser import harness
from tests.browser.actions import run_cell
from tests.browser.conftest import CALL_REPORT, cell_count
from tests.browser.harness import ROOT, SETTLE_MS, WORK, LabPage, OpenNotebook
from workbook.explorer import ALT_PREFIX, OPENING, Jitter, Settings, describe

if TYPE_CHECKING:
    from playwright.sync_api import Locator

NOTEBOOK = WORK / "notebooks" / "01_retry_with_backoff.ipynb"

SUMMARY = re.compile(
    r"(?P<attempts>\d+) attempts? · (?P<sleeps>\d+) sleeps? · "
    r"total wait (?P<total>\d+(?:\.\d+)?) s · cap (?P<cap>\d+(?:\.\d+)?) s"
)

CAP_BITES = re.compile(r"cap bites on (?P<cut>\d+) of (?P<of>\d+)")

#: Counts, inside one explorer, every change of an image's `src`, every image added, and
#: every change of the summary, with the time of the last one. Installed once per explorer
#: (installing it again changes nothing).
WATCH = """(root) => {
  if (root.__watched) return;
  root.__watched = true;
  root.__imageChanges = 0;
  root.__lastChange = performance.now();
  new MutationObserver(records => {
    for (const r of records) {
      const inSummary = r.target.closest && r.target.closest('.backoff-summary')
        || r.target.parentElement && r.target.parentElement.closest('.backoff-summary');
      if (r.type === 'attributes' && r.target.tagName === 'IMG') root.__imageChanges++;
      if (r.type === 'childList') {
        for (const n of r.addedNodes) {
          if (n.tagName === 'IMG' || (n.querySelector && n.querySelector('img'))) {
            root.__imageChanges++;
          }
        }
      }
      if (inSummary || r.type === 'attributes' && r.target.tagName === 'IMG') {
        root.__lastChange = performance.now();
      }
    }
  }).observe(root, {subtree: true, childList: true, characterData: true,
                    attributes: true, attributeFilter: ['src']});
}"""

#: True once the image changed and the summary differs from `before`, and neither has
#: changed for `settle` ms (a second redraw would land inside that window).
SETTLED = """(root, [before, settle]) => {
  const summary = root.querySelector('.backoff-summary').innerText.trim();
  return root.__imageChanges >= 1 && summary !== before
    && performance.now() - root.__lastChange >= settle;
}"""


@dataclass(frozen=True)
class Policy:
    """The base delay and cap the explorer's sliders show (this test leaves them alone)."""

    base: float
    cap: float

    def waits(self, attempts: int) -> list[float]:
        """The formula: before retry k, wait min(base * 2**(k-1), cap); N attempts, N-1 waits."""
        return [min(self.base * 2.0 ** (k - 1), self.cap) for k in range(1, attempts)]

    def capped(self, attempts: int) -> int:
        return sum(self.base * 2.0 ** (k - 1) > self.cap for k in range(1, attempts))


@dataclass(frozen=True)
class Summary:
    attempts: int
    sleeps: int
    total: float
    cap: float
    text: str


@dataclass
class Explorer:
    """One backoff explorer on the page, with its mutations watched."""

    nb: OpenNotebook
    root: Locator

    @classmethod
    def first(cls, nb: OpenNotebook) -> Explorer:
        root = nb.panel.locator(".backoff-explorer").first
        root.locator(".backoff-summary").filter(has_text="attempt").wait_for()
        root.locator("img").first.wait_for()
        root.evaluate(WATCH)
        return cls(nb, root)

    def summary(self) -> Summary:
        text = self.root.locator(".backoff-summary").inner_text().strip()
        found = SUMMARY.search(text)
        assert found, f"the summary does not read like '4 attempts · 3 sleeps · ...': {text!r}"
        return Summary(
            int(found["attempts"]),
            int(found["sleeps"]),
            float(found["total"]),
            float(found["cap"]),
            text,
        )

    def image_src(self) -> str:
        images = self.root.locator("img")
        assert images.count() == 1, f"the explorer shows {images.count()} images, not one"
        return images.first.get_attribute("src") or ""

    def slider(self, label: str) -> Locator:
        """The handle of the slider beside the box labelled `label` (the handle has no name
        of its own in ipywidgets 8)."""
        row = self.root.locator(".widget-hbox:has(> .widget-slider)", has_text=label)
        return row.locator(".noUi-handle")

    def box(self, label: str) -> Locator:
        """The number box whose accessible name contains `label`."""
        return self.root.get_by_role("spinbutton", name=re.compile(re.escape(label)))

    def readout(self, label: str) -> float:
        return float(self.box(label).input_value())

    def policy(self) -> Policy:
        return Policy(self.readout("base delay"), self.readout("cap"))

    def assert_plain_opening(self) -> None:
        """The formula checks below start from no jitter and no Retry-After."""
        checked = [r.get_attribute("data-value") for r in self.jitter() if r.is_checked()]
        assert checked == ["none"], f"the explorer opens with {checked} jitter"
        retry_after = self.root.get_by_role("checkbox", name="server sends Retry-After")
        assert not retry_after.is_checked(), "the explorer opens with Retry-After on"

    def jitter(self) -> list[Locator]:
        return self.root.get_by_role("radio").all()

    def alt(self) -> str:
        """The line under the plot; it must also be the image's alt, prefix aside."""
        line = self.root.locator(".backoff-alt").inner_text().strip()
        image_alt = self.root.locator("img").get_attribute("alt") or ""
        assert line == "Figure: " + image_alt, f"the line {line!r} is not the alt {image_alt!r}"
        return line

    def change(self, act: Callable[[], None]) -> Summary:
        """Do `act`, wait for the explorer to settle, and check it redrew exactly once."""
        before_summary = self.summary().text
        before_src = self.image_src()
        self.root.evaluate("root => { root.__imageChanges = 0; }")
        act()
        self.nb.page.wait_for_function(
            f"([root, args]) => ({SETTLED})(root, args)",
            arg=[self.root.element_handle(), [before_summary, SETTLE_MS]],
            timeout=15_000,
            polling=100,
        )
        changes = self.root.evaluate("root => root.__imageChanges")
        assert changes == 1, f"the plot was redrawn {changes} times for one move, not once"
        assert self.image_src() != before_src, "the plot's image did not change"
        assert "Error displaying widget" not in self.nb.all_output_text()
        return self.summary()


def assert_formula(summary: Summary, policy: Policy, attempts: int) -> None:
    """The summary of a schedule without jitter says what the formula says."""
    assert summary.attempts == attempts, summary.text
    assert summary.sleeps == attempts - 1, f"{attempts} attempts need {attempts - 1} sleeps"
    assert summary.cap == policy.cap, summary.text
    want = sum(policy.waits(attempts))
    # The summary rounds to 0.1 s (0.01 s below a second).
    assert abs(summary.total - want) <= 0.05 + 1e-9, f"total wait should be {want:.2f} s"
    bites = CAP_BITES.search(summary.text)
    if bites:  # the cap cuts every wait whose uncapped value base * 2**(k-1) exceeds it
        expected = (policy.capped(attempts), attempts - 1)
        assert (int(bites["cut"]), int(bites["of"])) == expected, summary.text


def aria_int(handle: Locator, attribute: str) -> int:
    """A slider handle's value or bound (noUiSlider writes them as floats, "9.0")."""
    return round(float(handle.get_attribute(attribute) or "nan"))


def drive_explorer(nb: OpenNotebook, prefix: str) -> None:
    """Move attempts up one, switch jitter to full, then move attempts to 1."""
    explorer = Explorer.first(nb)
    explorer.root.scroll_into_view_if_needed()
    explorer.assert_plain_opening()
    policy = explorer.policy()
    attempts_handle = explorer.slider("attempts")
    start = aria_int(attempts_handle, "aria-valuenow")
    assert_formula(explorer.summary(), policy, start)
    nb.screenshot(f"{prefix}_explorer_opening", explorer.root)

    def press(key: str) -> Callable[[], None]:
        def act() -> None:
            attempts_handle.focus()
            attempts_handle.press(key)

        return act

    # One step up, or down if the slider is already at its top.
    up = start < aria_int(attempts_handle, "aria-valuemax")
    more = start + 1 if up else start - 1
    deterministic = explorer.change(press("ArrowRight" if up else "ArrowLeft"))
    assert_formula(deterministic, policy, more)
    nb.screenshot(f"{prefix}_explorer_attempts_{more}", explorer.root)

    jitter = explorer.root.get_by_role("radio", name="full", exact=True)
    full = explorer.change(jitter.click)
    assert (full.attempts, full.sleeps) == (more, more - 1), full.text
    assert "full jitter" in full.text, full.text
    # Full jitter draws each wait from U(0, min(cap, base * 2**(k-1))): never more in total.
    assert 0 < full.total <= sum(policy.waits(more)) + 0.05, full.text
    assert full.total != deterministic.total, "full jitter left every wait at its maximum"
    nb.screenshot(f"{prefix}_explorer_full_jitter", explorer.root)

    # One attempt: nobody waits after the last attempt, so no sleep at all, jitter or not.
    one = explorer.change(press("Home"))
    assert_formula(one, policy, 1)
    assert one.total == 0, one.text
    nb.screenshot(f"{prefix}_explorer_attempts_1", explorer.root)


#: Where Tab goes from the explorer's first control, in order: (role, accessible name), or
#: ("slider", label of the box beside it): ipywidgets 8 gives a slider's handle no name.
#: The Retry-After boxes are disabled, so skipped, until the checkbox before them is ticked.
TAB_ORDER: list[tuple[str, str]] = [
    ("spinbutton", "max attempts"),
    ("slider", "max attempts"),
    ("spinbutton", "base delay (s)"),
    ("slider", "base delay (s)"),
    ("spinbutton", "cap (s)"),
    ("slider", "cap (s)"),
    ("spinbutton", "clients"),
    ("slider", "clients"),
    ("spinbutton", "seed"),
    ("radio", "none"),
    ("radio", "full"),
    ("radio", "equal"),
    ("radio", "decorrelated"),
    ("checkbox", "server sends Retry-After"),
    ("spinbutton", "Retry-After (s)"),
    ("spinbutton", "after attempt"),
]

#: Whether focus is inside the explorer, and whether a keyboard user can see where: the
#: explorer's own 3 px solid ring (ipywidgets draws a pale 1 px line on a button, a pale
#: border on a box and no outline at all on a slider's handle).
FOCUS = """(root) => {
  const style = getComputedStyle(document.activeElement);
  return {
    inside: root.contains(document.activeElement),
    ring: style.outlineStyle === 'solid' && parseFloat(style.outlineWidth) >= 3,
  };
}"""


def control(explorer: Explorer, role: str, name: str) -> Locator:
    if role == "slider":
        return explorer.slider(name)
    return explorer.root.get_by_role(role, name=name, exact=True)  # type: ignore[arg-type]


#: Every value the explorer's controls show, in one read: each number box by its label's
#: text, the checked jitter, and whether Retry-After is ticked.
SHOWN = """(root) => {
  const shown = {};
  for (const box of root.querySelectorAll('input[type=number]')) {
    shown[root.querySelector(`label[for="${box.id}"]`).textContent.trim()] = box.value;
  }
  shown.jitter = [...root.querySelectorAll('input[type=radio]')]
    .filter(r => r.checked).map(r => decodeURIComponent(r.dataset.value));
  shown.ticked = root.querySelector('input[type=checkbox]').checked;
  return shown;
}"""


def shown_settings(explorer: Explorer) -> Settings:
    """The settings the explorer's controls show, read from the page."""
    shown = explorer.root.evaluate(SHOWN)
    assert len(shown["jitter"]) == 1, f"{shown['jitter']} are checked, not one jitter"
    return Settings(
        max_attempts=int(shown["max attempts"]),
        base_delay=float(shown["base delay (s)"]),
        cap=float(shown["cap (s)"]),
        jitter=cast(Jitter, shown["jitter"][0]),
        retry_after=float(shown["Retry-After (s)"]) if shown["ticked"] else None,
        retry_after_on=int(shown["after attempt"]),
        clients=int(shown["clients"]),
        seed=int(shown["seed"]),
    )


def drive_by_keyboard(explorer: Explorer, prefix: str) -> None:
    """From the explorer's cell, by keyboard events alone: Tab into the explorer and through
    every control (each labelled, each showing a focus ring), type a cap, nudge it with an
    arrow key, choose full jitter with Space, tick Retry-After with Space and step it with an
    arrow key. After each change the figure is redrawn once and the line under it says what
    the new settings show; then Tab leaves the explorer."""
    keyboard = explorer.nb.page.keyboard
    explorer.assert_plain_opening()
    for role, name in TAB_ORDER:
        found = control(explorer, role, name).count()
        assert found == 1, f"{found} controls are a {role} named {name!r}, not one"
    start = shown_settings(explorer)
    assert explorer.alt() == ALT_PREFIX + describe(start)
    stops = iter(TAB_ORDER)

    def tab_to(count: int = 1) -> None:
        """Press Tab `count` times; each time focus must land on the next control in order,
        with its ring showing."""
        for _ in range(count):
            keyboard.press("Tab")
            role, name = next(stops)
            focused = control(explorer, role, name).evaluate("el => el === document.activeElement")
            assert focused, f"Tab did not reach the {role} {name!r} next"
            where = explorer.root.evaluate(FOCUS)
            assert where["ring"], f"the {role} {name!r} has focus but shows no ring"

    def expect(settings: Settings, act: Callable[[], None]) -> Summary:
        moved = ", ".join(f"{f}={getattr(settings, f)}" for f in ("cap", "jitter", "retry_after"))
        with explorer.nb.lab_page.timings(explorer.nb.label, f"key, redraw, settle: {moved}"):
            summary = explorer.change(act)
        assert shown_settings(explorer) == settings
        assert explorer.alt() == ALT_PREFIX + describe(settings)
        return summary

    # The one step that is not a key: select the explorer's cell, as a learner clicks it (or
    # reaches it with the arrow keys). From the cell, Tab passes its toolbar, then enters the
    # explorer at its first control.
    explorer.nb.cells.nth(explorer_cell()).locator(".jp-InputPrompt").click()
    for _ in range(8):
        keyboard.press("Tab")
        if explorer.root.evaluate(FOCUS)["inside"]:
            break
    role, name = next(stops)
    first = control(explorer, role, name).evaluate("el => el === document.activeElement")
    assert first, f"Tab from the cell did not enter the explorer at its {role} {name!r}"
    assert explorer.root.evaluate(FOCUS)["ring"], "the first control shows no focus ring"
    tab_to(4)  # max attempts' slider, base delay's box and slider, the cap's box

    def type_cap() -> None:
        keyboard.press("Control+a")
        keyboard.type("2")
        keyboard.press("Enter")

    capped = replace(start, cap=2.0)
    lowered = expect(capped, type_cap)
    assert lowered.cap == 2.0, lowered.text
    if start == OPENING:  # the notebook's opening: 32.6 s of waits, four of them cut to 2 s
        assert "32.6 s of waiting" in describe(start)
        assert lowered.total == 11.0, lowered.text
        assert "11.0 s of waiting in all" in explorer.alt()
    explorer.nb.screenshot(f"{prefix}_cap_typed", explorer.root)

    tab_to()  # the cap's slider
    nudged = replace(capped, cap=2.5)
    expect(nudged, lambda: keyboard.press("ArrowRight"))

    tab_to(5)  # clients' box and slider, seed, the radios "none" and "full"
    jittered = replace(nudged, jitter="full")
    full = expect(jittered, lambda: keyboard.press("Space"))
    assert "full jitter" in full.text, full.text

    tab_to(3)  # "equal", "decorrelated", the Retry-After box
    hinted = replace(jittered, retry_after=5.0)
    expect(hinted, lambda: keyboard.press("Space"))
    tab_to()  # the Retry-After seconds, enabled now
    later = replace(hinted, retry_after=5.5)
    expect(later, lambda: keyboard.press("ArrowUp"))
    explorer.nb.screenshot(f"{prefix}_retry_after", explorer.root)

    tab_to()  # after attempt
    assert next(stops, None) is None
    keyboard.press("Tab")
    assert not explorer.root.evaluate(FOCUS)["inside"], "Tab stayed inside the explorer"
    assert "Error displaying widget" not in explorer.nb.all_output_text()


@pytest.fixture(scope="module")
def notebook_01(lab_page: LabPage) -> Iterator[OpenNotebook]:
    """Notebook 01 opened and run top to bottom once for this file's tests."""
    if not NOTEBOOK.exists():
        pytest.skip("notebooks/01_retry_with_backoff.ipynb does not exist yet")
    nb = lab_page.open(NOTEBOOK.relative_to(ROOT).as_posix(), cell_count(NOTEBOOK))
    try:
        nb.screenshot("01_opened")
        nb.run_all()
        nb.screenshot("01_ran_all")
        yield nb
    finally:
        nb.shut_down()


@pytest.fixture
def ran_01(notebook_01: OpenNotebook, request: pytest.FixtureRequest) -> Iterator[OpenNotebook]:
    """The notebook after Run All: every cell ran, none failed. A failed test leaves a
    screenshot of the page, as `open_notebook` does."""
    prompts = notebook_01.prompts()
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), f"not every cell ran: {prompts}"
    assert notebook_01.error_outputs() == [], "a cell wrote to stderr or raised"
    yield notebook_01
    report = request.node.stash.get(CALL_REPORT, None)
    if report is not None and report.failed:
        with contextlib.suppress(Exception):
            harness.screenshot(notebook_01.page, f"FAILED_{request.node.name}")


def explorer_cell() -> int:
    """The index of the explorer's cell (tagged ``explorer``) among all cells."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    tagged = [i for i, c in enumerate(cells) if "explorer" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1, f"{len(tagged)} cells are tagged explorer, not one"
    return tagged[0]


#: The notebook tabs whose explorer a test has moved since Run All.
_MOVED: set[str] = set()


def fresh_explorer(nb: OpenNotebook) -> Explorer:
    """The explorer in its opening state: the one Run All drew, if no test has moved it yet;
    else the explorer's cell runs again, and a new panel replaces the old."""
    if nb.panel_id in _MOVED:
        run_cell(nb, explorer_cell())
    _MOVED.add(nb.panel_id)
    explorer = Explorer.first(nb)
    explorer.root.scroll_into_view_if_needed()
    return explorer


def test_explorer_redraws_once_per_move_and_matches_the_formula(ran_01: OpenNotebook) -> None:
    fresh_explorer(ran_01)
    drive_explorer(ran_01, "01")


def test_explorer_is_driven_by_the_keyboard_alone(ran_01: OpenNotebook) -> None:
    drive_by_keyboard(fresh_explorer(ran_01), "01_keyboard")
