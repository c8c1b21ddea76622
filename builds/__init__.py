"""The graded builds, one folder each (``builds/buildNN/``): everything about a build but its
notebooks.

- ``build.toml``: the build's graded tests (points, hints, ``visible``), the tests a learner
  writes and what they must catch. Read by the manifest (`workbook.shared.manifest`) beside
  ``workbook.toml``, which keeps the arc's order. Ships.
- ``visible/``: ships to learners. ``answer_checks.py`` (the self-check cells' checks, one per
  visible graded test), ``written_tests.py`` (the test-writing steps: the seams each learner
  test tests and the bugs laid over them), the harnesses those use, and ``test_visible.py``
  (the checks as a pytest suite: ``WORKBOOK_BUILDS=DIR python -m pytest builds/buildNN/visible``).
- ``hidden/``: never ships, never bound into the grader's walls. ``probes.py`` (sent as text to
  the walled-in worker), the judges (``test_*.py``, one pytest test per graded test, run in the
  grader), ``mutants.toml`` (the known bugs), ``contract.toml`` and the references
  (``seams.py``, ``wheat.py``). ``python -m pytest builds/buildNN/hidden --submission PATH``
  grades one notebook; ``builds/README.md`` has the threat model.

Each folder is a package installed with the project (``pip install -e .``, as ``etl`` and
``workbook`` are), so the notebooks, Binder and the walled-in worker import
``builds.buildNN.visible`` by name; mypy strict checks every module here but the references,
which are notebook exports. A build is found by number through `workbook.shared.buildfolder`.
"""
