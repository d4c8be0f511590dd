"""pyproject.toml's package-data names only files that exist: each pattern matches some file."""

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
