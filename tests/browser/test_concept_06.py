"""Concept notebook 06 in JupyterLab: Run All, then drive the replay explorer like a learner,
once with the mouse, once from the keyboard alone.

Every change of a control must redraw the figure exactly once (a new image, whose `src`
differs from the one before) and leave the page saying what notebook 06's model says of the
combination the controls now show: the verdict reads "✓ <verdict>" or "✗ <verdict>" as
`replay_model.run` gives it, and the line under the figure, also the image's alt, is
"Figure: " and `replay_figure.describe` of that outcome. The crash step's box and slider are
enabled only while the disturbance is the crash.

The notebook is opened and run once for this file. Each test starts from the explorer in its
opening state (the naive loop, a crash after step 2): the first from the one Run All drew, a
later one after running the explorer's cell (tagged ``explorer``) again, so either test may
run first.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pytest

from tests.browser import harness
from tests.browser.actions import run_cell
from tests.browser.conftest import CALL_REPORT, cell_count
from tests.browser.harness import ROOT, SETTLE_MS, WORK, LabPage, OpenNotebook
from workbook.teaching.replay_figure import describe
from workbook.teaching.replay_model import BY_NAME, DESIGNS, DISTURBANCES, Disturbance, run

if TYPE_CHECKING:
    from playwright.sync_api import Locator

NOTEBOOK = WORK / "notebooks" / "06_replay_safe_ingestion.ipynb"

#: How the line under the figure begins (`replay_explorer.ALT_PREFIX`).
ALT_PREFIX = "Figure: "
TITLE = {d.name: d.title for d in DESIGNS}

#: Counts, inside one explorer, every image added and every change of an image's `src`, with
#: the time of the last change to the image, the verdict or the line under the figure.
#: Installed once per explorer (installing it again changes nothing).
WATCH = """(root) => {
  if (root.__watched) return;
  root.__watched = true;
  root.__imageChanges = 0;
  root.__lastChange = performance.now();
  const shown = '.replay-verdict, .replay-figure, .replay-alt';
  new MutationObserver(records => {
    for (const r of records) {
      const node = r.target.nodeType === Node.ELEMENT_NODE ? r.target : r.target.parentElement;
      if (r.type === 'attributes' && r.target.tagName === 'IMG') root.__imageChanges++;
      if (r.type === 'childList') {
        for (const n of r.addedNodes) {
          if (n.tagName === 'IMG' || (n.querySelector && n.querySelector('img'))) {
            root.__imageChanges++;
          }
        }
      }
      if (node && node.closest(shown)) root.__lastChange = performance.now();
    }
  }).observe(root, {subtree: true, childList: true, characterData: true,
                    attributes: true, attributeFilter: ['src']});
}"""

#: True once a new image is shown (its `src` differs from `before`) and the verdict and the
#: line under the figure read what is expected.
SHOWS = """(root, [before, verdict, alt]) => {
  const text = sel => root.querySelector(sel).innerText.trim();
  const img = root.querySelector('.replay-figure img');
  return root.__imageChanges >= 1 && !!img && img.getAttribute('src') !== before
    && text('.replay-verdict') === verdict && text('.replay-alt') === alt;
}"""

#: True once nothing shown has changed for `settle` ms.
QUIET = "(root, settle) => performance.now() - root.__lastChange >= settle"

#: What the controls show, in one read: the checked radio of each group (by its label, as
#: `data-value` spells it), the crash step's box and slider, and whether each is disabled.
SHOWN = """(root) => {
  const groups = [...root.querySelectorAll('.widget-radio')].map(g =>
    [...g.querySelectorAll('input[type=radio]')]
      .filter(r => r.checked).map(r => decodeURIComponent(r.dataset.value)));
  const box = root.querySelector('.replay-crash input[type=number]');
  const handle = root.querySelector('.replay-crash .noUi-handle');
  const slider = root.querySelector('.replay-crash .noUi-target');
  return {
    design: groups[0], disturbance: groups[1],
    box: box.value, boxMax: box.max, boxDisabled: box.disabled,
    handle: handle.getAttribute('aria-valuenow'), handleMax: handle.getAttribute('aria-valuemax'),
    sliderDisabled: slider.hasAttribute('disabled'),
  };
}"""


@dataclass(frozen=True)
class Combination:
    """What the explorer's controls show: a design (by name), a disturbance, a crash step."""

    design: str
    disturbance: Disturbance
    crash_after: int

    def verdict(self) -> str:
        """The verdict line the page should show, from the model."""
        outcome = run(self.design, self.disturbance, self.crash_after)
        return f"{'✓' if outcome.converged else '✗'} {outcome.verdict}"

    def alt(self) -> str:
        """The line under the figure the page should show, from the model."""
        return ALT_PREFIX + describe(run(self.design, self.disturbance, self.crash_after))

    def steps(self) -> int:
        return len(BY_NAME[self.design].steps)


#: The explorer's opening: notebook 06's first demo, the naive loop dying two items into page 3.
OPENING = Combination("naive", "crash", 2)


@dataclass
class Explorer:
    """One replay explorer on the page, with its mutations watched."""

    nb: OpenNotebook
    root: Locator
    changes: int = 0
    """Controls changed since the explorer was drawn."""

    @classmethod
    def first(cls, nb: OpenNotebook) -> Explorer:
        root = nb.panel.locator(".replay-explorer").first
        root.locator(".replay-verdict").filter(has_text=re.compile("[✓✗]")).wait_for()
        root.locator(".replay-figure img").first.wait_for()
        root.evaluate(WATCH)
        return cls(nb, root)

    def verdict(self) -> str:
        return self.root.locator(".replay-verdict").inner_text().strip()

    def image_src(self) -> str:
        images = self.root.locator("img")
        assert images.count() == 1, f"the explorer shows {images.count()} images, not one"
        return images.first.get_attribute("src") or ""

    def alt(self) -> str:
        """The line under the figure; it must also be the image's alt, prefix aside."""
        line = self.root.locator(".replay-alt").inner_text().strip()
        image_alt = self.root.locator(".replay-figure img").get_attribute("alt") or ""
        assert line == ALT_PREFIX + image_alt, f"the line {line!r} is not the alt {image_alt!r}"
        return line

    def design_radio(self, design: str) -> Locator:
        return self.root.get_by_role("radio", name=TITLE[design], exact=True)

    def disturbance_radio(self, disturbance: Disturbance) -> Locator:
        return self.root.get_by_role("radio", name=DISTURBANCES[disturbance], exact=True)

    def crash_box(self) -> Locator:
        return self.root.get_by_role("spinbutton", name="crash after step", exact=True)

    def crash_handle(self) -> Locator:
        """The crash step's slider handle (ipywidgets 8 gives it no name of its own)."""
        return self.root.locator(".replay-crash .noUi-handle")

    def shown(self) -> Combination:
        """The combination the controls show, read from the page; the box and the slider
        agree, span the design's steps, and are enabled only for a crash."""
        shown = self.root.evaluate(SHOWN)
        assert len(shown["design"]) == 1, f"{shown['design']} are checked, not one design"
        assert len(shown["disturbance"]) == 1, f"{shown['disturbance']} are checked"
        by_title = {d.title: d.name for d in DESIGNS}
        by_label = {label: name for name, label in DISTURBANCES.items()}
        combination = Combination(
            by_title[shown["design"][0]],
            by_label[shown["disturbance"][0]],
            int(shown["box"]),
        )
        assert round(float(shown["handle"])) == combination.crash_after, shown
        steps = combination.steps()
        assert int(shown["boxMax"]) == steps == round(float(shown["handleMax"])), shown
        crash = combination.disturbance == "crash"
        assert shown["boxDisabled"] is (not crash), f"crash step box disabled: {shown}"
        assert shown["sliderDisabled"] is (not crash), f"crash step slider disabled: {shown}"
        return combination

    def assert_shows(self, want: Combination) -> None:
        """Controls, verdict and the line under the figure all say `want`."""
        assert self.shown() == want
        assert self.verdict() == want.verdict()
        assert self.alt() == want.alt()

    def change(self, act: Callable[[], None], want: Combination) -> None:
        """Do `act`, wait until the page shows `want` in a new figure, and check that it took
        exactly one redraw. A redraw arriving later still counts: the next change, or
        `assert_settled`, sees it."""
        before_src, before_alt = self.image_src(), self.alt()
        self.root.evaluate("root => { root.__imageChanges = 0; }")
        act()
        self.nb.page.wait_for_function(
            f"([root, args]) => ({SHOWS})(root, args)",
            arg=[self.root.element_handle(), [before_src, want.verdict(), want.alt()]],
            timeout=15_000,
            polling=50,
        )
        self.changes += 1
        redraws = self.root.evaluate("root => root.__imageChanges")
        assert redraws == 1, f"the figure was redrawn {redraws} times for one change, not once"
        assert self.image_src() != before_src, "the figure did not change"
        assert self.alt() != before_alt, "the line under the figure did not change"
        self.assert_shows(want)

    def assert_settled(self) -> None:
        """Nothing is redrawn once the page has shown the last change: no late second
        redraw, no stale state painted over the right one."""
        self.nb.page.wait_for_function(
            f"([root, settle]) => ({QUIET})(root, settle)",
            arg=[self.root.element_handle(), SETTLE_MS],
            timeout=15_000,
            polling=100,
        )
        redraws = self.root.evaluate("root => root.__imageChanges")
        assert redraws == 1, f"the last change was redrawn {redraws} times, not once"
        assert "Error displaying widget" not in self.nb.all_output_text()
        assert self.nb.error_outputs() == [], "a control change wrote to stderr or raised"


def drag_crash_step(explorer: Explorer, step: int, moves: int = 6) -> Callable[[], None]:
    """A mouse drag of the crash step's handle to `step`, in `moves` mouse moves through the
    positions between, as a hand moves it (one move would jump straight there)."""

    def act() -> None:
        page = explorer.nb.page
        handle = explorer.crash_handle().bounding_box()
        track = explorer.root.locator(".replay-crash .noUi-base").bounding_box()
        assert handle and track, "the crash step's slider is not on screen"
        low = round(float(explorer.crash_handle().get_attribute("aria-valuemin") or "nan"))
        high = round(float(explorer.crash_handle().get_attribute("aria-valuemax") or "nan"))
        x = track["x"] + track["width"] * (step - low) / (high - low)
        y = handle["y"] + handle["height"] / 2
        page.mouse.move(handle["x"] + handle["width"] / 2, y)
        page.mouse.down()
        page.mouse.move(x, y, steps=moves)
        page.mouse.up()

    return act


#: The mouse tour from the opening: one click or one drag each, every design and every
#: disturbance chosen once, the crash step dragged, and no two verdicts in a row alike.
#: (design, disturbance, crash step) after each; "drag" moves the crash step.
MOUSE_TOUR: list[tuple[str, Combination]] = [
    ("design", Combination("outbox", "crash", 2)),
    ("drag", Combination("outbox", "crash", 9)),  # the relay's repeat, recognised by job id
    ("design", Combination("compare-and-set", "crash", 8)),  # 9 is past its last step
    ("disturbance", Combination("compare-and-set", "stale", 8)),
    ("design", Combination("one-transaction", "stale", 8)),
    ("disturbance", Combination("one-transaction", "duplicate", 8)),
    ("design", Combination("checkpoint-first", "duplicate", 6)),
    ("disturbance", Combination("checkpoint-first", "poison", 6)),
    ("design", Combination("checkpoint-last-upsert", "poison", 6)),
    ("design", Combination("naive", "poison", 6)),
]


def by_mouse(explorer: Explorer, control: str, want: Combination) -> Callable[[], None]:
    """The click on the radio that chooses `want`'s design or disturbance, or the drag of
    the crash step to `want`'s."""
    if control == "design":
        radio = explorer.design_radio(want.design)
    elif control == "disturbance":
        radio = explorer.disturbance_radio(want.disturbance)
    else:
        return drag_crash_step(explorer, want.crash_after)
    return lambda: radio.click()


def drive_by_mouse(explorer: Explorer, prefix: str) -> None:
    """Click and drag through `MOUSE_TOUR`; after each move, one new figure and the verdict
    and line the model gives."""
    explorer.assert_shows(OPENING)
    # Notebook 06's own run of the naive loop: 22 rows for 20 launches, 2 doubled, none lost.
    assert explorer.verdict().startswith("✗ 2 rows doubled"), explorer.verdict()
    assert "22 rows for 20 launches: 0 lost, 2 doubled" in explorer.alt()
    explorer.nb.screenshot(f"{prefix}_opening", explorer.root)
    verdicts = [explorer.verdict()]
    for control, want in MOUSE_TOUR:
        act = by_mouse(explorer, control, want)
        moved = f"{want.design}, {want.disturbance}, {want.crash_after}"
        with explorer.nb.lab_page.timings(explorer.nb.label, f"{control}: {moved}"):
            explorer.change(act, want)
        assert explorer.verdict() != verdicts[-1], f"{moved}: the same verdict as the last"
        verdicts.append(explorer.verdict())
        if control == "drag":  # a screenshot costs about 0.4 s: three in all
            explorer.nb.screenshot(
                f"{prefix}_dragged_{want.design}_{want.crash_after}", explorer.root
            )
    explorer.assert_settled()
    last = MOUSE_TOUR[-1][1]
    explorer.nb.screenshot(f"{prefix}_{last.design}_{last.disturbance}", explorer.root)


#: Where Tab goes from the explorer's first control, in order: (role, accessible name), or
#: ("slider", "crash after step") for the handle beside that box.
TAB_ORDER: list[tuple[str, str]] = [
    *(("radio", d.title) for d in DESIGNS),
    *(("radio", label) for label in DISTURBANCES.values()),
    ("spinbutton", "crash after step"),
    ("slider", "crash after step"),
]

#: Whether focus is inside the explorer, and whether a keyboard user can see where: the
#: explorer's own 3 px solid ring.
FOCUS = """(root) => {
  const style = getComputedStyle(document.activeElement);
  return {
    inside: root.contains(document.activeElement),
    ring: style.outlineStyle === 'solid' && parseFloat(style.outlineWidth) >= 3,
  };
}"""


def control(explorer: Explorer, role: str, name: str) -> Locator:
    if role == "slider":
        return explorer.crash_handle()
    return explorer.root.get_by_role(role, name=name, exact=True)  # type: ignore[arg-type]


def drive_by_keyboard(explorer: Explorer, prefix: str) -> None:
    """From the explorer's cell, by keyboard events alone: Tab into the explorer, choose a
    design with Space, Tab on to the crash step and type one, nudge it with an arrow key on
    the slider, Shift+Tab back to a disturbance and choose it with Space (the crash step's
    controls then drop out of the Tab order), then Tab out. Each stop shows a focus ring;
    each change draws one new figure with the model's verdict and line."""
    keyboard = explorer.nb.page.keyboard
    explorer.assert_shows(OPENING)
    for role, name in TAB_ORDER:
        found = control(explorer, role, name).count()
        assert found == 1, f"{found} controls are a {role} named {name!r}, not one"
    order = [control(explorer, role, name) for role, name in TAB_ORDER]
    at = 0

    def focused(index: int) -> None:
        role, name = TAB_ORDER[index]
        has_focus = order[index].evaluate("el => el === document.activeElement")
        assert has_focus, f"focus is not on the {role} {name!r}"
        assert explorer.root.evaluate(FOCUS)["ring"], f"the {role} {name!r} shows no ring"

    def tab_to(index: int) -> None:
        """Tab (or Shift+Tab) to the control `index` of `TAB_ORDER`, stopping on each between."""
        nonlocal at
        while at != index:
            step = 1 if index > at else -1
            keyboard.press("Tab" if step == 1 else "Shift+Tab")
            at += step
            focused(at)

    def expect(want: Combination, act: Callable[[], None]) -> None:
        moved = f"{want.design}, {want.disturbance}, {want.crash_after}"
        with explorer.nb.lab_page.timings(explorer.nb.label, f"key, redraw: {moved}"):
            explorer.change(act, want)

    # The one step that is not a key: select the explorer's cell, as a learner clicks it (or
    # reaches it with the arrow keys). From the cell, Tab passes its toolbar, then enters the
    # explorer at its first control.
    explorer.nb.cells.nth(explorer_cell()).locator(".jp-InputPrompt").click()
    for _ in range(8):
        keyboard.press("Tab")
        if explorer.root.evaluate(FOCUS)["inside"]:
            break
    focused(0)

    def ordinal(name: str) -> int:
        return next(i for i, d in enumerate(DESIGNS) if d.name == name)

    one_transaction = Combination("one-transaction", "crash", 2)
    tab_to(ordinal("one-transaction"))
    expect(one_transaction, lambda: keyboard.press("Space"))

    def type_step() -> None:
        keyboard.press("Control+a")
        keyboard.type("6")
        keyboard.press("Enter")

    box = TAB_ORDER.index(("spinbutton", "crash after step"))
    tab_to(box)  # past the other designs and the four disturbances
    typed = replace(one_transaction, crash_after=6)  # after the indexer call, before COMMIT
    expect(typed, type_step)
    explorer.nb.screenshot(f"{prefix}_step_typed", explorer.root)

    tab_to(box + 1)
    nudged = replace(typed, crash_after=5)  # before the call: rolled back, converged
    expect(nudged, lambda: keyboard.press("ArrowLeft"))

    poison = TAB_ORDER.index(("radio", DISTURBANCES["poison"]))
    tab_to(poison)
    poisoned = replace(nudged, disturbance="poison")
    expect(poisoned, lambda: keyboard.press("Space"))
    explorer.nb.screenshot(f"{prefix}_poison", explorer.root)
    explorer.assert_settled()

    # The crash step is disabled now: the next Tab leaves the explorer.
    keyboard.press("Tab")
    assert not explorer.root.evaluate(FOCUS)["inside"], "Tab stayed inside the explorer"


@pytest.fixture(scope="module")
def notebook_06(lab_page: LabPage) -> Iterator[OpenNotebook]:
    """Notebook 06 opened and run top to bottom once for this file's tests."""
    if not NOTEBOOK.exists():
        pytest.skip("notebooks/06_replay_safe_ingestion.ipynb does not exist yet")
    nb = lab_page.open(NOTEBOOK.relative_to(ROOT).as_posix(), cell_count(NOTEBOOK))
    try:
        nb.run_all()
        nb.screenshot("06_ran_all")
        yield nb
    finally:
        nb.shut_down()


@pytest.fixture
def ran_06(notebook_06: OpenNotebook, request: pytest.FixtureRequest) -> Iterator[OpenNotebook]:
    """The notebook after Run All: every cell ran, none failed. A failed test leaves a
    screenshot of the page, as `open_notebook` does."""
    prompts = notebook_06.prompts()
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), f"not every cell ran: {prompts}"
    assert notebook_06.error_outputs() == [], "a cell wrote to stderr or raised"
    yield notebook_06
    report = request.node.stash.get(CALL_REPORT, None)
    if report is not None and report.failed:
        with contextlib.suppress(Exception):
            harness.screenshot(notebook_06.page, f"FAILED_{request.node.name}")


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


def test_replay_explorer_answers_every_design_and_disturbance_by_mouse(
    ran_06: OpenNotebook,
) -> None:
    drive_by_mouse(fresh_explorer(ran_06), "06")


def test_replay_explorer_is_driven_by_the_keyboard_alone(ran_06: OpenNotebook) -> None:
    drive_by_keyboard(fresh_explorer(ran_06), "06_keyboard")


def test_mouse_tour_reaches_every_design_and_disturbance_one_move_at_a_time() -> None:
    """The tour above, checked without a browser: each move changes one control (the design
    may pull the crash step within its steps), no verdict repeats the one before, and every
    design and every disturbance is chosen."""
    last = OPENING
    for control_, want in MOUSE_TOUR:
        pulled = min(last.crash_after, want.steps())
        expected = {
            "design": replace(last, design=want.design, crash_after=pulled),
            "disturbance": replace(last, disturbance=want.disturbance),
            "drag": replace(last, crash_after=want.crash_after),
        }[control_]
        assert want == expected, f"{control_} from {last} cannot give {want}"
        assert want.verdict() != last.verdict()
        last = want
    tour = [want for _, want in MOUSE_TOUR]
    assert {c.design for c in tour} == set(TITLE)
    assert {c.disturbance for c in tour} == set(DISTURBANCES)
    assert "drag" in {control_ for control_, _ in MOUSE_TOUR}
