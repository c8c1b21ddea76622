"""What proves the workbook sound: `soundness` (the instructor's ``make check``, its parts),
`suite_validity` (every solution full marks, every stub zero, every known bug killed; also
``python -m grader.validity``), `known_bugs` (which graded tests fail on each), `visible_catches`
(the visible checks alone catch every known bug), `suitemutants` (``make mutate``),
`class_bench` (``make bench``, ``python -m grader.bench``), and `ordinary`/`nobody` (a class
graded as an ordinary user).
"""
