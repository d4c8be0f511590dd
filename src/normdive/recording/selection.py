"""The runs at a configuration: the one question the player, the sweep panel and the lab ask of
recorded runs, answered one way whatever holds them (a file of runs, a recording's rows, a
sweep's runs, a lab grid's cells).

A run is at a configuration when every setting named has that value. Two eps values closer
than EPS_MATCH (relative) are the same: files keep eps as JSON numbers and the lesson as exact
decimals, so 1e-5 typed and 1e-5 recorded may differ in the last bit. A bool is never taken for
the number 1 or 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

# Two eps values closer than this, relative to the larger, name the same configuration.
EPS_MATCH = 1e-9

Setting = bool | int | float | str | None
ItemT = TypeVar("ItemT")


def same_setting(name: str, have: Setting, value: Setting) -> bool:
    """Whether a run's setting `name`, `have`, is the `value` asked for."""
    if isinstance(have, bool) or isinstance(value, bool):
        return isinstance(have, bool) and isinstance(value, bool) and have == value
    if name == "eps" and isinstance(have, int | float) and isinstance(value, int | float):
        return math.isclose(have, value, rel_tol=EPS_MATCH, abs_tol=0.0)
    return have == value


def at(settings: Mapping[str, Setting], wanted: Mapping[str, Setting]) -> bool:
    """Whether `settings` have every value in `wanted` (a name they lack: no)."""
    return all(
        name in settings and same_setting(name, settings[name], value)
        for name, value in wanted.items()
    )


def select(
    items: Iterable[ItemT], settings: Callable[[ItemT], Mapping[str, Setting]], **wanted: Setting
) -> list[ItemT]:
    """The items at this configuration (`settings` gives an item's), in their order."""
    return [item for item in items if at(settings(item), wanted)]


def select_one(
    items: Iterable[ItemT], settings: Callable[[ItemT], Mapping[str, Setting]], **wanted: Setting
) -> ItemT | None:
    """The first item at this configuration, or None."""
    return next((item for item in items if at(settings(item), wanted)), None)
