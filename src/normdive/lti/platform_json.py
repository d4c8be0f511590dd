"""JSON a platform sends, read so that its shape cannot fail a request the way its content can:
a parse failure, a RecursionError (`[[[[...` a few thousand deep), an over-long integer and a
value nested deeper than MAX_JSON_DEPTH are one NotPlatformJson (a ValueError). The depth limit
also keeps a stored key set readable back deeper in the stack.
"""

from __future__ import annotations

import json
from typing import Any

# A key set nests three levels, a launch's claims or a configuration four or five.
MAX_JSON_DEPTH = 32


class NotPlatformJson(ValueError):
    """Not JSON, or nested deeper than MAX_JSON_DEPTH."""


def too_deep(value: object) -> bool:
    """Walked with a stack of its own, so any depth is measured without recursing."""
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def parsed(data: bytes | str) -> Any:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        # Malformed JSON, bytes not UTF-8, integers of more digits than Python converts.
        raise NotPlatformJson("not JSON") from None
    if too_deep(value):
        raise NotPlatformJson(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value
