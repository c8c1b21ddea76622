"""Notebook 08's visible test: the *form* of ``ANSWERS`` (``test_<name>`` for its one check).

It says nothing about whether an answer is right: the quiz is graded by hidden judges only.

How they are made, and which copy of the notebook they read: `workbook/checking/visible_suite.py`.
"""

from workbook.checking.visible_suite import visible_tests

globals().update(visible_tests("08"))
