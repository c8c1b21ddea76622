"""Plumbing the grader shares: `export` (the one export path), `manifest` (workbook.toml and
each build.toml), `buildfolder` (a build's folder by number), `modules`, `registry`, `errors`.
"""
