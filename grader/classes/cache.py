"""The grade cache: a grade on disk under the content id of everything that can change it.

A build's key is ``content_id("grade", {build, grader digest, submission id})``. The grader
digest (`grader_digest`) covers the build's hidden suite, the reference seams, the manifest,
the `etl`, `workbook` and `grader` packages, ``requirements.txt``, the grading limits, the
Python version and `GRADER_VERSION`, and the build's solution notebook (the wheat its learner
tests run against); the submission id is the content id of its exported setup and answer
cells, and the test cells' id that of its exported `test` cells (`grader.learner_tests.wheats`). The
learner tests' results are stored once more on their own (`tests_key`: the build, the grader
digest and the test cells' id), since they never depend on the answers: a notebook whose
answers changed runs its hidden probes again, not its learner tests. Unchanged inputs hit; a
grade the grader itself failed to produce (`SubmissionResult.grader_fault`) is never stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from grader.runtime.results import Outcome, SubmissionResult, TestResult
from grader.runtime.sandbox import Limits
from grader.suites.digest import canonical_json, content_id
from grader.suites.loading import suite_dir

#: Bump when the grading logic changes in a way the hashed files would not show.
GRADER_VERSION = "1"
#: The packages whose code can change a grade.
PACKAGES = ("etl", "workbook", "grader")


def _digest_files(paths: Sequence[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.relative_to(root).as_posix().encode() + b"\x00")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _files(folder: Path) -> list[Path]:
    if not folder.exists():
        return []
    return [
        p
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]


def grader_digest(build: str, root: Path, builds: Path, limits: Limits) -> str:
    """The content id of everything besides the submission that can change build `build`'s
    grade: its hidden suite, every reference seam, the manifest, the packages, the
    requirements, the limits and this grader's version."""
    shared = [p for package in PACKAGES for p in _files(root / package)]
    shared += [p for p in (root / "workbook.toml", root / "requirements.txt") if p.exists()]
    suite = [*_files(suite_dir(build, builds)), *sorted(builds.glob("build*/hidden/seams.py"))]
    # The learner tests run against the solution's export: it changes their grade.
    shared += [p for p in (root / "solutions").glob(f"{build}_*.ipynb") if p.is_file()]
    parts = {
        "version": GRADER_VERSION,
        "python": sys.version,
        "limits": limits.as_json(),
        "shared": _digest_files(shared, root),
        "suite": _digest_files(suite, builds),
    }
    return content_id("grader", canonical_json(parts))


def grade_key(build: str, grader: str, source_id: str, tests_id: str | None = None) -> str:
    """The cache key of build `build`'s grade for the submission whose id is `source_id`
    (and whose test cells' id is `tests_id`, for a build with learner tests)."""
    parts = {"build": build, "grader": grader, "source": source_id}
    if tests_id is not None:  # absent, not null: keys of builds without them stay as they were
        parts["tests"] = tests_id
    return content_id("grade", canonical_json(parts))


def tests_key(build: str, grader: str, tests_id: str) -> str:
    """The key of the learner tests' results alone: they depend on the test cells and the
    grader, never on the answers, so a notebook whose answers changed reuses them."""
    parts = {"build": build, "grader": grader, "tests": tests_id}
    return content_id("learner tests", canonical_json(parts))


def file_key(build: str, grader: str, data: bytes) -> str:
    """A third key for the same grade: from the notebook file's bytes. Equal bytes hold equal
    cells, so a re-run of an unchanged class hashes each file and parses none of them."""
    parts = {"build": build, "grader": grader, "bytes": hashlib.sha256(data).hexdigest()}
    return content_id("notebook bytes", canonical_json(parts))


def raw_key(build: str, grader: str, cells: list[list[Any]]) -> str:
    """A second key for the same grade: from the graded cells as stored (tags and text, in
    order), before any export or compile. Equal stored cells export to equal text, so a
    cached re-run reads each notebook's JSON and nothing more (a notebook crafted to cost
    the compiler seconds costs them once)."""
    parts = {"build": build, "grader": grader, "cells": cells}
    return content_id("stored cells", canonical_json(parts))


class Cache:
    """Grades on disk, one JSON file per content id. A file that is missing, unreadable or not
    for its key is a miss; grades the grader itself failed to produce are never stored."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.unwritten = 0
        """How many entries (grades, aliases, learner tests' results) could not be stored
        (the disk filled up, say)."""

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> SubmissionResult | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            if data.get("key") != key:
                return None
            result = result_from_json(data["result"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        # Never served, even if an older grader stored one: a fault says nothing of the work.
        return None if result.grader_fault else result

    def get_alias(self, raw: str) -> tuple[str, str] | None:
        """The grade key and submission id `raw` (a `raw_key`) stands for, if recorded."""
        try:
            data = json.loads(self._path(raw).read_text(encoding="utf-8"))
            if data.get("key") != raw or not all(
                isinstance(data.get(k), str) for k in ("alias", "source_id")
            ):
                return None
            return data["alias"], data["source_id"]
        except (OSError, ValueError, AttributeError):
            return None

    def put_alias(self, raw: str, key: str, source_id: str) -> None:
        """Record that the stored cells with key `raw` export to the submission `source_id`,
        graded under `key` (only once that grade is stored)."""
        data = {"key": raw, "alias": key, "source_id": source_id}
        try:
            replace_file(self._path(raw), json.dumps(data, sort_keys=True) + "\n")
        except OSError:
            self.unwritten += 1

    def get_tests(self, key: str) -> tuple[TestResult, ...] | None:
        """The learner tests' results stored under `key` (a `tests_key`), if any."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            if data.get("key") != key:
                return None
            tests = tuple(_test_from_json(t) for t in data["tests"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return None if any(t.kind is Outcome.GRADER_FAULT for t in tests) else tests

    def put_tests(self, key: str, tests: Sequence[TestResult]) -> None:
        """Store learner tests' results under `key`; never any the grader failed to grade,
        nor any whose run on the reference did not finish (a busy machine may have decided
        that, and the result would outlive every change of the answers)."""
        unstored = (Outcome.GRADER_FAULT, Outcome.UNFINISHED, Outcome.VOID)
        if any(t.kind in unstored for t in tests):
            return
        data = {"key": key, "tests": [asdict(t) for t in tests]}
        try:
            replace_file(self._path(key), json.dumps(data, sort_keys=True, indent=1) + "\n")
        except OSError:
            self.unwritten += 1

    def put(self, key: str, result: SubmissionResult) -> bool:
        """Store `result` under `key`; False when it was not stored (a grader fault, or the
        cache could not be written: the grade then stands, it is just not remembered)."""
        if result.grader_fault:
            return False
        data = {"key": key, "result": result.as_json()}
        try:
            replace_file(self._path(key), json.dumps(data, sort_keys=True, indent=1) + "\n")
        except OSError:
            self.unwritten += 1
            return False
        return True


def result_from_json(data: dict[str, Any]) -> SubmissionResult:
    """The inverse of `SubmissionResult.as_json` (an entry without kinds: passed or wrong)."""
    tests = tuple(_test_from_json(t) for t in data["tests"])
    return SubmissionResult(
        build=data["build"],
        label=data["label"],
        status=data["status"],
        reason=data["reason"],
        tests=tests,
        seconds=float(data.get("seconds", 0.0)),
        output=data.get("output", ""),
        notes=tuple(data.get("notes", ())),
    )


def _test_from_json(data: dict[str, Any]) -> TestResult:
    points, max_points = int(data["points"]), int(data["max_points"])
    if "kind" in data:
        kind = Outcome(data["kind"])
    else:
        kind = Outcome.PASSED if points == max_points else Outcome.WRONG
    got = data.get("got")
    return TestResult(
        data["name"],
        points,
        max_points,
        data["message"],
        bool(data["visible"]),
        kind,
        got if isinstance(got, str) else None,
    )


def replace_file(path: Path, text: str) -> None:
    """Replace `path` with `text` at once (a reader never sees half a file). The partial file's
    name is short whatever `path`'s is (`grader.runtime.cleanup.PARTIAL`), and it is removed however
    the write ends; text that cannot be UTF-8 (a lone surrogate) is written escaped."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".rit-{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        partial.write_text(text, encoding="utf-8", errors="backslashreplace", newline="\n")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
