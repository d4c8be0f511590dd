"""How a count reads in a sentence that a person sees: "1 second", "3 seconds"."""

from __future__ import annotations


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """`count` and its noun, singular for exactly one: counted(1, "minute") is "1 minute"."""
    noun = singular if count == 1 else (plural or singular + "s")
    return f"{count} {noun}"
