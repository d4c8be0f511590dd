"""Provenance: what a course author needs to make the file again."""

from __future__ import annotations

import re
import sys

import torch

import normdive
from normdive.training.provenance import SCRIPT, cpu_name, git_state, provenance


def test_provenance_names_versions_device_and_command() -> None:
    made = provenance(
        command="normdive record-runs --depth 2",
        device="cpu",
        jobs=2,
        threads_per_job=1,
        wall_s=12.345,
        rows_resumed=1,
    )
    assert made.script == SCRIPT == "normdive record-runs"
    assert made.normdive_version == normdive.__version__
    assert made.torch_version == torch.__version__
    assert made.python_version == sys.version.split()[0]
    assert made.device.startswith("cpu: ") and len(made.device) > len("cpu: ")
    assert made.command == "normdive record-runs --depth 2"
    assert (made.jobs, made.threads_per_job, made.wall_s, made.rows_resumed) == (2, 1, 12.3, 1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", made.created_at)


def test_this_checkout_has_a_commit() -> None:
    commit, dirty = git_state()
    assert commit is not None and re.fullmatch(r"[0-9a-f]{40}", commit)
    assert dirty in (True, False)


def test_the_cpu_has_a_name() -> None:
    assert cpu_name().strip()
