"""Learning records: the learners' events as xAPI statements in a Learning Record Store.

statements.py maps an event to its statements (a pure function); lrs.py keeps the LRSs a
deployment sends to; outbox.py delivers each event's statements once, whatever fails.
"""
