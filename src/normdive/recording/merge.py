"""Joining the shards of one plan (`record-runs --shard I/N`) into the whole file, and whole lab
grids that differ only in depths into one grid (`normdive merge-recordings`; docs/recording.md,
"Beyond one machine: shards and merging")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from normdive.recording.reader import NOUNS, validation_summary
from normdive.recording.runs import (
    LabOffered,
    LabPlan,
    PlanT,
    Runs,
    run_label,
    runs_file,
    settings_point,
)


class MergeProblem(Exception):
    """Why shard files cannot be merged; the message names the files."""


def _check_parts(parts: Sequence[tuple[str, Runs]]) -> int:
    """The shard count, once the parts are the shards of one plan, each given once."""
    first_name, first = parts[0]
    whole = first.plan.model_copy(update={"shard": None})
    for name, part in parts:
        noun = NOUNS[part.plan.kind]
        if part.plan.shard is None:
            raise MergeProblem(f"{name} is a whole {noun}, not a shard: nothing to merge.")
        if part.plan.base != first.plan.base:
            raise MergeProblem(f"{name} and {first_name} were trained with different settings.")
        if part.plan.model_copy(update={"shard": None}) != whole:
            raise MergeProblem(f"{name} and {first_name} belong to different {noun} plans.")
        if part.lesson != first.lesson:
            raise MergeProblem(f"{name} and {first_name} belong to different lessons.")
    counts = {part.plan.shard.count for _, part in parts if part.plan.shard is not None}
    if len(counts) != 1:
        raise MergeProblem(
            "The parts were cut into different numbers of shards: "
            + ", ".join(
                f"{name} is 1 of {part.plan.shard.count}"
                for name, part in parts
                if part.plan.shard is not None
            )
        )
    count = counts.pop()
    indices: dict[int, str] = {}
    for name, part in parts:
        assert part.plan.shard is not None  # checked above
        index = part.plan.shard.index
        if index in indices:
            raise MergeProblem(
                f"Shard {index} of {count} is given twice: {indices[index]} and {name}."
            )
        indices[index] = name
    gaps = [index for index in range(1, count + 1) if index not in indices]
    if gaps:
        raise MergeProblem(
            f"Shard(s) {', '.join(map(str, gaps))} of {count} are missing; give all {count}."
        )
    return count


def _lab_grids_joined(parts: Sequence[tuple[str, Runs]]) -> Runs:
    """Lab grids differing in depths only, as one grid: each depth keeps its eps (depth_eps)."""
    first_name, first = parts[0]
    plans = [part.plan_as(LabPlan) for _, part in parts]
    held: dict[int, str] = {}
    for (name, part), plan in zip(parts, plans, strict=True):
        if plan.base != first.plan.base or plan.first != first.plan.first:
            raise MergeProblem(f"{name} and {first_name} were trained with different settings.")
        if part.lesson != first.lesson:
            raise MergeProblem(f"{name} and {first_name} belong to different lessons.")
        if (plan.inits, plan.seeds) != (plans[0].inits, plans[0].seeds):
            raise MergeProblem(
                f"{name} and {first_name} offer different inits or seeds; only their depths "
                "may differ."
            )
        for depth in plan.depths:
            if depth in held:
                raise MergeProblem(f"Depth {depth} is in both {held[depth]} and {name}.")
            held[depth] = name
    eps = sorted({value for plan in plans for value in plan.eps})
    depth_eps = {
        depth: plan.eps_at(depth)
        for plan in plans
        for depth in plan.depths
        if sorted(plan.eps_at(depth)) != eps
    }
    offered = LabOffered(
        depths=sorted(held),
        eps=eps,
        inits=plans[0].inits,
        seeds=plans[0].seeds,
        depth_eps=depth_eps,
    )
    said = list(dict.fromkeys(plan.trimmed for plan in plans if plan.trimmed))
    narrow = offered.depth_eps_trimmed()
    joined = LabPlan(
        kind="lab_grid",
        base=first.plan.base,
        first=first.plan.first,
        trimmed=" ".join(said + ([narrow] if narrow else [])) or None,
        **offered.model_dump(),
    )
    return _whole(first, joined, parts, "The joined lab grid")


def merge_runs(parts: Sequence[tuple[str, Runs]]) -> Runs:
    """The (name, file) parts joined; MergeProblem when they are neither the N shards of one
    plan nor lab grids differing in depths, or when a run is in two of them."""
    if not parts:
        raise MergeProblem("Give the shard files to merge.")
    if len(parts) > 1 and all(
        part.plan.kind == "lab_grid" and part.plan.shard is None for _, part in parts
    ):
        return _lab_grids_joined(parts)
    _check_parts(parts)
    seen: dict[tuple[Any, ...], str] = {}
    for name, part in parts:
        for run in part.runs:
            point = settings_point(run.config)
            if point in seen:
                raise MergeProblem(f"{run_label(run.config)} is in both {seen[point]} and {name}.")
            seen[point] = name
    ordered = sorted(parts, key=lambda item: item[1].plan.shard.index if item[1].plan.shard else 0)
    first = parts[0][1]
    plan = first.plan.model_copy(update={"shard": None})
    return _whole(first, plan, ordered, f"The merged {NOUNS[plan.kind]}")


def _whole(first: Runs, plan: PlanT, parts: Sequence[tuple[str, Runs]], what: str) -> Runs:
    """Every part's runs in plan order and provenance in part order; MergeProblem if not whole."""
    try:
        return runs_file(
            first.lesson,
            plan,
            [source for _, part in parts for source in part.provenance],
            plan.file_order(run for _, part in parts for run in part.runs),
        )
    except ValidationError as error:
        raise MergeProblem(f"{what} is not whole: {validation_summary(error)}") from None
