"""The instructor view's figures on the re-run of the ablation on the learner's device: the
tally over (learner, re-run, row, final accuracy) rows as a table of cases, the one query over
the store on both databases with the pools kept apart, and the section and the aggregate JSON
over HTTP."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup, Tag
from sqlalchemy import Engine
from starlette.testclient import TestClient
from typer.testing import CliRunner

from helpers import (
    SECRET_KEY,
    SettingsFactory,
    ablation_recording,
    as_instructor,
    in_course,
    words,
    write_recording,
)
from lesson_answers import LESSON
from normdive.cli import app as cli
from normdive.progress.events import EventKind
from normdive.progress.facts import RecordingFacts, RowFacts
from normdive.progress.rerun import rerun_choice, row_keys
from normdive.store.event_store import Store
from normdive.web.app import create_app
from normdive.web.infrastructure.instructor_access import Pool
from normdive.web.views.instructor_rerun import (
    Row,
    rerun_aggregate,
    rerun_report,
    tally,
)
from page_client import PageClient
from sample_recordings import SAMPLE_FINALS

COURSE = "c" * 64
OTHER_COURSE = "d" * 64
KEYS = row_keys(LESSON)
# The recording's final accuracies (tests/sample_recordings.py): both 100 %, residuals only
# 20 %, the other two level at about 6 %.
RECORDED = {key: accuracy for key, (accuracy, _) in SAMPLE_FINALS.items()}
RECORDING = RecordingFacts(
    problem=None,
    row_keys=KEYS,
    best_row="both",
    rows=tuple(RowFacts(key, RECORDED[key], 0.5, 0.0, 300, None) for key in KEYS),
)
UNUSABLE = RecordingFacts(problem="The recording file is missing.")
# Device finals ranked as the recording ranks its rows, and ranked otherwise (residuals only
# level with the two rows at chance).
SAME = {"both": 1.0, "residual_only": 0.14, "layernorm_only": 0.056, "neither": 0.05}
OTHER = {"both": 1.0, "residual_only": 0.06, "layernorm_only": 0.056, "neither": 0.05}


def whole(learner: str, number: int, finals: dict[str, float]) -> list[Row]:
    return [(learner, number, key, finals[key]) for key in KEYS]


# (case, rows, learners, whole learners, complete re-runs, matching, each row's device mean)
CASES: list[tuple[str, list[Row], int, int, int, int, list[float | None]]] = [
    ("no events", [], 0, 0, 0, 0, [None] * 4),
    (
        "a partial set",
        [("a", 1, "both", 1.0), ("a", 1, "residual_only", 0.2)],
        1,
        0,
        0,
        0,
        [None] * 4,
    ),
    ("a complete matching set", whole("a", 1, SAME), 1, 1, 1, 1, [SAME[k] for k in KEYS]),
    ("a complete set ranked otherwise", whole("a", 1, OTHER), 1, 1, 1, 0, [OTHER[k] for k in KEYS]),
    (
        "a row finished twice counts once, the first time",
        [("a", 1, "both", 1.0), ("a", 1, "both", 0.0), *whole("a", 1, SAME)[1:]],
        1,
        1,
        1,
        1,
        [SAME[k] for k in KEYS],
    ),
    (
        "two learners, one ranking as the recording",
        [*whole("a", 1, SAME), *whole("b", 1, OTHER)],
        2,
        2,
        2,
        1,
        [(SAME[k] + OTHER[k]) / 2 for k in KEYS],
    ),
    (
        "one learner's two re-runs and a third begun",
        [*whole("a", 1, OTHER), *whole("a", 2, SAME), ("a", 3, "both", 0.5)],
        1,
        1,
        2,
        1,
        [(SAME[k] + OTHER[k]) / 2 for k in KEYS],
    ),
    (
        "a row the lesson lacks, or a number that is not one, is passed over",
        [
            *whole("a", 1, SAME)[:3],
            ("a", 1, "sideways", 0.1),
            ("a", "1", "neither", 0.1),
            ("a", True, "neither", 0.1),
            ("a", None, "neither", 0.1),
        ],
        1,
        0,
        0,
        0,
        [None] * 4,
    ),
    (
        # 0 for neither puts layer norm alone 5.6 points above it: not the recording's ranking.
        "a diverged row counts as 0, as the ranking counts it",
        [*whole("a", 1, SAME)[:3], ("a", 1, "neither", "nan")],
        1,
        1,
        1,
        0,
        [SAME["both"], SAME["residual_only"], SAME["layernorm_only"], 0.0],
    ),
]


@pytest.mark.parametrize(
    ("rows", "learners", "whole_learners", "complete", "matching", "means"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_the_tally(
    rows: list[Row],
    learners: int,
    whole_learners: int,
    complete: int,
    matching: int,
    means: list[float | None],
) -> None:
    report = tally(LESSON, RECORDING, rows)
    assert (report.learners, report.whole_learners, report.complete, report.matching) == (
        learners,
        whole_learners,
        complete,
        matching,
    )
    assert report.empty is (learners == 0)
    assert [line.key for line in report.rows] == list(KEYS)
    assert [line.label for line in report.rows] == [row.label for row in LESSON.rows]
    assert [line.device for line in report.rows] == pytest.approx(means)
    assert [line.recorded for line in report.rows] == [RECORDED[key] for key in KEYS]


def test_a_recording_that_cannot_be_used_gives_no_match_count_and_no_figures() -> None:
    report = tally(LESSON, UNUSABLE, whole("a", 1, SAME))
    assert report.complete == 1 and report.matching is None and not report.recording_usable
    assert [line.recorded for line in report.rows] == [None] * 4
    assert [line.recorded_shown for line in report.rows] == [""] * 4
    assert [line.device_shown for line in report.rows] == ["100.0 %", "14.0 %", "5.6 %", "5.0 %"]
    figures = rerun_aggregate(report)
    assert figures["complete_reruns_ranked_as_the_recording"] is None
    assert figures["rows"]["both"] == {"device_mean_accuracy": 1.0, "recorded_accuracy": None}


def test_a_recording_lacking_a_row_cannot_be_used() -> None:
    lacking = RecordingFacts(problem=None, row_keys=KEYS[:3], rows=RECORDING.rows[:3])
    assert tally(LESSON, lacking, whole("a", 1, SAME)).matching is None


def finished(store: Store, learner: str, number: int, key: str, accuracy: float | str) -> None:
    """A rerun_row_finished event as progress.rerun.finish_rerun_row writes it."""
    curve = [
        {"step": step, "train_loss": 0.5, "heldout_loss": 0.5, "heldout_accuracy": 0.1}
        for step in (0, 150, 300)
    ]
    payload: dict[str, Any] = {
        "rerun": number,
        "row": key,
        "config": rerun_choice(LESSON, key).to_json(),
        "final": {"step": 300, "heldout_loss": 0.5, "heldout_accuracy": accuracy},
        "curve": curve,
        "outcome": "chance",
    }
    store.append(learner, EventKind.RERUN_ROW_FINISHED, payload)


def rerun_whole(store: Store, learner: str, number: int, finals: dict[str, float]) -> None:
    for key in KEYS:
        finished(store, learner, number, key, finals[key])


@pytest.mark.both_databases
def test_the_query_reads_each_pool_apart(store: Store, engine: Engine) -> None:
    anonymous, other_anonymous, member, elsewhere = (store.create_learner() for _ in range(4))
    rerun_whole(store, anonymous, 1, SAME)
    finished(store, anonymous, 1, "both", 0.0)  # a second finish of a kept row
    finished(store, anonymous, 2, "both", 0.5)
    finished(store, other_anonymous, 1, "both", "nan")  # a marker, as a diverged run keeps
    in_course(engine, member, COURSE)
    rerun_whole(store, member, 1, OTHER)
    in_course(engine, elsewhere, OTHER_COURSE)
    store.append(elsewhere, EventKind.HINT_OPENED, {"rung": 1})  # another kind: not read

    outside = rerun_report(engine, LESSON, RECORDING, None)
    assert (outside.learners, outside.whole_learners, outside.complete, outside.matching) == (
        2,
        1,
        1,
        1,
    )
    assert [line.device for line in outside.rows] == [SAME[key] for key in KEYS]
    course = rerun_report(engine, LESSON, RECORDING, COURSE)
    assert (course.learners, course.complete, course.matching) == (1, 1, 0)
    assert [line.device for line in course.rows] == [OTHER[key] for key in KEYS]
    assert rerun_report(engine, LESSON, RECORDING, OTHER_COURSE).empty


def section_of(client: TestClient) -> Tag:
    page = BeautifulSoup(client.get("/instructor").text, "html.parser")
    section = page.select_one("#rerun-report")
    assert isinstance(section, Tag)
    return section


def test_the_section_says_when_nobody_has_re_run(client: TestClient) -> None:
    as_instructor(client, Pool(None))
    section = section_of(client)
    assert words(section.select_one("h2")) == LESSON.rerun.instructor_heading
    assert "Nobody in this pool has re-run a row" in words(section)
    assert section.select_one("table") is None


def test_the_section_counts_and_compares_with_the_recording(
    make_settings: SettingsFactory, store: Store, tmp_path: Path
) -> None:
    recording = write_recording(tmp_path, ablation_recording())
    first, second, partial = (store.create_learner() for _ in range(3))
    rerun_whole(store, first, 1, SAME)
    rerun_whole(store, second, 1, OTHER)
    finished(store, partial, 1, "both", 1.0)
    with PageClient(create_app(make_settings(recording_path=recording))) as client:
        as_instructor(client, Pool(None))
        text = words(section_of(client))
        assert (
            "3 learners re-ran at least one row of the ablation on their device; 2 finished all "
            "four rows of a re-run."
        ) in text
        assert "1 of 2 complete re-runs ranked the four rows as the recording does." in text
        lines = [
            [words(cell) for cell in row.select("th, td")]
            for row in section_of(client).select("#rerun-rows tbody tr")
        ]
        assert lines[0] == ["Both", "100.0 %", "100.0 %"]
        assert lines[1] == ["Residuals only", "10.0 %", "20.0 %"]
        figures = client.get("/instructor/aggregate.json").json()["rerun"]
        assert figures["complete_reruns"] == 2
        assert figures["complete_reruns_ranked_as_the_recording"] == 1
        assert figures["rows"]["residual_only"]["device_mean_accuracy"] == pytest.approx(0.1)


def test_without_a_usable_recording_the_section_says_so_instead_of_a_figure(
    client: TestClient, store: Store
) -> None:
    rerun_whole(store, store.create_learner(), 1, SAME)
    as_instructor(client, Pool(None))
    section = section_of(client)
    assert "1 re-run holds all four rows. The recording cannot be used" in words(section)
    cells = [row.select("td")[-1].get_text() for row in section.select("#rerun-rows tbody tr")]
    assert cells == ["cannot be used"] * 4
    figures = client.get("/instructor/aggregate.json").json()["rerun"]
    assert figures["complete_reruns_ranked_as_the_recording"] is None
    assert not math.isnan(figures["rows"]["neither"]["device_mean_accuracy"])


def test_the_report_command_writes_the_re_runs_beside_the_pool_figures(
    make_settings: SettingsFactory, store: Store, engine: Engine, tmp_path: Path
) -> None:
    settings = make_settings(recording_path=write_recording(tmp_path, ablation_recording()))
    member, outsider = store.create_learner(), store.create_learner()
    in_course(engine, member, COURSE)
    rerun_whole(store, member, 1, SAME)
    rerun_whole(store, outsider, 1, OTHER)
    output = tmp_path / "learners.csv"
    command = ["report", "--context", COURSE, "--output", str(output)]
    result = CliRunner().invoke(
        cli,
        [*command, "--recording", str(settings.recording_path)],
        env={"DATABASE_URL": settings.database_url, "NORMDIVE_SECRET_KEY": SECRET_KEY},
    )
    assert result.exit_code == 0, result.output
    figures = json.loads((tmp_path / "learners.aggregate.json").read_text(encoding="utf-8"))
    assert figures["learners"] == 1
    assert figures["rerun"] == {
        "learners": 1,
        "learners_with_a_complete_rerun": 1,
        "complete_reruns": 1,
        "complete_reruns_ranked_as_the_recording": 1,
        "learners_whose_first_complete_rerun_ranked_as_the_recording": 1,
        "rows": {
            key: {"device_mean_accuracy": SAME[key], "recorded_accuracy": RECORDED[key]}
            for key in KEYS
        },
    }


def test_each_learner_counts_once_by_their_first_complete_rerun() -> None:
    # One learner's many matching re-runs do not outweigh another's: a learner is counted by
    # the first re-run that held all four rows.
    rows = [
        *whole("a", 1, OTHER),
        *whole("a", 2, SAME),
        *whole("a", 3, SAME),
        *whole("b", 1, SAME),
    ]
    report = tally(LESSON, RECORDING, rows)
    assert (report.complete, report.matching) == (4, 3)
    assert (report.whole_learners, report.first_matching) == (2, 1)
