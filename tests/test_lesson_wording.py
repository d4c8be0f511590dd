"""counted: a count and its noun, singular for exactly one."""

from __future__ import annotations

import pytest

from normdive.lesson.wording import counted


@pytest.mark.parametrize(
    ("count", "singular", "plural", "expected"),
    [
        (0, "second", None, "0 seconds"),
        (1, "second", None, "1 second"),
        (2, "minute", None, "2 minutes"),
        (1, "learner", "learners", "1 learner"),
        (3, "fix", "fixes", "3 fixes"),
        (-1, "step", None, "-1 steps"),
    ],
)
def test_counted(count: int, singular: str, plural: str | None, expected: str) -> None:
    assert counted(count, singular, plural) == expected
