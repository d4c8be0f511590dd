"""progress.lab's sentence holding a learner's run to the recorded cell: agreement within the
lesson's tolerance at every step both evaluated, otherwise where the two are furthest apart,
a diverged run counted as the whole scale apart, and no cell said plainly."""

from __future__ import annotations

from typing import Any

from lesson_answers import LESSON
from normdive.progress.lab import Figures, LabChoice, LabRun, comparison

CHOICE = LabChoice(depth=2, layernorm=True, residual=True, eps=1e-5, init="gpt2", seed=0)


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
    assert said == LESSON.lab.agrees.format(points="0.1", live="100.0 %", recorded="100.0 %")


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
