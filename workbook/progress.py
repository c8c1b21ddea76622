"""`make progress`: per build, how many visible checks pass, and the hint for what is next.

It reads the learner's build notebooks through the export path, runs the visible checks,
and changes nothing; running it twice prints the same thing.
"""

from __future__ import annotations

import importlib.util
import time

from workbook.errors import WorkbookError
from workbook.export import load
from workbook.manifest import load_manifest
from workbook.selfcheck import checks_for, hints_for


def main() -> int:
    start = time.perf_counter()
    manifest = load_manifest()
    builds = [
        e
        for e in manifest.builds
        if (manifest.root / e.path).exists()
        and importlib.util.find_spec(f"workbook.checks.build{e.number}") is not None
    ]
    if not builds:
        print("No build notebook exists yet, so there is nothing to count.")
        print("Progress starts with build 03; until then, read the concept notebooks.")
        return 0
    done = 0
    next_hint = None
    for entry in builds:
        checks = checks_for(entry.number)
        try:
            ns = load(manifest.root / entry.path)
        except WorkbookError as exc:
            print(f"{entry.number} {entry.title}: cannot be loaded: {exc}")
            next_hint = next_hint or f"fix {entry.path} so it loads (see above)"
            continue
        results = checks.run(ns)
        passed = sum(r.passed for r in results)
        mark = "done" if passed == len(results) else f"{passed}/{len(results)}"
        print(f"{entry.number} {entry.title}: {mark}")
        if passed == len(results):
            done += 1
        elif next_hint is None:
            todo = next(r for r in results if not r.passed)
            hint = hints_for(entry.number).get(todo.name, "")
            next_hint = f"{entry.number} · {todo.name}: {hint}".rstrip(": ")
    print(f"{done} of {len(builds)} builds done ({time.perf_counter() - start:.1f} s).")
    if next_hint:
        print(f"Next: {next_hint}")
    else:
        print("Every build is done. Run `make check` to confirm.")
    return 0
