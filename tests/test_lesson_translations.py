"""The lesson's text per locale (content/d9.<locale>.toml): only text, in the English file's
shape, validated as the English lesson is; a text left out stays English and is named."""

from __future__ import annotations

import logging
import tomllib
from importlib import resources
from typing import Any

import pytest

from normdive.config import Settings
from normdive.i18n.catalogues import activated
from normdive.lesson import translations
from normdive.lesson.content import LessonError, load_lesson
from normdive.lesson.translations import (
    load_translation,
    localized,
    missing_text,
    translation_resource,
)
from normdive.web.app import create_app
from normdive.web.infrastructure.startup import readiness_problems

LESSON = load_lesson()
SHIPPED = ["de", "ar"]


def english() -> dict[str, Any]:
    text = resources.files("normdive").joinpath("content", "d9.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


@pytest.mark.parametrize("locale", SHIPPED)
def test_each_shipped_locale_is_complete_and_keeps_the_lessons_data(locale: str) -> None:
    lesson, missing = load_translation(locale)
    assert missing == ()
    assert lesson.title != LESSON.title
    # The data is the English file's: ids, rows, numbers, thresholds.
    assert lesson.eps == LESSON.eps and lesson.tolerance == LESSON.tolerance
    assert [f.id for f in lesson.number_fields] == [f.id for f in LESSON.number_fields]
    assert [r.key for r in lesson.rows] == [r.key for r in LESSON.rows]
    assert lesson.hand_rows == LESSON.hand_rows
    assert [c.correct for c in lesson.reading.choices] == [
        c.correct for c in LESSON.reading.choices
    ]


def test_localized_follows_the_current_locale() -> None:
    assert localized(LESSON) is LESSON
    with activated("de"):
        german = localized(LESSON)
        # A soft hyphen marks where the long compound may break.
        assert german.title == "Layer-Norm und Residual\u00adverbindungen"
        assert localized(german) is german
    assert localized(LESSON, "de") is german
    # A lesson read from another file is shown as it is.
    other = load_lesson(
        resources.files("normdive").joinpath("content", "d9.toml")  # type: ignore[arg-type]
    )
    assert localized(other, "de") is other


def _with_translation(
    monkeypatch: pytest.MonkeyPatch, locale: str, data: dict[str, Any] | str
) -> None:
    read = translations._read

    def fake_read(resource: str) -> dict[str, Any]:
        if resource == translation_resource(locale):
            return tomllib.loads(data) if isinstance(data, str) else data
        return read(resource)

    monkeypatch.setattr(translations, "_read", fake_read)


def test_a_missing_text_falls_back_to_english_and_is_named(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _with_translation(monkeypatch, "ar", 'title = "طبقة"\n[predict]\nheading = "قبل"\n')
    lesson, missing = load_translation("ar")
    assert lesson.title == "طبقة" and lesson.predict.heading == "قبل"
    assert lesson.summary == LESSON.summary
    assert "summary" in missing and "predict.question" in missing
    assert "sections[0].paragraphs" in missing and "number_fields[2].label" in missing
    assert "eps" not in missing and "sections[0].id" not in missing
    assert missing_text("ar") == missing
    translations._translated.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger=translations.__name__):
            translations._translated("ar")
        assert "content/d9.ar.toml leaves" in caplog.text and "predict.question" in caplog.text
    finally:
        translations._translated.cache_clear()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('eps = "0.1"', "eps: is data"),
        ("[takeaway]\nmax_chars = 5", "takeaway.max_chars: is data"),
        ('titel = "x"', "titel: no such key"),
        ("[[rows]]\nlabel = 'x'", "rows: expected 4 items"),
        ('[hints]\nruns_text = "{laufe}"', "hints: runs_text"),
        ("title = 3", "title: expected text"),
        ("[[sections]]\nid = 'other'\n" + "[[sections]]\n" * 4, "sections[0].id: is data"),
    ],
)
def test_a_translation_that_changes_data_or_breaks_a_template_is_refused(
    monkeypatch: pytest.MonkeyPatch, text: str, named: str
) -> None:
    _with_translation(monkeypatch, "ar", text)
    with pytest.raises(LessonError) as refused:
        load_translation("ar")
    assert "content/d9.ar.toml" in str(refused.value)
    assert named in str(refused.value)


def test_english_has_no_translation_file_to_miss() -> None:
    assert missing_text("en") == ()
    assert english()["title"] == LESSON.title


def test_a_malformed_translation_stops_the_server_at_start(
    monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    _with_translation(monkeypatch, "ar", 'eps = "1"')
    translations._translated.cache_clear()
    try:
        problems = readiness_problems(settings)
        assert any("content/d9.ar.toml: eps: is data" in problem for problem in problems)
        with pytest.raises(LessonError, match=r"d9\.ar\.toml"):
            create_app(settings)
    finally:
        translations._translated.cache_clear()
