"""LTI 1.3 with LTI Advantage: the lesson as a tool an LMS (the platform) launches in a course.

Everything a step needs lives in the database, so any worker can serve any step; the JOSE work
(signatures, key sets, claims) is joserfc's. README, "Use it from an LMS", says how to set it up.
"""
