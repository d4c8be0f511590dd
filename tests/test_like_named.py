"""like_named: keyword arguments for one record from the like-named attributes of another."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from normdive.like_named import like_named


@dataclass(frozen=True)
class Source:
    depth: int
    steps: int
    init: str


@dataclass(frozen=True)
class Target:
    depth: int
    steps: int
    seed: int


def test_it_copies_the_named_attributes_in_their_order() -> None:
    copied = like_named(Source(depth=4, steps=600, init="gpt2"), "steps", "depth")
    assert copied == {"steps": 600, "depth": 4}
    assert list(copied) == ["steps", "depth"]


def test_it_fills_a_constructor_beside_what_the_caller_computes() -> None:
    built = Target(seed=3, **like_named(Source(depth=4, steps=600, init="gpt2"), "depth", "steps"))
    assert built == Target(depth=4, steps=600, seed=3)


def test_no_names_give_no_arguments() -> None:
    assert like_named(Source(depth=1, steps=1, init="gpt2")) == {}


def test_a_name_the_source_lacks_is_refused_by_name() -> None:
    with pytest.raises(AttributeError, match="seed"):
        like_named(Source(depth=4, steps=600, init="gpt2"), "depth", "seed")
