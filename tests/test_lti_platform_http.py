"""lti.platform_http: a platform's answer read as it arrives, given up past its limit. A real
HTTP server on 127.0.0.1 that answers as much as it is told to, in parts."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from lti_platform import serving
from normdive.lti.platform_http import AnswerTooLarge, read_body

PART = 4096


@pytest.fixture(scope="module")
def answering() -> Iterator[str]:
    """The base URL of a server whose /N answers N bytes, PART at a time."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            size = int(self.path.strip("/"))
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            try:
                for start in range(0, size, PART):
                    self.wfile.write(b"x" * min(PART, size - start))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the reader gave up, as it should past its limit

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with serving(server):
        yield f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize("size", [0, 1, PART, 10 * PART])
def test_an_answer_within_the_limit_is_read_whole(answering: str, size: int) -> None:
    with httpx.Client() as client, client.stream("GET", f"{answering}/{size}") as response:
        assert read_body(response, 10 * PART) == b"x" * size


def test_an_answer_past_the_limit_is_given_up_after_the_limit(answering: str) -> None:
    parts = 0

    def count() -> None:
        nonlocal parts
        parts += 1

    huge = 50 * 1024 * 1024
    with (
        httpx.Client() as client,
        client.stream("GET", f"{answering}/{huge}") as response,
        pytest.raises(AnswerTooLarge),
    ):
        read_body(response, 2 * PART, count)
    assert parts <= 2 * PART  # read in parts, and stopped near the limit, not at 50 MB


def test_each_part_may_stop_the_reading(answering: str) -> None:
    class Late(Exception):
        pass

    def deadline() -> None:
        raise Late

    with (
        httpx.Client() as client,
        client.stream("GET", f"{answering}/{PART}") as response,
        pytest.raises(Late),
    ):
        read_body(response, 10 * PART, deadline)
