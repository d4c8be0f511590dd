"""How figures read in a sentence: measured percentages, exact band edges, losses, shares."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from normdive.i18n.catalogues import activated
from normdive.progress import figures


@pytest.mark.parametrize(
    ("fraction", "text"),
    [
        (0.2134, "21.3 %"),
        (1.0, "100.0 %"),
        (0.0, "0.0 %"),
        (-0.0, "0.0 %"),
        (0.89999998, "90.0 %"),  # a float32 0.9
        (math.nan, "not a number"),
        (math.inf, "infinity"),
    ],
)
def test_a_measured_percentage(fraction: float, text: str) -> None:
    assert figures.percent(fraction) == text


@pytest.mark.parametrize(
    ("fraction", "text"),
    [
        ("0.90", "90 %"),
        ("0.9", "90 %"),
        ("1", "100 %"),
        ("0.0625", "6.25 %"),
        ("0.125", "12.5 %"),
        ("0.001", "0.1 %"),
    ],
)
def test_an_exact_percentage_has_no_trailing_zeros(fraction: str, text: str) -> None:
    assert figures.exact_percent(Decimal(fraction)) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.01234, "0.012"), (2.0, "2.000"), (math.nan, "not a number"), (-math.inf, "minus infinity")],
)
def test_a_loss(value: float, text: str) -> None:
    assert figures.loss(value) == text


@pytest.mark.parametrize(
    ("count", "total", "text"),
    [(3, 7, "43 %"), (5, 5, "100 %"), (0, 5, "0 %"), (0, 0, "0 %"), (1, 3, "33 %")],
)
def test_a_share_of_learners(count: int, total: int, text: str) -> None:
    assert figures.share(count, total) == text


def test_figures_are_written_in_the_current_locale() -> None:
    with activated("de"):
        assert figures.percent(0.2134) == "21,3 %"
        assert figures.exact_percent(Decimal("0.0625")) == "6,25 %"
        assert figures.loss(0.01234) == "0,012"
        assert figures.loss(float("nan")) == "keine Zahl"
    with activated("ar"):
        assert figures.percent(0.2134) == "21.3 %"
    assert figures.percent(0.2134) == "21.3 %"
