"""The probe-side runtime: what the fork server and its workers import, and nothing else of
the grader.

bubblewrap binds this folder alone into the walls, with ``grader/__init__.py`` (import-light),
``grader/runtime/protocol.py`` and ``grader/suites/observe.py`` beside it: no judge, no expected
value, no reference seam, no cache and no path of the instructor's lives here, so a learner who
reads every file the worker can see learns nothing the probes' inputs do not already show.

- `forkserver`: the fork server (``python -m grader.runtime.child.forkserver``): imports,
  then forks.
- `worker`: one job: its first process (PID 1), the learner's process, the probes.
- `walls`: the namespaces, mounts, uid and rlimits each worker raises (ctypes).
- `artefacts`: the files a worker left, copied out with bounds.
"""
