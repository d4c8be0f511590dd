"""pyproject.toml's package-data names only files that exist (each pattern matches some file),
and no bytecode: the tests write __pycache__ beside the sources (the Makefile lets them)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_package_data_pattern_matches_a_file() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    package_data: dict[str, list[str]] = project["tool"]["setuptools"]["package-data"]
    unmatched = [
        f"{package}: {pattern}"
        for package, patterns in package_data.items()
        for pattern in patterns
        if not any(
            path.is_file() for path in (REPO / "src" / package.replace(".", "/")).glob(pattern)
        )
    ]
    assert unmatched == []


def test_no_package_data_pattern_takes_bytecode() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    package_data: dict[str, list[str]] = project["tool"]["setuptools"]["package-data"]
    folder = REPO / "src" / "normdive" / "store" / "migrations" / "versions" / "__pycache__"
    folder.mkdir(exist_ok=True)
    probe = folder / "probe.cpython-311.pyc"  # as Python writes one, whether or not it has yet
    probe.touch()
    try:
        taken = [
            str(path.relative_to(REPO))
            for package, patterns in package_data.items()
            for pattern in patterns
            for path in (REPO / "src" / package.replace(".", "/")).glob(pattern)
            if "__pycache__" in path.parts or path.suffix == ".pyc"
        ]
    finally:
        probe.unlink()
    assert taken == []
