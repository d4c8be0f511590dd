"""Reading the recording for a request (normdive.web.infrastructure.learners): a learner reads the
lesson's sentence for the reader's reason code; the author's message, with its paths, goes to the
log once per distinct problem."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from helpers import ablation_recording, write_recording
from normdive.lesson.content import load_lesson
from normdive.recording import reader
from normdive.web.infrastructure.learners import learner_facts
from sample_recordings import sample_recording

LESSON = load_lesson()


def test_a_usable_recording_keeps_its_facts() -> None:
    facts = learner_facts(ablation_recording(), LESSON)
    assert facts.problem is None and facts.best_row == "both"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "missing"),
        ("{", "bad_json"),
        ('{"format_version": 3}', "unknown_version"),
        ("[]", "invalid"),
        (sample_recording(rows=("both",)).model_dump_json(), "no_ablation_rows"),
    ],
)
def test_a_problem_reads_as_the_lessons_sentence_and_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str | None, reason: str
) -> None:
    path = tmp_path / "the-transformer-block.json"
    if content is not None:
        path = write_recording(tmp_path, content)
    with caplog.at_level(logging.WARNING, logger="normdive.web.infrastructure.learners"):
        for _ in range(3):
            facts = learner_facts(reader.recording_status(path), LESSON)
    assert facts.problem == LESSON.recording_problems.sentence(reason)
    assert str(tmp_path) not in facts.problem
    services_logger = "normdive.web.infrastructure.learners"
    logged = [r.getMessage() for r in caplog.records if r.name == services_logger]
    assert len(logged) == 1 and f"({reason})" in logged[0] and str(tmp_path) in logged[0]


def test_a_recording_whose_page_seed_lacks_a_row_is_a_rows_problem() -> None:
    # The reader accepts the file; the adapter finds the page seed's rows incomplete.
    recording = sample_recording(seeds=(0, 1), rows=("both",))
    facts = learner_facts(recording, LESSON)
    assert facts.problem == LESSON.recording_problems.no_ablation_rows
