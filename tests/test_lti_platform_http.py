"""lti.platform_http: a platform's answer read as it arrives, given up past its limit, and all
of it within one deadline however its bytes are paced. Real HTTP servers on 127.0.0.1: one
that answers as much as it is told to, in parts; one that sends a byte at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from sqlalchemy import Engine

from lti_platform import register_platform, serving, trickling_server
from normdive.lti import platform_keys
from normdive.lti.platform_http import AnswerTooLarge, fetch_within, read_body
from normdive.lti.refusal import Refusal

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


# A platform's whole answer, status line to body, sent a byte every TRICKLE_S: each byte far
# inside any per-read timeout, all of them far past the deadline.
TRICKLE_S = 0.1
TRICKLED = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
DEADLINE_S = 1.0
# A bound on waiting for the test's own server, so that a broken reader fails the test rather
# than hangs it; nothing is asserted of how long anything took.
GUARD_S = 60.0


def test_fetch_within_cuts_an_answer_trickled_past_its_deadline() -> None:
    with trickling_server(TRICKLED, TRICKLE_S) as served:
        with pytest.raises(TimeoutError):
            fetch_within(DEADLINE_S, "GET", f"{served.base}/jwks", 10 * PART)
        assert served.wait_for(lambda s: s.sending == 0, GUARD_S)
        assert served.cut == 1  # given up on with the answer's headers still coming


def test_fetch_within_reads_an_answer_that_comes_in_time() -> None:
    with trickling_server(TRICKLED, 0.0) as served:
        answer = fetch_within(DEADLINE_S * 10, "GET", f"{served.base}/jwks", 10 * PART)
    assert (answer.status, answer.body) == (200, b"{}")


def test_fetch_within_works_where_an_event_loop_already_runs() -> None:
    # A browser driver's sync API leaves a running loop in the main thread; a test run (and
    # any caller inside async code) must still get the answer, not anyio's refusal to nest.
    async def inside_a_loop() -> tuple[int, bytes]:
        answer = fetch_within(DEADLINE_S * 10, "GET", f"{served.base}/jwks", 10 * PART)
        return answer.status, answer.body

    with trickling_server(TRICKLED, 0.0) as served, ThreadPoolExecutor(max_workers=1) as pool:
        # A thread of its own: this worker's main thread may hold a browser driver's loop.
        assert pool.submit(asyncio.run, inside_a_loop()).result() == (200, b"{}")


def test_a_key_set_trickled_past_the_deadline_is_refused_at_the_deadline(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # httpx's timeouts count each read apart: the status line and headers, a byte every
    # TRICKLE_S, never tripped them, and the key set fetch's own check ran only on the body.
    monkeypatch.setattr(platform_keys, "JWKS_FETCH_TIMEOUT_S", DEADLINE_S)
    with trickling_server(TRICKLED, TRICKLE_S) as served:
        registration = register_platform(engine, f"{served.base}/jwks")
        with pytest.raises(Refusal) as refused:
            platform_keys.signing_key(engine, registration, "any-kid")
        assert served.wait_for(lambda s: s.sending == 0, GUARD_S)
        assert served.cut == 1
    assert refused.value.code == "jwks_unreachable"
    assert f"it took over {DEADLINE_S:g} s" in refused.value.message
