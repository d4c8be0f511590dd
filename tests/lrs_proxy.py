"""An HTTP server in front of a real LRS for the outbox's tests: it passes each POST of
statements on to the LRS and its answer back, unless the test told it otherwise. It can refuse
a batch that holds a statement a test names (a forged LRS's 400, with its reason), or hold the
LRS's answer back until the test lets it go (a sender killed while it waits for an answer)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A statement the forged LRS refuses, and why (what its 400 says).
Refusal = Callable[[dict[str, Any]], str | None]


@dataclass
class LrsProxy:
    upstream: str
    url: str = ""
    # Refuses a POST with 400 when it returns a reason for one of its statements.
    refuse: Refusal = lambda _statement: None
    # Set: the next POST's answer from the LRS is held until `release` is set.
    hold_next: bool = False
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    # Each POST's statement ids, in order, and the status answered.
    posts: list[tuple[list[str], int]] = field(default_factory=list)


@contextmanager
def lrs_proxy(upstream: str) -> Iterator[LrsProxy]:
    """A proxy in front of the LRS whose statements resource is `upstream`, on 127.0.0.1."""
    proxy = LrsProxy(upstream)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            statements = json.loads(body)
            ids = [statement.get("id", "") for statement in statements]
            reasons = [r for statement in statements if (r := proxy.refuse(statement))]
            if reasons:
                proxy.posts.append((ids, 400))
                self._answer(400, json.dumps({"error": reasons[0]}).encode())
                return
            request = urllib.request.Request(
                proxy.upstream,
                data=body,
                method="POST",
                headers={
                    name: self.headers[name]
                    for name in ("Authorization", "Content-Type", "X-Experience-API-Version")
                },
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    status, content = answer.status, answer.read()
            except urllib.error.HTTPError as error:
                status, content = error.code, error.read()
            proxy.posts.append((ids, status))
            if proxy.hold_next:
                proxy.hold_next = False
                proxy.held.set()
                proxy.release.wait(timeout=60)
            self._answer(status, content)

        def _answer(self, status: int, content: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)
            except OSError:
                pass  # the sender is gone

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}/xAPI/statements"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.release.set()
        server.shutdown()
        server.server_close()
