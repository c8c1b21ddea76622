"""Visible tests: the learner's own feedback, one pytest test per visible check of a build."""
