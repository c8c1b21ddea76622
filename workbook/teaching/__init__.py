"""Teaching code behind the concept notebooks' figures: the backoff schedule and its figure
(`workbook.explorer` and `workbook.contention` are the notebooks' side of them).
"""
