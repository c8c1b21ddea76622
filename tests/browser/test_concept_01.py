"""Concept notebook 01 in JupyterLab: Run All, then drive the backoff explorer like a learner.

Each move of a control must redraw the plot exactly once (the one image's `src` changes, then
stays; no second image appears) and the summary line must say what the formula says: with
N attempts there are N-1 sleeps, and without jitter they total
sum(min(base * 2**(k-1), cap) for k in 1..N-1).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.harness import SETTLE_MS, WORK, OpenNotebook

if TYPE_CHECKING:
    from playwright.sync_api import Locator

NOTEBOOK = WORK / "notebooks" / "01_retry_with_backoff.ipynb"

SUMMARY = re.compile(
    r"(?P<attempts>\d+) attempts? · (?P<sleeps>\d+) sleeps? · "
    r"total wait (?P<total>\d+(?:\.\d+)?) s · cap (?P<cap>\d+(?:\.\d+)?) s"
)

CAP_BITES = re.compile(r"cap bites on (?P<cut>\d+) of (?P<of>\d+)")

#: Counts, inside one explorer, every change of an image's `src`, every image added, and
#: every change of the summary, with the time of the last one. Installed once per explorer.
WATCH = """(root) => {
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
        return self.root.locator(".widget-slider", has_text=label).locator(".noUi-handle")

    def readout(self, label: str) -> float:
        text = self.root.locator(".widget-slider", has_text=label).locator(".widget-readout")
        return float(text.inner_text())

    def policy(self) -> Policy:
        return Policy(self.readout("base delay"), self.readout("cap"))

    def assert_plain_opening(self) -> None:
        """The formula checks below start from no jitter and no Retry-After."""
        active = self.root.locator(".widget-toggle-buttons button.mod-active").inner_text()
        assert active.strip() == "none", f"the explorer opens with {active!r} jitter"
        retry_after = self.root.locator(".widget-checkbox input[type=checkbox]")
        assert not retry_after.is_checked(), "the explorer opens with Retry-After on"

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

    jitter = explorer.root.locator(".widget-toggle-buttons button")
    full = explorer.change(lambda: jitter.filter(has_text=re.compile(r"^\s*full\s*$")).click())
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


def test_explorer_redraws_once_per_move_and_matches_the_formula(
    open_notebook: Callable[[Path], OpenNotebook],
) -> None:
    if not NOTEBOOK.exists():
        pytest.skip("notebooks/01_retry_with_backoff.ipynb does not exist yet")
    nb = open_notebook(NOTEBOOK)
    nb.screenshot("01_opened")
    nb.run_all()
    nb.screenshot("01_ran_all")
    prompts = nb.prompts()
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), f"not every cell ran: {prompts}"
    assert nb.error_outputs() == [], "a cell wrote to stderr or raised"
    drive_explorer(nb, "01")
