"""lesson.plurals: the lesson's counting sentences in each language's plural forms (CLDR's
categories through Babel), over one table of counts per locale, and the checks that hold a
locale's tables to its categories."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from normdive.lesson import plurals, translations
from normdive.lesson.content import Lesson, LessonError, load_lesson, placeholders
from normdive.lesson.translations import load_translation

COUNTS = (0, 1, 2, 3, 11, 100)
# The CLDR category of each of COUNTS, per locale.
CATEGORY_OF = {
    "en": ("other", "one", "other", "other", "other", "other"),
    "de": ("other", "one", "other", "other", "other", "other"),
    "ar": ("zero", "one", "two", "few", "many", "other"),
}
# "You have run it N times." in each locale, for each of COUNTS.
RUNS_SENTENCES = {
    "en": (
        "You have run it 0 times.",
        "You have run it 1 time.",
        "You have run it 2 times.",
        "You have run it 3 times.",
        "You have run it 11 times.",
        "You have run it 100 times.",
    ),
    "de": (
        "Sie haben 0 Durchläufe.",
        "Sie haben 1 Durchlauf.",
        "Sie haben 2 Durchläufe.",
        "Sie haben 3 Durchläufe.",
        "Sie haben 11 Durchläufe.",
        "Sie haben 100 Durchläufe.",
    ),
    "ar": (
        "لم تشغّله أي مرة بعد.",
        "شغّلته مرة واحدة.",
        "شغّلته مرتين.",
        "شغّلته 3 مرات.",
        "شغّلته 11 مرة.",
        "شغّلته 100 مرة.",
    ),
}
# Every counting sentence of the lesson: (where, the count's placeholder).
COUNTED_FIELDS = (
    ("hints.runs_text", "runs"),
    ("hints.rung_waiting", "threshold"),
    ("hints.answer_needs_predictions", "rows"),
    ("hints.answer_also_needs_predictions", "rows"),
    ("compare.row_agrees", "step"),
    ("compare.row_differs", "step"),
    ("compare.reading_right_after", "locks"),
    ("aggregate.hidden", "minimum"),
    ("aggregate.committed", "count"),
    ("lab.agrees", "points"),
    ("lab.differs", "points"),
    ("lab.too_many", "count"),
)


def lesson_in(locale: str) -> Lesson:
    return load_lesson() if locale == "en" else load_translation(locale)[0]


def field(lesson: Lesson, where: str) -> Any:
    table, name = where.split(".")
    return getattr(getattr(lesson, table), name)


@pytest.mark.parametrize("locale", ["en", "de", "ar"])
def test_each_count_falls_in_its_cldr_category(locale: str) -> None:
    assert tuple(plurals.category(n, locale) for n in COUNTS) == CATEGORY_OF[locale]


@pytest.mark.parametrize("locale", ["en", "de", "ar"])
def test_the_run_count_reads_in_each_locales_plural_forms(locale: str) -> None:
    hints = lesson_in(locale).hints
    said = tuple(plurals.counted(hints.runs_text, n, locale, runs=n) for n in COUNTS)
    assert said == RUNS_SENTENCES[locale]


@pytest.mark.parametrize("locale", ["en", "de", "ar"])
@pytest.mark.parametrize(("where", "count"), COUNTED_FIELDS)
def test_every_counting_sentence_has_each_form_of_its_locale(
    locale: str, where: str, count: str
) -> None:
    text = field(lesson_in(locale), where)
    assert isinstance(text, dict), f"{where} in {locale} is not a table of plural forms"
    assert set(text) == plurals.categories(locale)
    names = set().union(*(placeholders(form) for form in text.values()))
    assert count in placeholders(text["other"])
    for n, name in zip(COUNTS, CATEGORY_OF[locale], strict=True):
        fields = {other: f"<{other}>" for other in names} | {count: n}
        said = plurals.counted(text, n, locale, **fields)
        assert said == text[name].format(**fields), (locale, where, n)
        assert "{" not in said
    # The singular differs from the plural in every language here (Arabic's `many` and
    # `other` may read alike unvocalised: 11 مرةً, 100 مرةٍ).
    assert text["one"] != text["other"], f"{where} in {locale}"


def test_a_sentence_with_other_placeholders_is_filled_whole() -> None:
    lesson = lesson_in("de")
    said = plurals.counted(
        lesson.lab.agrees, Decimal("1.5"), "de", points="1,5", live="90 %", recorded="91 %"
    )
    assert said.startswith("Ihr Gerät stimmt") and "1,5 Punkte" in said and "{" not in said


def test_a_decimal_count_takes_its_own_category() -> None:
    # CLDR: a visible fraction is never "one" in English, "1.0 points"; Arabic counts n itself.
    assert plurals.category(Decimal("1.0"), "en") == "other"
    assert plurals.category(Decimal("1.0"), "ar") == "one"
    assert plurals.category(Decimal("0.4"), "ar") == "other"


def test_a_plain_template_serves_every_count() -> None:
    assert [plurals.counted("{n} x", n, "ar", n=n) for n in (0, 2)] == ["0 x", "2 x"]


@pytest.fixture
def german_file(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Serve a German lesson text written by the test instead of the packaged one."""

    def use(text: str) -> None:
        original = translations._read

        def read(resource: str) -> dict[str, Any]:
            if resource == translations.translation_resource("de"):
                import tomllib

                return tomllib.loads(text)
            return original(resource)

        monkeypatch.setattr(translations, "_read", read)

    return use


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[hints.runs_text]\nother = "{runs} mal"', "hints.runs_text: needs the plural form 'one'"),
        (
            '[hints.runs_text]\none = "einmal"\nfew = "{runs}"\nother = "{runs} mal"',
            "hints.runs_text: has the plural form 'few', which 'de' never uses",
        ),
        ('[hints.runs_text]\none = "einmal"\nother = "oft"', "hints: runs_text.other"),
        ('[hints.runs_text]\none = "{laufe}"\nother = "{runs}"', "hints: runs_text.one"),
        ("[hints.runs_text]\none = 1\nother = 2", "hints.runs_text: expected text, or a table"),
    ],
)
def test_a_translations_plural_table_is_held_to_its_locale(
    german_file: Any, text: str, named: str
) -> None:
    german_file(text)
    with pytest.raises(LessonError, match=r"content/d9\.de\.toml") as raised:
        load_translation("de")
    assert named in str(raised.value)


def test_one_template_stands_for_every_count_and_a_missing_table_is_named(
    german_file: Any,
) -> None:
    german_file('[hints]\nruns_text = "Durchläufe: {runs}."')
    lesson, missing = load_translation("de")
    assert lesson.hints.runs_sentence(1) == "Durchläufe: 1."
    # What the file leaves out stays English, each counting sentence named once.
    assert "hints.runs_text" not in missing
    assert "aggregate.committed" in missing
    assert "aggregate.committed.one" not in missing
