"""The learner copy: `release` builds it from the committed tree (``make release``) and
`leakscan` proves nothing of the instructor's half is in it, in any form.
"""
