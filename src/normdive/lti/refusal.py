"""Why an LTI step was refused: a status, a code for the log, and a message that tells the
platform's administrator what is wrong and what to check."""

from __future__ import annotations


class Refusal(Exception):
    """An LTI request the tool will not act on. Raised before anything is stored."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        relaunch_query: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        # The login's parameters, when starting it again in a window of its own may help.
        self.relaunch_query = relaunch_query
        # Whole seconds until the same request may succeed (a 429's Retry-After).
        self.retry_after_s = retry_after_s
