"""Notebook 08's probe: run in the grading child, next to the learner's exported answer cell.

It reports the learner's ``ANSWERS`` as plain JSON (exact types kept, anything else recorded by
type), and nothing else: the answer key lives only in ``judges.py``, in the parent. Probing the
same answers twice gives the same observation.
"""

from __future__ import annotations

from types import ModuleType

from grader.suites.observe import JSON, Probes, attempt, need

PROBES = Probes()


@PROBES.add("answers")
def answers(ns: ModuleType) -> JSON:
    return attempt(lambda: need(ns, "ANSWERS"))
