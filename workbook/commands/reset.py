"""`make reset BUILD=03`: put a build notebook back to its stubs, keeping the learner's copy.

The learner's notebook is first copied to ``exercises/.backups/<name>.<UTC time>.ipynb``;
then the pristine exercise shipped in ``.pristine/`` replaces it. Resetting twice keeps two
backups and leaves the same stubs.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime

from workbook.shared.manifest import load_manifest

#: Where the learner copy keeps the exercises as released, for `make reset`.
PRISTINE = ".pristine"


def reset(build: str | None) -> int:
    manifest = load_manifest()
    numbers = [e.number for e in manifest.entries if e.kind in ("build", "quiz")]
    if not build:
        print(
            f"Say which build to reset, e.g. `make reset BUILD=03` (one of {', '.join(numbers)})."
        )
        return 2
    entry = manifest.entry(build.zfill(2))
    if entry.number not in numbers:
        print(f"{entry.number} is a concept notebook: there is nothing of yours to reset.")
        return 2
    target = manifest.root / entry.path
    pristine = manifest.root / PRISTINE / entry.path
    if not pristine.exists():
        print(
            f"No pristine copy of {entry.path} here ({PRISTINE}/ ships with the learner copy);"
            " in the instructor's repo, use git to restore it."
        )
        return 2
    if target.exists():
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        backup = target.parent / ".backups" / f"{target.stem}.{stamp}.ipynb"
        backup.parent.mkdir(exist_ok=True)
        number = 1
        while backup.exists():  # two resets within one second keep two backups
            number += 1
            backup = backup.with_name(f"{target.stem}.{stamp}-{number}.ipynb")
        shutil.copy2(target, backup)
        print(f"Your version is kept in {backup.relative_to(manifest.root)}.")
    shutil.copy2(pristine, target)
    print(f"{entry.path} is back to its stubs.")
    return 0
