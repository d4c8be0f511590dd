"""progress.lab's sentence holding a learner's run to the recorded cell: agreement within the
lesson's tolerance at every step both evaluated, otherwise where the two are furthest apart,
a diverged run counted as the whole scale apart, and no cell said plainly. A finished run's
figures as posted: its held-out accuracy only ever a share from 0 to 1 (so its band is decided
from one), its losses a number or a marker, JSON's non-finite spellings included."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from lesson_answers import LESSON
from normdive.i18n.catalogues import activated
from normdive.lesson.plurals import counted
from normdive.lesson.translations import localized
from normdive.progress.actions import Invalid
from normdive.progress.events import EventKind
from normdive.progress.lab import (
    Figures,
    LabChoice,
    LabRun,
    comparison,
    config_name,
    finish_lab_run,
    parse_choice,
    run_line,
)

CHOICE = LabChoice(depth=2, layernorm=True, residual=True, eps=1e-5, init="gpt2", seed=0)
STEPS, EVAL_EVERY = 40, 10
CHANCE_LEVEL = 1 / 16  # bands: chance up to 12.5 %, learns from 90 %
COMMITTED = (LabRun(1, CHOICE, "learns"),)
# A whole number past a float's range: JSON has no bound on one.
HUGE_WHOLE_NUMBER = "1" + "0" * 400


def curve(*accuracies: float | str) -> list[dict[str, Any]]:
    return [
        {"step": 10 * i, "train_loss": None, "heldout_loss": 1.0, "heldout_accuracy": a}
        for i, a in enumerate(accuracies)
    ]


def run(*accuracies: float | str) -> LabRun:
    points = curve(*accuracies)
    last = points[-1]["heldout_accuracy"]
    final = Figures(
        points[-1]["step"], 1.0, float(last) if not isinstance(last, str) else float("nan")
    )
    return LabRun(1, CHOICE, "learns", final, "learns", tuple(points))


def test_equal_runs_agree_to_within_the_smallest_gap_shown() -> None:
    said = comparison(LESSON, run(0.1, 0.5, 1.0), curve(0.1, 0.5, 1.0))
    assert said == counted(
        LESSON.lab.agrees, Decimal("0.1"), points="0.1", live="100.0 %", recorded="100.0 %"
    )


def test_a_gap_within_the_tolerance_agrees_and_one_past_it_says_where() -> None:
    assert "to within 1.5 points" in comparison(LESSON, run(0.1, 0.515, 1.0), curve(0.1, 0.5, 1.0))
    said = comparison(LESSON, run(0.1, 0.8, 1.0), curve(0.1, 0.5, 1.0))
    assert said.startswith("Your device's run is 30.0 points above the recording at step 10 ")
    assert "(80.0 % here, 50.0 % recorded)" in said
    assert said.endswith("It ends at 100.0 % against 100.0 % recorded.")


def test_a_diverged_run_is_the_whole_scale_apart() -> None:
    said = comparison(LESSON, run(0.1, "nan", "nan"), curve(0.1, 0.5, 1.0))
    assert said.startswith("Your device's run is 100.0 points below the recording at step 20 ")
    assert "(not a number here, 100.0 % recorded)" in said
    # Both diverged alike: they agree.
    assert "agrees" in comparison(LESSON, run(0.1, "nan"), curve(0.1, "nan"))


def test_no_recorded_cell_or_no_shared_step_is_said_plainly() -> None:
    assert comparison(LESSON, run(0.1, 1.0), None) == LESSON.lab.no_cell
    shifted = [{**point, "step": point["step"] + 5} for point in curve(0.1, 1.0)]
    assert comparison(LESSON, run(0.1, 1.0), shifted) == LESSON.lab.no_cell


def posted(accuracy: str = "1.0", curve_accuracy: str = "0.5", loss: str = "0.5") -> str:
    """A finished run's figures as a client posts them, each spelled as the JSON token given
    (so NaN, Infinity and 1e999999 reach the parser as sent): `accuracy` the final one,
    `curve_accuracy` the first point's, `loss` every loss but the first point's training loss."""
    # The last point is the final evaluation, as the trainer posts it, when `accuracy` is one
    # a point may hold (else the final figures alone are refused, as the tests want).
    last = accuracy if _a_share(accuracy) else "0.5"
    shares = {0: curve_accuracy, STEPS: last}
    points = [
        f'{{"step": {step}, "train_loss": {"null" if step == 0 else loss}, "heldout_loss": '
        f'{loss}, "heldout_accuracy": {shares.get(step, "0.5")}}}'
        for step in range(0, STEPS + 1, EVAL_EVERY)
    ]
    final = f'{{"step": {STEPS}, "heldout_loss": {loss}, "heldout_accuracy": {accuracy}}}'
    return f'{{"final": {final}, "curve": [{", ".join(points)}]}}'


def _a_share(token: str) -> bool:
    try:
        value = json.loads(token)
    except ValueError:
        return False
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def finish(text: str) -> dict[str, Any]:
    kind, payload = finish_lab_run(COMMITTED, LESSON, 1, text, CHANCE_LEVEL, STEPS)
    assert kind is EventKind.LAB_FINISHED
    return payload


NOT_A_SHARE = [
    ("1e999999", "is inf, not a share from 0 to 1"),  # JSON's overflow parses as infinity
    ("-1e999999", "is -inf, not a share from 0 to 1"),
    ("NaN", "is nan, not a share from 0 to 1"),
    ("Infinity", "is inf, not a share from 0 to 1"),
    ("-Infinity", "is -inf, not a share from 0 to 1"),
    ('"nan"', "is nan, not a share from 0 to 1"),
    ('"inf"', "is inf, not a share from 0 to 1"),
    ('"-inf"', "is -inf, not a share from 0 to 1"),
    ("null", "is missing, not a share from 0 to 1"),
    ("1.5", "is 1.5, not a share from 0 to 1"),
    ("-0.2", "is -0.2, not a share from 0 to 1"),
    ("2", "is 2.0, not a share from 0 to 1"),
    (HUGE_WHOLE_NUMBER, "is a whole number too large for a figure"),
    ("true", "is not a number"),
    ('"0.5"', "is '0.5', not a number"),
]


@pytest.mark.parametrize(("token", "said"), NOT_A_SHARE)
def test_a_final_accuracy_that_is_not_a_share_is_refused(token: str, said: str) -> None:
    with pytest.raises(Invalid) as refused:
        finish(posted(accuracy=token))
    assert f"(the final figures' heldout_accuracy {said})" in str(refused.value)
    assert str(refused.value).endswith("so nothing was saved.")


@pytest.mark.parametrize(("token", "said"), NOT_A_SHARE)
def test_a_curve_accuracy_that_is_not_a_share_is_refused(token: str, said: str) -> None:
    with pytest.raises(Invalid) as refused:
        finish(posted(curve_accuracy=token))
    assert f"(point 1's heldout_accuracy {said})" in str(refused.value)


@pytest.mark.parametrize(
    ("token", "said"),
    [
        (HUGE_WHOLE_NUMBER, "is a whole number too large for a figure"),
        (f"-{HUGE_WHOLE_NUMBER}", "is a whole number too large for a figure"),
        ('"lots"', "is 'lots', not a number"),
        ("true", "is not a number"),
        ("[]", "is not a number"),
    ],
)
def test_a_loss_that_is_no_figure_is_refused(token: str, said: str) -> None:
    with pytest.raises(Invalid) as refused:
        finish(posted(loss=token))
    assert f"(point 1's heldout_loss {said})" in str(refused.value)


@pytest.mark.parametrize(
    ("token", "kept"),
    [
        ('"nan"', "nan"),  # the browser's trainer at eps 0: its marker for NaN
        ("NaN", "nan"),
        ('"inf"', "inf"),
        ("Infinity", "inf"),
        ("1e999999", "inf"),
        ('"-inf"', "-inf"),
        ("0.5", 0.5),
        ("0", 0.0),
    ],
)
def test_a_loss_may_be_not_a_number_and_is_kept_as_its_marker(token: str, kept: Any) -> None:
    payload = finish(posted(accuracy="0", loss=token))
    assert payload["final"]["heldout_loss"] == kept
    assert [p["heldout_loss"] for p in payload["curve"]] == [kept] * 5
    assert [p["train_loss"] for p in payload["curve"]] == [None] + [kept] * 4
    json.dumps(payload, allow_nan=False)  # markers, never a bare NaN or Infinity
    assert payload["outcome"] == "chance"


@pytest.mark.parametrize(
    ("token", "accuracy", "band"),
    [
        ("1", 1.0, "learns"),  # JSON.stringify writes 1.0 as 1
        ("0.9", 0.9, "learns"),
        ("0.5", 0.5, "partial"),
        ("0.125", 0.125, "chance"),
        ("0", 0.0, "chance"),
        ("-0.0", 0.0, "chance"),
    ],
)
def test_a_share_is_kept_as_a_float_and_decides_the_band(
    token: str, accuracy: float, band: str
) -> None:
    payload = finish(posted(accuracy=token, curve_accuracy=token))
    kept = payload["final"]["heldout_accuracy"]
    assert isinstance(kept, float) and kept == accuracy
    assert payload["curve"][0]["heldout_accuracy"] == accuracy
    assert payload["outcome"] == band


@pytest.mark.parametrize(
    ("locale", "name", "no_run"),
    [
        (
            "de",
            "Beide, Tiefe 2, eps 0,00001, GPT-2-Initialisierung, Seed 0",
            "Sie haben keinen Laborlauf 7.",
        ),
        (
            "ar",
            "كلاهما، العمق 2، eps 0.00001، تهيئة GPT-2، البذرة 0",
            "ليست لديك عملية مختبر رقم 7.",
        ),
    ],
)
def test_the_configuration_and_a_refusal_in_german_and_arabic(
    locale: str, name: str, no_run: str
) -> None:
    with activated(locale):
        assert config_name(localized(LESSON), CHOICE) == name
        with pytest.raises(Invalid) as refused:
            finish_lab_run([], localized(LESSON), 7, "{}", 0.25, 40)
    assert refused.value.message == no_run


def test_a_missing_setting_is_named_in_the_language() -> None:
    with activated("de"), pytest.raises(Invalid) as refused:
        parse_choice({"depth": "2"}, localized(LESSON))
    assert refused.value.message == "Wählen Sie einen Wert für Zeile, bevor Sie festlegen."


def test_the_comparison_and_a_kept_run_in_the_locales_writing() -> None:
    with activated("de"):
        german = localized(LESSON)
        said = comparison(german, run(0.1, 0.8, 1.0), curve(0.1, 0.5, 1.0))
        line = run_line(german, run(0.1, 0.5, 0.9))
    assert "30,0" in said and "80,0 %" in said and "30.0" not in said
    assert line.startswith("Beide, Tiefe 2, eps 0,00001, GPT-2-Initialisierung, Seed 0: ")
    assert "„Lernt das Kopieren“" in line and line.endswith("(90,0 %).")
    with activated("ar"):
        arabic = run_line(localized(LESSON), run(0.1, 0.5, 0.9))
    assert arabic.startswith("كلاهما، العمق 2، eps 0.00001، تهيئة GPT-2، البذرة 0: ")


def test_final_figures_that_are_not_the_curves_last_point_are_refused() -> None:
    # The trainer's final figures are its last evaluation's: a curve ending at 0.5 with a final
    # 0.9 was not posted by it.
    body = json.loads(posted(accuracy="0.9"))
    body["curve"][-1]["heldout_accuracy"] = 0.5
    with pytest.raises(Invalid, match="are not its curve's last point"):
        finish(json.dumps(body))
    body["curve"] = body["curve"][:-1]  # a curve that stops before the final step
    with pytest.raises(Invalid, match="are not its curve's last point"):
        finish(json.dumps(body))
