"""The sweep panel's sentences and the compare section's line come from the sweep file: a
sample sweep where the answer flips elsewhere moves them."""

from __future__ import annotations

import pytest

from normdive.i18n.catalogues import activated
from normdive.lesson.content import load_lesson
from normdive.lesson.translations import localized
from normdive.progress.sweep import compare_line, depth_words, seed_words, sweep_sentences
from normdive.recording.sweep import default_plan
from sample_sweeps import CHANCE, FLIP_AT_4, FLIP_AT_8, sample_sweep

LESSON = load_lesson()


def test_depth_words() -> None:
    assert [depth_words(d) for d in ([2], [2, 4], [2, 4, 8])] == [
        "depth 2",
        "depths 2 and 4",
        "depths 2, 4 and 8",
    ]


def test_seed_words() -> None:
    assert [seed_words(s) for s in ([0], [0, 1], [0, 1, 2])] == [
        "seed 0",
        "seeds 0 and 1",
        "seeds 0, 1 and 2",
    ]


@pytest.mark.parametrize(
    ("locale", "depths", "seeds"),
    [
        (
            "de",
            ["Tiefe 2", "Tiefen 2 und 4", "Tiefen 2, 4 und 8"],
            ["Seed 0", "Seeds 0 und 1", "Seeds 0, 1 und 2"],
        ),
        (
            "ar",
            ["العمق 2", "العمقين 2 و4", "الأعماق 2، 4 و8"],
            ["البذرة 0", "البذرتين 0 و1", "البذور 0، 1 و2"],
        ),
    ],
)
def test_depth_and_seed_words_in_the_languages_plural_forms(
    locale: str, depths: list[str], seeds: list[str]
) -> None:
    with activated(locale):
        assert [depth_words(d) for d in ([2], [2, 4], [2, 4, 8])] == depths
        assert [seed_words(s) for s in ([0], [0, 1], [0, 1, 2])] == seeds


def test_the_sentences_of_a_sweep_in_german_and_arabic() -> None:
    with activated("de"):
        german = sweep_sentences(sample_sweep(FLIP_AT_8), localized(LESSON))
    assert german[0] == (
        "Mit GPT-2-Initialisierung bringt es bei Tiefen 2 und 4 mehr, Layer-Norm allein "
        "zurückzugeben."
    )
    assert german[-1] == (
        "In Tiefe 16 hat der Sweep nur Seed 0 trainiert, um in seinem Zeitbudget zu bleiben."
    )
    with activated("ar"):
        arabic = sweep_sentences(sample_sweep(FLIP_AT_8), localized(LESSON))
    assert arabic[0] == "مع تهيئة GPT-2، إعادة تسوية الطبقة وحدها تستعيد أكثر عند العمقين 2 و4."
    assert arabic[-1] == "عند العمق 16 درّب المسح البذرة 0 فقط، ليبقى ضمن ميزانيته الزمنية."


def test_the_sentences_of_a_sweep_that_flips_between_depth_4_and_8() -> None:
    assert sweep_sentences(sample_sweep(FLIP_AT_8), LESSON) == [
        "With GPT-2 initialisation, putting back layer norm alone recovers more at depths 2 and 4.",
        "With GPT-2 initialisation, putting back the residual connections alone recovers more "
        "at depths 8 and 16.",
        "With GPT-2 initialisation, the answer changes between depth 4 and depth 8.",
        "With PyTorch's default initialisation, putting back the residual connections alone "
        "recovers more at depths 2, 4, 8 and 16.",
        "With PyTorch's default initialisation, the answer is the same at every depth recorded.",
        "The initialisation changes the answer at depths 2 and 4.",
        "At depth 16 the sweep trained seed 0 only, to keep within its time budget.",
    ]


def test_a_sweep_that_flips_elsewhere_moves_the_sentences() -> None:
    sentences = sweep_sentences(sample_sweep(FLIP_AT_4), LESSON)
    assert sentences[:3] == [
        "With GPT-2 initialisation, putting back layer norm alone recovers more at depth 2.",
        "With GPT-2 initialisation, putting back the residual connections alone recovers more "
        "at depths 4, 8 and 16.",
        "With GPT-2 initialisation, the answer changes between depth 2 and depth 4.",
    ]
    assert "The initialisation changes the answer at depth 2." in sentences


def test_ties_disagreeing_seeds_and_no_trimming() -> None:
    finals = {
        key: {**rows, "layernorm_only": rows["residual_only"]} for key, rows in FLIP_AT_8.items()
    }
    finals[(8, "gpt2")] = {**finals[(8, "gpt2")], "residual_only": 0.5, "layernorm_only": 0.5}
    plan = default_plan(depths=(4, 8), seeds=(0, 1), trim_depth=None)
    tied = sweep_sentences(sample_sweep(finals, plan=plan), LESSON)
    assert tied[0] == (
        "With GPT-2 initialisation, layer norm alone and the residual connections alone "
        "recover the same at depths 4 and 8, a tie."
    )
    assert not any("the sweep trained" in sentence for sentence in tied)

    def residual_up_then_down(seed: int, key: str) -> float:
        return (0.1 if seed == 0 else -0.1) if key == "residual_only" else 0.0

    mixed = sweep_sentences(
        sample_sweep(finals, plan=plan, seed_noise=residual_up_then_down), LESSON
    )
    assert mixed[:2] == [
        "With GPT-2 initialisation, the seeds disagree about which recovers more at depths 4 "
        "and 8.",
        "With GPT-2 initialisation, the answer is the same at every depth recorded.",
    ]
    assert CHANCE < 0.1


def test_two_seeds_kept_at_the_trimmed_depth_are_named_as_two() -> None:
    plan = default_plan(depths=(4, 8), seeds=(0, 1, 2), trim_depth=8, seeds_from_trim_depth=2)
    sentences = sweep_sentences(sample_sweep(FLIP_AT_8, plan=plan), LESSON)
    assert sentences[-1] == (
        "At depth 8 the sweep trained seeds 0 and 1 only, to keep within its time budget."
    )


def test_the_compare_line_when_the_prediction_holds_at_other_depths() -> None:
    sweep = sample_sweep(FLIP_AT_8)
    line = compare_line(sweep, LESSON, "layer_norm", depth=8, init="gpt2", agrees=False)
    assert line == (
        "At other depths your prediction, layer norm, is what happens: with GPT-2 "
        "initialisation, at depths 2 and 4."
    )
    moved = compare_line(
        sample_sweep(FLIP_AT_4), LESSON, "layer_norm", depth=8, init="gpt2", agrees=False
    )
    assert moved is not None and moved.endswith("at depth 2.")
    assert compare_line(sweep, LESSON, "residual", depth=8, init="gpt2", agrees=True) is None
    assert compare_line(sweep, LESSON, "layer_norm", depth=8, init="pytorch", agrees=False) is None
    assert compare_line(sweep, LESSON, None, depth=8, init="gpt2", agrees=False) is None
