"""Altering a signed value so that its signature no longer verifies.

A base64 signature's last character carries padding bits that decoding
drops, so swapping that character can leave the signature valid (about one
time in sixteen). The first character after the last "." carries six bits
of the signature, so changing it always breaks the signature.
"""


def altered_signature(value: str) -> str:
    """``value`` with the first character of its signature (after the last ".") changed."""
    at = value.rindex(".") + 1
    replacement = "A" if value[at] != "A" else "B"
    return value[:at] + replacement + value[at + 1 :]
