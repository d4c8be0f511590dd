"""Values computed once from objects that never change, keyed by those objects' identity.

The page is drawn from a few large immutable objects: the Lesson (loaded once per process),
the Recording (reader.recording_snapshot keeps one object per file until the file changes),
and the views computed from them. Both models are frozen but hold lists, so they cannot be
hashed, and comparing two of them field by field costs more than what is kept. An object that
is kept as the same object is its own key here: `same_key` keys such an object by its
identity and plain values (text, numbers, flags, None, tuples of these) by their value.

An object built anew for each request but often equal to one seen before (a learner's state:
many learners are at the same stage) is passed wrapped in ByValue, and keyed by its value.

A kept entry holds its arguments, so an identity in a key is never reused by another object
while the entry lives; an object built again (a new recording) is a new key, and the old
entry ages out of the bounded cache. Thread-safe: functools.lru_cache; two threads missing
the same key at once both compute it, and either result is right.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from decimal import Decimal
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

# Kept by value: immutable and cheap to hash. Anything else is kept by identity.
_BY_VALUE = (str, int, float, bool, Decimal, type(None))


class ByValue:
    """An argument kept by its value: equal to a ByValue of an equal object of the same type (a
    dict compared by its items, a list as a tuple). Only for frozen objects whose equal
    instances are drawn alike: the fields they show are text, integers and flags (no float or
    Decimal shown, whose equal values can print apart, as 1 and 1.0 do). An object that cannot
    be hashed (a field holds a list) is kept by its identity instead (same_key)."""

    __slots__ = ("_hash", "_key", "value")

    def __init__(self, value: object) -> None:
        self.value = value
        self._key: Hashable = _by_items(value)
        self._hash = hash((type(value), self._key))  # TypeError when a field cannot be hashed

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        # The same object (a learner's kept state, drawn again) needs no field-by-field look.
        return isinstance(other, ByValue) and (
            other.value is self.value
            or (type(other.value) is type(self.value) and other._key == self._key)
        )


def _by_items(value: object) -> Hashable:
    if isinstance(value, dict):
        return tuple(value.items())
    if isinstance(value, list):
        return tuple(value)
    return value  # hashing it tells whether it can be a key


class Same:
    """An object as a key by its identity: equal only to a Same of the very same object."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.value is self.value


def same_key(value: object) -> Hashable:
    """`value` as part of a key: plain values by value, plain tuples and lists item by item (a
    list is read now, as a tuple), a ByValue by its value, any other object (named tuples too)
    by its identity."""
    if isinstance(value, _BY_VALUE):
        return value
    if isinstance(value, ByValue):
        return value
    if type(value) is tuple or type(value) is list:
        return tuple(same_key(item) for item in value)
    return Same(value)


def _unkeyed(key: Hashable) -> Any:
    if isinstance(key, Same | ByValue):
        return key.value
    if type(key) is tuple:
        return tuple(_unkeyed(item) for item in key)
    return key


def by_value(value: object) -> ByValue | object:
    """`value` to be kept by its value (ByValue); as itself (kept by identity) when it cannot
    be hashed."""
    try:
        return ByValue(value)
    except TypeError:
        return value


def kept(maxsize: int) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A pure function of immutable arguments, computed once per distinct arguments (see
    same_key) and kept for the `maxsize` most recently used. Positional arguments only; a list
    argument reaches the function as a tuple."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.lru_cache(maxsize=maxsize, typed=True)
        def by_key(*keys: Hashable) -> R:
            return function(*(_unkeyed(key) for key in keys))  # type: ignore[call-arg]

        @functools.wraps(function)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            if kwargs:
                name = getattr(function, "__name__", function)
                raise TypeError(f"{name} is kept by its positional arguments only")
            return by_key(*(same_key(arg) for arg in args))

        call.cache_clear = by_key.cache_clear  # type: ignore[attr-defined]
        return call

    return decorate
