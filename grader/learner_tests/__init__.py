"""Grading the tests a learner writes: `wheats` runs each test against the reference, a second
correct implementation and each laid-over bug; `wheatprobe` is the worker's side of that.
"""
