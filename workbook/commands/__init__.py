"""The learner's commands: `lab` (``make lab``), `progress`, `reset`, `learner_check` (the
learner copy's ``make check``) and `parts` (how every ``make check`` runs its parts).
"""
