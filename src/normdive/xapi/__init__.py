"""Learning records: the learners' events as xAPI statements in a Learning Record Store."""
