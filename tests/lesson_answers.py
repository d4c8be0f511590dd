"""What a learner who gets things right types and picks, shared by the tests that walk the
lesson. The numbers are written out as a learner would type them (not computed by the code
under test); the readings come from the lesson data, so an edited d9.toml keeps working."""

from __future__ import annotations

from starlette.testclient import TestClient

from normdive.lesson.content import load_lesson
from normdive.recording.format import ROW_KEYS

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

# One prediction per ablation row (the shipped recording's shape: both learn, residuals only
# partly, without residuals chance).
ROW_PREDICTIONS = {
    "both": "learns",
    "residual_only": "partial",
    "layernorm_only": "chance",
    "neither": "chance",
}
# What the page's script asks for: the JSON answers.
JSON = {"Accept": "application/json"}


def steps_to_the_gate(
    choice: str = "residual", played: tuple[str, ...] = ROW_KEYS
) -> list[tuple[str, dict[str, str]]]:
    """The posts (path, form) of a learner who gets everything right: the opening prediction,
    the six numbers, the reading, a prediction per row, then a play of each row of `played`
    in that order (all of them close the gate)."""
    return [
        ("/predict", {"choice": choice}),
        ("/numbers", RIGHT_NUMBERS),
        ("/reading", {"choice": RIGHT_READING_ID}),
        *((f"/rows/{key}/predict", {"outcome": o}) for key, o in ROW_PREDICTIONS.items()),
        *((f"/rows/{key}/play", {}) for key in played),
    ]


def post_each(client: TestClient, steps: list[tuple[str, dict[str, str]]]) -> None:
    """Post every step as the page's script does, each answered 200."""
    for path, data in steps:
        assert client.post(path, data=data, headers=JSON).status_code == 200, path
