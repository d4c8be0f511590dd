"""The recording in a few lines: the four rows at the page's seed, and the spread over seeds.

Printed by `record-runs` when it finishes and by `check-recording`, and pasted into
docs/recording.md. Markdown, so the same text reads in a terminal and in the docs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from normdive.recording.format import ROW_KEYS, as_float, recorded
from normdive.recording.reader import (
    RecordingProblem,
    best_row,
    parse_recording,
    ranking,
    require_ablation_rows,
)
from normdive.recording.runs import AblationPlan, Runs
from normdive.recording.sweep_reader import describe_sweep, parse_sweep


def _percent(value: float | str) -> str:
    number = as_float(value)
    return f"{100 * number:.1f} %" if math.isfinite(number) else str(value)


def _loss(value: float | str) -> str:
    number = as_float(value)
    return f"{number:.4f}" if math.isfinite(number) else str(value)


def summary_table(recording: Runs) -> list[str]:
    """A header, a rule and one line per row key present at the page seed (four normally),
    with each row's final accuracy at every recorded seed in the last column."""
    plan = recording.plan_as(AblationPlan)
    seed = plan.page_seed
    present = [key for key in ROW_KEYS if recording.row(key) is not None]
    best = best_row(recording) if present else None
    seeds = ", ".join(map(str, plan.seeds))
    lines = [
        f"| row (seed {seed}) | layer norm | residual | held-out accuracy | exact match "
        f"| held-out loss | first step at 100 % | accuracy at seeds {seeds} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in present:
        row = recording.row(key)
        assert row is not None  # present was filtered on it
        spread = []
        for other_seed in plan.seeds:
            other = recording.row(key, seed=other_seed)
            spread.append(_percent(other.final.heldout_accuracy) if other else "-")
        full = row.final.first_step_at_full_accuracy
        switches = row.config
        lines.append(
            f"| {key}{' (best)' if key == best else ''} | {'on' if switches.layernorm else 'off'} "
            f"| {'on' if switches.residual else 'off'} | {_percent(row.final.heldout_accuracy)} "
            f"| {_percent(recorded(row.final.heldout_exact_match))} "
            f"| {_loss(row.final.heldout_loss)} "
            f"| {full if full is not None else 'never'} | {' / '.join(spread)} |"
        )
    return lines


def ranking_note(recording: Runs) -> str:
    """Whether the seeds agree: on the best row, on which single component recovers more,
    and on the full order (rows at chance may swap places on noise alone)."""
    page = ranking(recording)
    if not page:
        return "No rows at the page's seed."
    seeds = recording.plan_as(AblationPlan).seeds
    notes = []
    for seed in seeds:
        order = ranking(recording, seed)
        if not order:
            continue
        singles = [key for key in order if key in ("residual_only", "layernorm_only")]
        notes.append(
            f"seed {seed}: {' > '.join(order)}"
            + (f" (single component recovering more: {singles[0]})" if len(singles) == 2 else "")
        )
    same = all(ranking(recording, s) in (page, []) for s in seeds)
    verdict = (
        "Every seed ranks the rows the same way." if same else "The ranking differs between seeds."
    )
    return verdict + " " + "; ".join(notes) + "."


def describe(recording: Runs, name: str) -> list[str]:
    """Where the recording came from, what it trained, and its rows: the lines
    `normdive check-recording` prints for a file that parses."""
    plan = recording.plan_as(AblationPlan)
    source = recording.provenance[0]
    config = plan.base
    lines = [
        f"{name}: ablation recording, lesson {recording.lesson!r}",
        f"made by: {source.command}",
        f"on {source.created_at} with {source.device}, torch {source.torch_version}, "
        f"normdive {source.normdive_version}, commit {source.git_commit or 'unknown'}; "
        f"wall time {source.wall_s:.0f} s",
        f"depth {config.depth}, copy length {config.copy_length}, init {config.init}, "
        f"{config.steps} steps at batch {config.batch_size}; seeds "
        f"{', '.join(map(str, plan.seeds))} (the page plays seed {plan.page_seed})",
    ]
    if recording.runs:
        lines += ["", *summary_table(recording), "", ranking_note(recording)]
    return lines


@dataclass(frozen=True)
class RecordingCheck:
    """What checking a recording file found: `lines` describe it (none when it does not
    parse), and `problem` is why the page cannot play it (None: it can)."""

    lines: list[str]
    problem: RecordingProblem | None


def check_recording_bytes(raw: bytes, name: str, *, sweep: bool) -> RecordingCheck:
    """Validate and describe a recording's bytes (a depth sweep's when `sweep`), as
    `normdive check-recording` reports it; the last line of a playable recording says which
    row is best. (recording.kinds recognises which kind a file is.)"""
    try:
        if sweep:
            found = parse_sweep(raw, name)
            return RecordingCheck(
                [*describe_sweep(found, name), f"OK: a valid sweep of {len(found.runs)} runs."],
                None,
            )
        recording = parse_recording(raw, name)
    except RecordingProblem as problem:
        return RecordingCheck([], problem)
    lines = describe(recording, name)
    try:
        require_ablation_rows(recording, name)
    except RecordingProblem as problem:
        return RecordingCheck(lines, problem)
    best = best_row(recording)
    seed = recording.plan_as(AblationPlan).page_seed
    lines.append(f"OK: the page can play it; best row at seed {seed}: {best}.")
    return RecordingCheck(lines, None)
