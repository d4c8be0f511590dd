"""The re-run of the ablation in German and Arabic over HTTP: the panel's words and its refusals
follow the learner's chosen language (the switch's `lang` link, kept in a cookie), and the
instructor view's re-run section counts in the instructor's language, with Arabic's plural
forms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from starlette.testclient import TestClient

from helpers import SECRET_KEY, SettingsFactory, ablation_recording, soup, words, write_recording
from lesson_answers import JSON, LESSON, post_each, steps_to_the_gate
from normdive.lesson.translations import load_translation
from normdive.progress.events import EventKind
from normdive.progress.rerun import rerun_choice, row_keys
from normdive.store.event_store import Store
from normdive.web.app import create_app
from normdive.web.infrastructure.instructor_access import INSTRUCTOR_COOKIE, Pool, cookie_value
from page_client import PageClient
from sample_lab import sample_lab_grid, write_lab_grid

GERMAN, _ = load_translation("de")
KEYS = row_keys(LESSON)
# Device finals ranked as the sample recording ranks its rows (100 %, 20 %, about 6 % twice).
SAME = {"both": 1.0, "residual_only": 0.14, "layernorm_only": 0.056, "neither": 0.05}


@pytest.fixture
def recording_path(tmp_path: Path) -> Path:
    path = write_recording(tmp_path, ablation_recording("both"))
    write_lab_grid(path, sample_lab_grid(with_rerun=True))
    return path


def in_german(client: TestClient) -> None:
    """Picks German with the language switch's link, as a learner does."""
    answer = client.get("/?lang=de")
    assert answer.status_code == 200 and '<html lang="de"' in answer.text


def test_the_panel_and_its_refusals_speak_german(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    text = GERMAN.rerun
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        in_german(client)
        client.post("/predict", data={"choice": "residual"}, headers=JSON)
        locked = client.get("/lab/rerun/panel")
        assert locked.status_code == 409
        assert words(soup(locked.text).select_one("#rerun-problem")) == text.locked

        post_each(client, steps_to_the_gate()[1:])  # the prediction is in already
        page = soup(client.get("/").text)
        assert words(page.select_one("#rerun-title")) == "Die Ablation auf diesem Gerät wiederholen"
        assert words(page.select_one("#rerun-panel summary")) == "Die Wiederholung öffnen"
        panel = soup(client.get("/lab/rerun/panel").text)
        assert words(panel.select_one("#rerun-start")) == "Die vier Zeilen neu trainieren"
        head = [words(th) for th in panel.select("#rerun-table thead th")]
        assert head == [
            "Zeile",
            "Ihr Gerät",
            "Ihre Vorhersage",
            "Die Aufnahme",
            "Aufgenommen in dieser Größe",
        ]

        out_of_order = client.post(
            "/lab/reruns/1/rows/neither", data={"result": "{}"}, headers=JSON
        )
        assert out_of_order.status_code == 409
        assert out_of_order.json()["message"] == (
            "Die Wiederholung trainiert ihre Zeilen der Reihe nach: Als Nächstes kommt die "
            "Zeile Beide, nicht Keine von beiden."
        )
        other_set = client.post("/lab/reruns/2/rows/both", data={"result": "{}"}, headers=JSON)
        assert other_set.status_code == 409
        assert other_set.json()["message"] == (
            "Wiederholung 2 ist nicht die, die gerade trainiert wird (das ist Wiederholung 1)."
        )


def finished(store: Store, learner: str, number: int, key: str, accuracy: float) -> None:
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


@pytest.mark.parametrize(
    ("language", "counted", "ranked", "head"),
    [
        (
            "de",
            "3 Personen haben mindestens eine Zeile der Ablation auf dem eigenen Gerät "
            "wiederholt; 1 davon haben alle vier Zeilen einer Wiederholung fertig trainiert.",
            "1 von 1 vollständigen Wiederholung ordnete die vier Zeilen so wie die Aufnahme.",
            ["Zeile", "Geräte (Mittelwert)", "Die Aufnahme"],
        ),
        (
            "ar",
            # Three learners: Arabic's "few" form.
            "أعاد 3 متعلمين تشغيل صف واحد على الأقل من الإزالة على أجهزتهم؛ ومن أنهى منهم "
            "الصفوف الأربعة كلها في إعادة تشغيل: 1.",
            "إعادات التشغيل الكاملة التي رتّبت الصفوف الأربعة كما يرتبها التسجيل: 1 من 1.",
            ["الصف", "الأجهزة (المتوسط)", "التسجيل"],
        ),
    ],
)
def test_the_instructor_views_re_run_section_in_german_and_arabic(
    make_settings: SettingsFactory,
    store: Store,
    tmp_path: Path,
    language: str,
    counted: str,
    ranked: str,
    head: list[str],
) -> None:
    recording = write_recording(tmp_path, ablation_recording())
    whole, partial, other = (store.create_learner() for _ in range(3))
    for key in KEYS:
        finished(store, whole, 1, key, SAME[key])
    finished(store, partial, 1, "both", 1.0)
    finished(store, other, 1, "both", 0.5)
    with PageClient(create_app(make_settings(recording_path=recording))) as client:
        client.cookies.set(
            INSTRUCTOR_COOKIE, cookie_value(Pool(None), SecretStr(SECRET_KEY)), path="/instructor"
        )
        page = soup(client.get("/instructor", headers={"Accept-Language": language}).text)
        section = page.select_one("#rerun-report")
        said = words(section)
        assert counted in said and ranked in said
        assert [words(th) for th in page.select("#rerun-rows thead th")] == head
