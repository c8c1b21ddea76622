"""Build 07's visible tests: ``test_<name>`` for each check the notebook's self-check cells run.

How they are made, and which copy of the notebook they read: `workbook/checking/visible_suite.py`.
"""

from workbook.checking.visible_suite import visible_tests

globals().update(visible_tests("07"))
