"""The adapter from the recording's reader to RecordingFacts, on recordings built here and
written to real files."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from normdive.lesson.content import load_lesson
from normdive.progress.events import Event, EventKind
from normdive.progress.facts import RecordingFacts, recording_facts, recording_facts_at
from normdive.progress.state import derive
from normdive.recording.format import ROW_KEYS, ROW_SWITCHES, RunConfig
from normdive.recording.reader import RecordingProblem
from normdive.recording.runs import Runs, settings_at
from sample_recordings import sample_recording

DEPTH = 2
CONFIG = RunConfig(depth=DEPTH, copy_length=8, vocab_size=10, steps=40, init="pytorch")


def row(key: str, seed: int, accuracy: float | str, loss: float | str) -> dict[str, Any]:
    layernorm, residual = dict(ROW_SWITCHES)[key]
    point = {
        "step": 40,
        "train_loss": 1.0,
        "grad_norm": 1.0,
        "heldout_loss": loss,
        "heldout_accuracy": accuracy,
        "heldout_exact_match": 0.0,
    }
    return {
        "config": settings_at(
            CONFIG, layernorm=layernorm, residual=residual, seed=seed
        ).model_dump(),
        "curve": [point],
        "block_grad_norms": [{"step": 1, "norms": [0.1] * DEPTH}],
        "final": {
            "step": 40,
            "heldout_loss": loss,
            "heldout_accuracy": accuracy,
            "heldout_exact_match": 1.0 if accuracy == 1.0 else 0.0,
            "first_step_at_full_accuracy": 40 if accuracy == 1.0 else None,
        },
        "wall_s": 1.0,
    }


ACCURACY = {"both": 1.0, "residual_only": 0.25, "layernorm_only": 0.0625, "neither": 0.06}
LOSS = {"both": 0.01, "residual_only": 1.8, "layernorm_only": "nan", "neither": 2.8}


def recording_data(
    accuracy: dict[str, float | str] | None = None,
    rows: tuple[str, ...] = ROW_KEYS,
    page_seed: int = 1,
) -> dict[str, Any]:
    accuracy = {**ACCURACY, **(accuracy or {})}
    return {
        "format_version": 2,
        "kind": "runs",
        "lesson": "the-transformer-block",
        "provenance": [
            {
                "script": "normdive record-runs",
                "normdive_version": "0.1.0",
                "git_commit": None,
                "git_dirty": None,
                "command": "normdive record-runs --depth 2",
                "python_version": "3.11",
                "torch_version": "2.13.0",
                "platform": "linux",
                "device": "cpu",
                "jobs": 1,
                "threads_per_job": 1,
                "created_at": "2025-01-01T00:00:00Z",
                "wall_s": 4.0,
                "rows_resumed": 0,
            }
        ],
        "plan": {
            "kind": "ablation",
            "base": CONFIG.model_dump(),
            "first": {"seed": page_seed},
            "rows": list(ROW_KEYS),
            "seeds": [0, 1],
        },
        # Seed 0 holds a different ranking: the page seed's rows are the ones that count.
        "runs": [row(k, 0, 0.0, 3.0) for k in ROW_KEYS]
        + [row(k, page_seed, accuracy[k], LOSS[k]) for k in rows],
    }


def test_a_recording_becomes_its_page_seeds_facts() -> None:
    facts = recording_facts(Runs.model_validate(recording_data()))
    assert facts.problem is None
    assert facts.row_keys == ROW_KEYS
    assert facts.best_row == "both"
    assert (facts.vocab_size, facts.depth, facts.copy_length, facts.seed, facts.steps) == (
        10,
        DEPTH,
        8,
        1,
        40,
    )
    assert facts.init == "pytorch" and facts.chance_level == 0.1
    residual = facts.row("residual_only")
    assert residual is not None
    assert (residual.accuracy, residual.loss, residual.step) == (0.25, 1.8, 40)
    assert residual.first_step_at_full_accuracy is None
    layer_norm = facts.row("layernorm_only")
    assert layer_norm is not None and math.isnan(layer_norm.loss)  # the file's "nan" marker
    both = facts.row("both")
    assert both is not None and (both.exact_match, both.first_step_at_full_accuracy) == (1.0, 40)


def test_the_best_row_is_the_readers_whichever_row_it_is() -> None:
    data = recording_data({"both": 0.5, "neither": 0.95})
    assert recording_facts(Runs.model_validate(data)).best_row == "neither"


def test_a_problem_becomes_the_reason() -> None:
    problem = RecordingProblem("missing", "The recording x.json does not exist.")
    assert recording_facts(problem) == RecordingFacts(
        problem="The recording x.json does not exist."
    )


def test_a_recording_missing_a_row_at_the_page_seed_is_a_problem() -> None:
    data = recording_data(rows=("both", "residual_only", "neither"))
    facts = recording_facts(Runs.model_validate(data))
    assert facts.problem is not None and "layernorm_only" in facts.problem
    assert facts.row_keys == () and facts.best_row is None


def test_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "the-transformer-block.json"
    path.write_text(json.dumps(recording_data()), encoding="utf-8")
    facts = recording_facts_at(path)
    assert facts.problem is None and facts.best_row == "both" and len(facts.rows) == 4


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "does not exist"),
        ("{not json", "not valid JSON"),
        (json.dumps({"format_version": 99}), "format_version"),
        (json.dumps(recording_data(rows=())), "no ablation rows"),
    ],
)
def test_unusable_files_give_a_reason_and_never_raise(
    tmp_path: Path, content: str | None, words: str
) -> None:
    path = tmp_path / "the-transformer-block.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    facts = recording_facts_at(path)
    assert facts.problem is not None and words in facts.problem
    assert facts.row_keys == () and facts.best_row is None and facts.rows == ()


def test_the_recorders_sample_recording_through_derive_follows_its_best_row() -> None:
    # Level with "both" on accuracy, lower on loss: the reader's tie-break picks "neither".
    facts = recording_facts(sample_recording({"neither": (1.0, 0.001)}))
    assert facts.problem is None and facts.best_row == "neither"
    specs = [(EventKind.PREDICTION_COMMITTED, {"choice": "residual"})]
    specs += [(EventKind.ROW_PREDICTED, {"row": k, "outcome": "learns"}) for k in ROW_KEYS]
    specs += [(EventKind.ROW_PLAYED, {"row": "both"})]
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    history = [Event(i, "a" * 32, k, p, moment) for i, (k, p) in enumerate(specs, 1)]
    lesson = load_lesson()
    assert not derive(
        history, lesson, recording=facts, dev_prerequisite_done=True
    ).gate.best_row_played
    history.append(Event(99, "a" * 32, EventKind.ROW_PLAYED, {"row": "neither"}, moment))
    assert derive(history, lesson, recording=facts, dev_prerequisite_done=True).gate.best_row_played
