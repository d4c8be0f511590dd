"""JSON a platform sends (its key set, its OpenID configuration and registration answer, an
id_token's claims, the host platform's prerequisite report), read so that its shape cannot
fail a request the way its content can.

Python's json parser recurses once per level of nesting, so `[[[[...` a few thousand deep
raises RecursionError, which is no ValueError; a number of more than 4,300 digits raises a
plain ValueError (Python's int conversion limit). Here they, every other parse failure, and a
value nested deeper than MAX_JSON_DEPTH are one NotPlatformJson (a ValueError), which each
caller turns into its readable refusal. The depth limit also keeps what is stored (a key set)
readable back: a value just under the parser's limit where it was fetched could exceed it
where it is read, deeper in the stack.
"""

from __future__ import annotations

import json
from typing import Any

# The deepest nesting accepted. A key set nests three levels ({"keys": [{...}]}), an LTI
# launch's claims and a platform's configuration four or five; this is far beyond either.
MAX_JSON_DEPTH = 32


class NotPlatformJson(ValueError):
    """Not JSON, or nested deeper than MAX_JSON_DEPTH."""


def too_deep(value: object) -> bool:
    """True when `value` (parsed JSON) nests objects and arrays deeper than MAX_JSON_DEPTH.
    Walked with a stack of its own, so any depth is measured without recursing."""
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
    """`data` parsed as JSON; NotPlatformJson when it is not JSON or nests too deep."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        # ValueError covers malformed JSON, bytes that are not UTF-8 and integers of more
        # digits than Python converts.
        raise NotPlatformJson("not JSON") from None
    if too_deep(value):
        raise NotPlatformJson(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value
