"""One record built from another whose fields carry the same names.

A view or a value object is often filled from a database row, a parsed file's model or
another view field by field, and most of its fields are called as the source's attributes
are (a PendingLogin from its lti_states row, a RecordingFacts from the recording's config).
`like_named` names those fields once, as the keyword arguments the constructor takes, so that
what the constructor computes stands out beside them.

Below every layer: it imports nothing of normdive, and any layer may import it
(tests/test_architecture.py).
"""

from __future__ import annotations

from typing import Any


def like_named(source: object, *names: str) -> dict[str, Any]:
    """`{name: source.name}` for each of `names`, in their order: keyword arguments for a
    constructor whose parameters are named as `source`'s attributes. A name `source` lacks
    raises AttributeError, naming it."""
    return {name: getattr(source, name) for name in names}
