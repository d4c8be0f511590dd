"""Commands of `normdive` owned by normdive.training (registered on import by normdive.cli).

torch is imported inside the command only, so `normdive serve` and `--help` never load it.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from pydantic import ValidationError

from normdive.cli import app, db_app, prerequisite_app  # noqa: F401
from normdive.config import DEFAULT_RECORDING_PATH
from normdive.recording.format import DEFAULT_SEEDS, ROW_KEYS, RowKey, RunConfig

EXIT_INTERRUPTED = 130  # what a shell reports for a command ended by Ctrl-C


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a comma-separated list of seeds") from None
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise typer.BadParameter(f"{text!r}: give distinct seeds >= 0, e.g. 0,1,2")
    return seeds


def parse_rows(text: str) -> list[RowKey]:
    wanted = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [w for w in wanted if w not in ROW_KEYS]
    if not wanted or unknown or len(set(wanted)) != len(wanted):
        raise typer.BadParameter(f"{text!r}: give distinct row keys from {', '.join(ROW_KEYS)}")
    return [key for key in ROW_KEYS if key in wanted]  # the page's order


def _command_line() -> str:
    """The command as typed, when this process is the `normdive` script."""
    if Path(sys.argv[0]).name == "normdive":
        return shlex.join(["normdive", *sys.argv[1:]])
    return shlex.join(["normdive", "record-runs", *sys.argv[1:]])


def _interrupt_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # a polite stop from `kill` ends as cleanly as Ctrl-C


@app.command("record-runs")
def record_runs(
    depth: Annotated[int | None, typer.Option(help="Blocks in the stack [default: 8].")] = None,
    copy_length: Annotated[int | None, typer.Option(help="Symbols to copy [default: 16].")] = None,
    steps: Annotated[int | None, typer.Option(help="Updates per row [default: 600].")] = None,
    batch_size: Annotated[
        int | None, typer.Option(help="Sequences per update [default: 64].")
    ] = None,
    d_model: Annotated[int | None, typer.Option(help="Model width [default: 64].")] = None,
    heads: Annotated[int | None, typer.Option(help="Attention heads [default: 4].")] = None,
    init: Annotated[
        str | None, typer.Option(help="Initialisation: gpt2 or pytorch [default: gpt2].")
    ] = None,
    eval_every: Annotated[
        int | None, typer.Option(help="Held-out evaluation every k updates [default: 20].")
    ] = None,
    heldout_size: Annotated[
        int | None, typer.Option(help="Held-out sequences [default: 256].")
    ] = None,
    seeds: Annotated[
        str,
        typer.Option(help="Comma-separated seeds; the first is the one the page plays."),
    ] = ",".join(map(str, DEFAULT_SEEDS)),
    rows: Annotated[str, typer.Option(help="Comma-separated rows to train.")] = ",".join(ROW_KEYS),
    device: Annotated[
        str, typer.Option(help="auto (CUDA when there is one), cpu or cuda.")
    ] = "auto",
    jobs: Annotated[
        int | None,
        typer.Option(help="Rows trained at once on the CPU [default: the CPU count]."),
    ] = None,
    out: Annotated[Path, typer.Option(help="Where the recording goes.")] = DEFAULT_RECORDING_PATH,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Discard finished rows of an interrupted run.")
    ] = False,
) -> None:
    """Train the ablation rows and write the recording the page replays.

    Every row is the same stack and budget with layer norm and residuals switched on or off.
    Finished rows are kept beside the output, so an interrupted run resumes when the same
    command runs again; the previous recording is replaced only once the new one is whole.
    """
    seed_list = parse_seeds(seeds)
    row_list = parse_rows(rows)
    if device not in ("auto", "cpu", "cuda"):
        raise typer.BadParameter(f"{device!r}: choose auto, cpu or cuda", param_hint="--device")
    if jobs is not None and jobs < 1:
        raise typer.BadParameter("give at least 1", param_hint="--jobs")
    chosen = {
        "depth": depth,
        "copy_length": copy_length,
        "steps": steps,
        "batch_size": batch_size,
        "d_model": d_model,
        "n_heads": heads,
        "init": init,
        "eval_every": eval_every,
        "heldout_size": heldout_size,
    }
    try:
        config = RunConfig.model_validate({k: v for k, v in chosen.items() if v is not None})
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in error.errors()
        )
        typer.echo(f"Invalid settings: {problems}", err=True)
        raise typer.Exit(2) from None

    # torch only from here on (the rest of normdive never needs it).
    import torch
    from rich.console import Console

    from normdive.recording.summary import ranking_note, summary_table
    from normdive.training.runner import RecordError, partial_dir, plan, record

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        typer.echo("--device cuda: this torch sees no CUDA device (use cpu or auto).", err=True)
        raise typer.Exit(2)
    tasks = plan(row_list, seed_list)
    job_count = min(jobs or os.cpu_count() or 1, len(tasks))
    console = Console(soft_wrap=True)  # paths and table lines stay whole in logs
    console.print(
        f"Recording {len(tasks)} row(s) on {device}"
        + (f" with {job_count} single-thread process(es)" if device == "cpu" else "")
        + f": depth {config.depth}, copy length {config.copy_length}, {config.steps} steps, "
        f"init {config.init}, seeds {', '.join(map(str, seed_list))}."
    )
    previous = signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    started = time.perf_counter()
    try:
        recording = record(
            config,
            tasks,
            seeds=seed_list,
            device=device,
            jobs=job_count,
            out=out,
            command=_command_line(),
            fresh=fresh,
            console=console,
        )
    except KeyboardInterrupt:
        console.print(
            f"Interrupted. Finished rows are kept in {partial_dir(out)}; run the same command "
            f"again to resume. {out} was not touched."
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except RecordError as error:
        console.print(f"record-runs failed: {error}")
        console.print(f"Finished rows are kept in {partial_dir(out)}; {out} was not touched.")
        raise typer.Exit(1) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    wall = time.perf_counter() - started
    size = out.stat().st_size
    console.print(f"Wrote {out} ({size / 1024:.1f} KiB) in {wall:.1f} s ({wall / 60:.1f} min).")
    for line in summary_table(recording):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(ranking_note(recording), markup=False, highlight=False, soft_wrap=True)
