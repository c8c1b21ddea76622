"""`workbook`: the machinery behind the notebooks. Learners never need to open it.

- `load(notebook)`: a build notebook's setup and answer cells as a fresh module.
- `selfcheck(build, *steps)`: the self-check cell's report.
- `run(coro)`: run a coroutine on virtual time (also inside a Jupyter kernel).
"""

from workbook.selfcheck import selfcheck
from workbook.shared.errors import ExportError, ManifestError, WorkbookError
from workbook.shared.export import export_source, load
from workbook.vtime import run, run_timed

__all__ = [
    "ExportError",
    "ManifestError",
    "WorkbookError",
    "export_source",
    "load",
    "run",
    "run_timed",
    "selfcheck",
]
