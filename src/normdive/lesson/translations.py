"""The lesson's text in each locale: content/d9.<locale>.toml holds only text, in the English
file's shape; what it leaves out stays English (logged; missing_text). Data (DATA_KEYS, every
value that is not text) stays the English file's, and the merged lesson is validated as English
is, so placeholders are checked in every language. README, "Languages": adding a locale."""

from __future__ import annotations

import functools
import logging
import tomllib
from importlib import resources
from typing import Any

from pydantic import ValidationError

from normdive.i18n.catalogues import current_locale
from normdive.i18n.locales import DEFAULT_LOCALE, LOCALES
from normdive.lesson import plurals
from normdive.lesson.content import (
    DEFAULT_LESSON_RESOURCE,
    Lesson,
    LessonError,
    _describe,
    load_lesson,
)

logger = logging.getLogger(__name__)

# Text-valued keys that are data, not words: the same in every language.
DATA_KEYS = frozenset(
    {
        "id",
        "key",
        "step",
        "number",
        "eps",
        "tolerance",
        "learns_min_accuracy",
        "chance_max_multiple",
        "agreement_points",
        "level_points",
    }
)
# Tables that are data as a whole.
DATA_TABLES = frozenset({"lab.offered", "rerun.config"})


def translation_resource(locale: str) -> str:
    """The packaged file of `locale`'s text: "d9.de.toml"."""
    stem = DEFAULT_LESSON_RESOURCE.removesuffix(".toml")
    return f"{stem}.{locale}.toml"


def _read(resource: str) -> dict[str, Any]:
    """The packaged TOML file `resource`; a locale's file not written yet holds nothing."""
    packaged = resources.files("normdive").joinpath("content", resource)
    if resource != DEFAULT_LESSON_RESOURCE and not packaged.is_file():
        return {}
    text = packaged.read_text(encoding="utf-8")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LessonError(f"content/{resource}: not valid TOML: {exc}") from None


def _merged(english: Any, translated: Any, path: str, missing: list[str], locale: str) -> Any:
    """`english` with `translated`'s texts in place; the paths of those it lacks go to `missing`."""
    if plurals.is_table(english):
        # Exactly `locale`'s plural categories: English's one/other need not match Arabic's six.
        if isinstance(translated, str):
            return translated
        if not plurals.is_table(translated):
            raise ValueError(
                f"{path}: expected text, or a table of plural forms keyed by "
                + ", ".join(plurals.CATEGORIES)
            )
        try:
            plurals.check_categories(translated, locale)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        return translated
    if isinstance(english, dict):
        if not isinstance(translated, dict):
            raise ValueError(f"{path or 'the file'}: expected a table")
        unknown = sorted(set(translated) - set(english))
        if unknown:
            raise ValueError(f"{_at(path, unknown[0])}: no such key in the English lesson")
        merged = {}
        for key, value in english.items():
            where = _at(path, key)
            if key in translated:
                is_data = key in DATA_KEYS or where in DATA_TABLES or not _has_text(value)
                if is_data and translated[key] != value:
                    raise ValueError(f"{where}: is data, the same in every language")
                merged[key] = _merged(value, translated[key], where, missing, locale)
            else:
                merged[key] = value
                if key not in DATA_KEYS and where not in DATA_TABLES:
                    missing.extend(_texts(value, where))
        return merged
    if isinstance(english, list) and english and all(isinstance(i, dict) for i in english):
        if not isinstance(translated, list) or len(translated) != len(english):
            raise ValueError(f"{path}: expected {len(english)} items, in the English order")
        return [
            _merged(item, other, f"{path}[{index}]", missing, locale)
            for index, (item, other) in enumerate(zip(english, translated, strict=True))
        ]
    if isinstance(english, list):
        if not isinstance(translated, list) or not all(isinstance(i, str) for i in translated):
            raise ValueError(f"{path}: expected a list of texts")
        return translated
    if isinstance(english, str):
        if not isinstance(translated, str):
            raise ValueError(f"{path}: expected text")
        return translated
    return english if translated == english else _data_changed(path)


def _data_changed(path: str) -> Any:
    raise ValueError(f"{path}: is data, the same in every language")


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _has_text(value: Any) -> bool:
    if isinstance(value, str):
        return True
    if isinstance(value, dict):
        return any(_has_text(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_text(item) for item in value)
    return False


def _texts(value: Any, path: str) -> list[str]:
    """The dotted paths of the texts within `value` (an English value left untranslated)."""
    if isinstance(value, str) or plurals.is_table(value):
        return [path]
    if isinstance(value, dict):
        return [
            found
            for key, item in value.items()
            if key not in DATA_KEYS
            for found in _texts(item, _at(path, key))
        ]
    if isinstance(value, list):
        if all(isinstance(item, str) for item in value):
            return [path] if value else []
        return [found for i, item in enumerate(value) for found in _texts(item, f"{path}[{i}]")]
    return []


def load_translation(
    locale: str, english_data: dict[str, Any] | None = None
) -> tuple[Lesson, tuple[str, ...]]:
    """The packaged lesson in `locale`, and the texts it leaves in English (dotted paths).
    Raises LessonError naming the file and the field."""
    source = f"content/{translation_resource(locale)}"
    english = english_data if english_data is not None else _read(DEFAULT_LESSON_RESOURCE)
    translated = _read(translation_resource(locale))
    missing: list[str] = []
    try:
        merged = _merged(english, translated, "", missing, locale)
    except ValueError as exc:
        raise LessonError(f"{source}: {exc}") from None
    try:
        lesson = Lesson.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(_describe(error) for error in exc.errors())
        raise LessonError(f"{source}: {problems}") from None
    return lesson, tuple(missing)


def missing_text(locale: str) -> tuple[str, ...]:
    """The texts `locale`'s file leaves in English (none for English itself)."""
    if locale == DEFAULT_LOCALE:
        return ()
    return load_translation(locale)[1]


@functools.cache
def _translated(locale: str) -> Lesson:
    lesson, missing = load_translation(locale)
    if missing:
        logger.warning(
            "content/%s leaves %d texts in English: %s",
            translation_resource(locale),
            len(missing),
            ", ".join(missing),
        )
    return lesson


def localized(lesson: Lesson, locale: str | None = None) -> Lesson:
    """`lesson` in `locale` (the current locale by default) when it is the packaged lesson;
    a lesson read from another file is shown as it is."""
    locale = locale or current_locale()
    if locale == DEFAULT_LOCALE or locale not in LOCALES or lesson is not load_lesson():
        return lesson
    return _translated(locale)
