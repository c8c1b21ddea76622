"""Grades for the places a class lives: `lms` (Canvas and Moodle gradebook CSVs),
`gradescope` (the autograder bundle and its run), `classroom` (GitHub Classroom's workflow).
"""
