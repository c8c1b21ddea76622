"""The self-check machinery behind ``selfcheck(...)`` cells and ``make progress``: test-writing
steps (`teststep`), running a learner's tests against laid-over bugs (`learnertests`,
`layover`, `mutation`, `fixedhypothesis`), the one feedback vocabulary (`feedback`), cell
magics (`magics`), naming cells (`notebook_cells`) and the visible tests' pytest recipe
(`visible_suite`).
"""
