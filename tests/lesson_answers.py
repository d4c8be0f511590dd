"""What a learner who gets things right types and picks, shared by the tests that walk the
lesson. The numbers are written out as a learner would type them (not computed by the code
under test); the readings come from the lesson data, so an edited d9.toml keeps working."""

from __future__ import annotations

from normdive.lesson.content import load_lesson

LESSON = load_lesson()

# The six numbers of the hand rows [1, 2, 3] and [2, 2, 2, 6], each within 0.001 of exact.
RIGHT_NUMBERS = {
    "row1_mean": "2",
    "row1_variance": "2/3",
    "row1_denominator": "0.8165",
    "row2_mean": "3",
    "row2_variance": "3",
    "row2_denominator": "1.732",
}

RIGHT_READING_CHOICE = next(c for c in LESSON.reading.choices if c.correct)
WRONG_READING_CHOICE = next(c for c in LESSON.reading.choices if not c.correct)
# A second wrong reading: the reading locked last cannot be locked again straight away.
OTHER_WRONG_READING_CHOICE = next(
    c for c in LESSON.reading.choices if not c.correct and c != WRONG_READING_CHOICE
)
RIGHT_READING_ID = RIGHT_READING_CHOICE.id
WRONG_READING_ID = WRONG_READING_CHOICE.id
