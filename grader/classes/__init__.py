"""Class grading: `batch` grades a folder of learners (``make check SUBMISSIONS=dir``) with
`discovery` (which notebook is whose), `layouts` (LMS downloads), `zips`, a `cache` of grades,
`ledger` (virtual time as the parent counts it), `grades` (the records), `reports` (grades.csv,
feedback, summaries), `reteach` (which known bug a failure looks like) and `progressbar`.
"""
