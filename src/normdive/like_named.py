"""One record built from another whose fields carry the same names (a view from a row, a value
from a parsed model), those fields named once so that what a constructor computes stands out.
Below every layer: it imports nothing of normdive (tests/test_architecture.py)."""

from __future__ import annotations

from typing import Any


def like_named(source: object, *names: str) -> dict[str, Any]:
    """`{name: source.name}` for each of `names`, in order; AttributeError for a missing one."""
    return {name: getattr(source, name) for name in names}
