"""The per-learner export against a hand-computed fixture: three learners of one course with
known event times (one launched and nothing more), their rows in the CSV the view streams
and in `normdive report`'s CSV and JSON, and the aggregate beside it."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import Engine, insert
from starlette.testclient import TestClient
from typer.testing import CliRunner

from helpers import SECRET_KEY, SettingsFactory, ablation_recording, write_recording
from normdive.cli import app as cli
from normdive.config import Settings
from normdive.lesson.content import load_lesson
from normdive.lti.roster import Roster, RosterEntry
from normdive.progress.report import summarise
from normdive.progress.report_export import columns
from normdive.store.event_store import Store
from normdive.store.tables import EventRecord, LtiContextMember, LtiLearner
from normdive.web.infrastructure.instructor_access import INSTRUCTOR_COOKIE, Pool, cookie_value
from normdive.web.views.instructor_report import csv_chunks

COURSE = "e" * 64
ADA, BOB, CY = "a" * 32, "b" * 32, "c" * 32
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
FIELDS = (
    "row1_mean",
    "row1_variance",
    "row1_denominator",
    "row2_mean",
    "row2_variance",
    "row2_denominator",
)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def answer(field: str, verdict: str, slip: str | None = None) -> dict[str, Any]:
    return {
        "field": field,
        "raw": "1",
        "parsed": "1",
        "verdict": verdict,
        "slip": slip,
        "message": None,
    }


# (learner, minutes after T0, kind, payload)
EVENTS: list[tuple[str, int, str, dict[str, Any]]] = [
    (ADA, 0, "prerequisite_done", {"source": "lti_platform"}),
    (ADA, 1, "prediction_committed", {"choice": "residual"}),
    (
        ADA,
        3,
        "numbers_checked",
        {
            "answers": [
                answer("row1_variance", "wrong", "variance_n_minus_1"),
                answer("row1_mean", "format_error"),
                *(answer(f, "right") for f in FIELDS if f != "row1_variance"),
            ]
        },
    ),
    (ADA, 5, "numbers_checked", {"answers": [answer("row1_variance", "right")]}),
    (ADA, 6, "reading_locked", {"choice": "smoothing", "right": False}),
    (ADA, 7, "reading_locked", {"choice": "keeps_finite", "right": True}),
    *(
        (ADA, 8 + i, "row_predicted", {"row": row, "outcome": "learns"})
        for i, row in enumerate(("both", "residual_only", "layernorm_only", "neither"))
    ),
    (ADA, 12, "hint_opened", {"rung": 1}),
    (ADA, 13, "row_played", {"row": "both"}),
    (ADA, 14, "gate_closed", {"recording_digest": "d", "recording_file": "f"}),
    (ADA, 15, "takeaway_saved", {"text": '=HYPERLINK("x")'}),
    (BOB, 2, "prediction_committed", {"choice": "layer_norm"}),
    (BOB, 4, "row_predicted", {"row": "neither", "outcome": "chance"}),
    (BOB, 6, "row_played", {"row": "neither"}),
    (BOB, 7, "numbers_checked", {"answers": [answer("row2_mean", "wrong", "mean_not_divided")]}),
]

BLANK: dict[str, str] = {name: "" for name in columns(load_lesson())}
for field in FIELDS:
    BLANK |= {f"{field}_attempts": "0", f"{field}_landed": "false", f"{field}_format_errors": "0"}
BLANK |= {
    "reading_locks": "0",
    "reading_right": "false",
    "runs_before_gate": "0",
    "gate_closed": "false",
    "events": "0",
}

EXPECTED = [
    BLANK
    | {
        "learner": ADA,
        "opened_at": "2026-03-02T10:00:00Z",
        "predicted_at": "2026-03-02T10:01:00Z",
        "numbers_landed_at": "2026-03-02T10:05:00Z",
        "reading_right_at": "2026-03-02T10:07:00Z",
        "rows_before_play_at": "2026-03-02T10:11:00Z",
        "best_row_played_at": "2026-03-02T10:13:00Z",
        "gate_closed_at": "2026-03-02T10:14:00Z",
        "stopped_after": "gate_closed",
        "events": "14",
        **{f"{f}_attempts": "1" for f in FIELDS},
        **{f"{f}_landed": "true" for f in FIELDS},
        "row1_variance_attempts": "2",
        "row1_variance_slips": "variance_n_minus_1:1",
        "row1_mean_format_errors": "1",
        "opening_prediction": "residual",
        "reading_locks": "2",
        "reading_choices": "smoothing;keeps_finite",
        "reading_right": "true",
        "both_prediction": "learns",
        "residual_only_prediction": "learns",
        "layernorm_only_prediction": "learns",
        "neither_prediction": "learns",
        "rows_played": "both",
        "hint_rungs": "1",
        "runs_before_gate": "5",  # two checks, two locks, one play
        "gate_closed": "true",
    },
    BLANK
    | {
        "learner": BOB,
        "opened_at": "2026-03-02T10:02:00Z",
        "predicted_at": "2026-03-02T10:02:00Z",
        "stopped_after": "predicted",
        "events": "4",
        "row2_mean_attempts": "1",
        "row2_mean_slips": "mean_not_divided:1",
        "opening_prediction": "layer_norm",
        "neither_prediction": "chance",
        "rows_played": "neither",
        "runs_before_gate": "2",
    },
    BLANK
    | {
        "learner": CY,
        "opened_at": "2026-03-02T09:30:00Z",  # launched, nothing more
        "stopped_after": "opened",
    },
]


@pytest.fixture
def settings(make_settings: SettingsFactory, tmp_path: Path) -> Settings:
    return make_settings(recording_path=write_recording(tmp_path, ablation_recording()))


@pytest.fixture
def course(engine: Engine, store: Store) -> None:
    for learner in (ADA, BOB, CY):
        store.ensure_learner(learner)
    with engine.begin() as connection:
        for learner in (ADA, BOB, CY):
            connection.execute(insert(LtiLearner).values(link_key=learner * 2, learner_id=learner))
            connection.execute(
                insert(LtiContextMember).values(
                    context_key=COURSE,
                    learner_id=learner,
                    last_launch_at=at(-30) if learner == CY else at(60),
                )
            )
    with engine.begin() as connection:
        for learner, minutes, kind, payload in EVENTS:
            connection.execute(
                insert(EventRecord).values(
                    learner_id=learner, kind=kind, payload=payload, created_at=at(minutes)
                )
            )


def rows_of(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.both_databases
@pytest.mark.usefixtures("course")
def test_the_views_csv_matches_the_hand_computed_rows(client: TestClient) -> None:
    assert client.get("/instructor/export.csv").status_code == 403
    client.cookies.set(
        INSTRUCTOR_COOKIE, cookie_value(Pool(COURSE), SecretStr(SECRET_KEY)), path="/instructor"
    )
    answer = client.get("/instructor/export.csv")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/csv; charset=utf-8"
    assert "attachment" in answer.headers["content-disposition"]
    header = next(csv.reader(io.StringIO(answer.text)))
    assert header == columns(load_lesson())
    assert rows_of(answer.text) == EXPECTED


@pytest.mark.usefixtures("course")
def test_the_report_command_writes_the_same_rows_and_the_aggregate(
    settings: Settings, tmp_path: Path
) -> None:
    env = {
        "DATABASE_URL": settings.database_url,
        "NORMDIVE_SECRET_KEY": SECRET_KEY,
    }
    for output_format in ("csv", "json"):
        output = tmp_path / f"learners.{output_format}"
        result = CliRunner().invoke(
            cli,
            [
                "report",
                "--context",
                COURSE,
                "--format",
                output_format,
                "--output",
                str(output),
                "--recording",
                str(settings.recording_path),
            ],
            env=env,
        )
        assert result.exit_code == 0, result.output
        text = output.read_text(encoding="utf-8")
        rows = rows_of(text) if output_format == "csv" else json.loads(text)
        assert rows == EXPECTED
        figures = json.loads((tmp_path / "learners.aggregate.json").read_text())
        assert figures["learners"] == 3
        assert [step["reached"] for step in figures["funnel"]] == [3, 2, 1, 1, 1, 1, 1]
        assert [step["stopped"] for step in figures["funnel"]] == [1, 1, 0, 0, 0, 0, 1]
        assert figures["opening"] == {"residual": 1, "layer_norm": 1}
        assert figures["takeaways"] == [
            {"saved_at": "2026-03-02T10:15:00Z", "text": '=HYPERLINK("x")'}
        ]


def test_a_cell_that_a_spreadsheet_would_run_is_written_as_text() -> None:
    lesson = load_lesson()
    summary = summarise("=cmd", [], lesson, "both", launched_at=T0)
    text = "".join(csv_chunks([summary], lesson))
    assert rows_of(text)[0]["learner"] == "'=cmd"


# A roster name a learner chose, and what each spreadsheet reader makes of the file.
HOSTILE_NAME = "Smith;=cmd|' /C calc'!A0;"
FORMULA_STARTS = ("=", "+", "-", "@")


@pytest.mark.parametrize("separator", [",", ";", "\t"])
def test_no_reader_of_the_csv_finds_a_cell_it_would_run(separator: str) -> None:
    lesson = load_lesson()
    summary = summarise("learner-1", [], lesson, "both", launched_at=T0)
    member = RosterEntry(
        key="k" * 64,
        status="Active",
        roles=("Learner", '=HYPERLINK("x")'),
        name=HOSTILE_NAME,
        email="\t@evil.example",
        learner_id="learner-1",
    )
    roster = Roster(fetched_at=T0, problem=None, members=(member,))
    text = "".join(csv_chunks([summary], lesson, roster=roster))
    cells = [cell for row in csv.reader(io.StringIO(text), delimiter=separator) for cell in row]
    assert cells, separator
    assert not [cell for cell in cells if cell.lstrip(' \t"').startswith(FORMULA_STARTS)]
    if separator == ",":  # the comma reader gets every cell whole, the name neutralised
        assert "Smith;'=cmd|' /C calc'!A0;" in cells
        assert "'\t'@evil.example" in cells  # neutralised at its head and after its tab


def test_the_csv_is_made_as_it_is_read() -> None:
    lesson = load_lesson()
    made: list[str] = []

    def summaries():  # type: ignore[no-untyped-def]
        for learner in ("1" * 32, "2" * 32, "3" * 32):
            made.append(learner)
            yield summarise(learner, [], lesson, "both", launched_at=T0)

    chunks = csv_chunks(summaries(), lesson, rows_per_chunk=1)
    first = next(chunks)
    assert made == ["1" * 32] and first.count("\r\n") == 2  # the header and one learner
    assert len(list(chunks)) == 3  # two more learners, then the (empty) rest
    assert made == ["1" * 32, "2" * 32, "3" * 32]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--format", "xml"], "give csv or json"),
        (["--context", "course-1"], "not a context key"),
    ],
)
def test_the_report_command_refuses_bad_options(
    settings: Settings, tmp_path: Path, arguments: list[str], message: str
) -> None:
    result = CliRunner().invoke(
        cli,
        ["report", "--output", str(tmp_path / "x.csv"), *arguments],
        env={"DATABASE_URL": settings.database_url},
    )
    assert result.exit_code == 1
    assert message in result.output
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.usefixtures("course")
def test_the_csv_headers_follow_the_instructors_language_and_the_cells_stay_machine_readable(
    client: TestClient,
) -> None:
    client.cookies.set(
        INSTRUCTOR_COOKIE, cookie_value(Pool(COURSE), SecretStr(SECRET_KEY)), path="/instructor"
    )
    english = client.get("/instructor/export.csv").text.splitlines()
    german = client.get("/instructor/export.csv", headers={"Accept-Language": "de"}).text
    lines = german.splitlines()
    header = next(csv.reader(io.StringIO(lines[0])))
    assert header[0] == "Lernende Person"
    assert "Mittelwert von [1, 2, 3]: Versuche" in header
    assert "Lektion geöffnet: Zeitpunkt" in header
    assert "Nur Layer-Norm: Vorhersage" in header
    assert len(header) == len(columns(load_lesson()))
    # The cells are the same as in English: ids, true/false, ISO times, points.
    assert lines[1:] == english[1:]


@pytest.mark.usefixtures("course")
def test_the_instructor_view_follows_the_instructors_language(client: TestClient) -> None:
    client.cookies.set(
        INSTRUCTOR_COOKIE, cookie_value(Pool(COURSE), SecretStr(SECRET_KEY)), path="/instructor"
    )
    page = client.get("/instructor", headers={"Accept-Language": "ar"}).text
    assert '<html lang="ar" dir="rtl"' in page
    assert "عرض المدرّس" in page and "الأعداد الستة" in page
    assert "تسوية الطبقة والوصلات المتبقية" in page  # the lesson's title in Arabic
    english = client.get("/instructor").text
    assert "Instructor view" in english and "The six numbers" in english
