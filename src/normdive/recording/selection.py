"""The runs at a configuration: the one question the player, the sweep panel and the lab ask of
recorded runs. A bool is never taken for the number 1 or 0."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

# Relative: files keep eps as JSON numbers, the lesson as decimals; the last bit may differ.
EPS_MATCH = 1e-9

Setting = bool | int | float | str | None
ItemT = TypeVar("ItemT")


def same_setting(name: str, have: Setting, value: Setting) -> bool:
    if isinstance(have, bool) or isinstance(value, bool):
        return isinstance(have, bool) and isinstance(value, bool) and have == value
    if name == "eps" and isinstance(have, int | float) and isinstance(value, int | float):
        return math.isclose(have, value, rel_tol=EPS_MATCH, abs_tol=0.0)
    return have == value


def at(settings: Mapping[str, Setting], wanted: Mapping[str, Setting]) -> bool:
    return all(
        name in settings and same_setting(name, settings[name], value)
        for name, value in wanted.items()
    )


def select(
    items: Iterable[ItemT], settings: Callable[[ItemT], Mapping[str, Setting]], **wanted: Setting
) -> list[ItemT]:
    return [item for item in items if at(settings(item), wanted)]


def select_one(
    items: Iterable[ItemT], settings: Callable[[ItemT], Mapping[str, Setting]], **wanted: Setting
) -> ItemT | None:
    return next((item for item in items if at(settings(item), wanted)), None)
