"""Clients that are slow or leave: a request head that does not arrive in time closes the
connection (web.infrastructure.serving), a head over the limit is refused (h11 while it arrives,
then web.security.limits.HeadLimit), a body that does not arrive in time is a 408
(web.security.limits.BodyLimit), an answer sent before the body has all arrived closes the
connection (web.security.limits.BodyLimit), and a client that leaves mid-body is one INFO line in
the log, not an ERROR with a traceback. A real uvicorn server on 127.0.0.1 and raw sockets; short
deadlines, so the tests wait little, and nothing here measures time: each waits for the server to
act, with a generous bound."""

from __future__ import annotations

import contextlib
import html
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import SettingsFactory
from live_server import LiveServer
from normdive.web.app import create_app
from normdive.web.infrastructure.serving import (
    KEEP_ALIVE_TIMEOUT_S,
    NoDelayH11Protocol,
    connection_options,
)
from normdive.web.security.limits import HEAD_TOO_LARGE, MAX_HEAD_BYTES, TWO_LENGTHS

# Deadlines short enough to wait for in a test.
SHORT_S = 0.5
# How long a test waits for the server to act before failing: far above SHORT_S.
PATIENCE_S = 15.0


class ShortHeadDeadline(NoDelayH11Protocol):
    header_timeout_s = SHORT_S


@contextlib.contextmanager
def served(make_settings: SettingsFactory, tmp_path: Path) -> Iterator[int]:
    """The app served by uvicorn with the protocol `normdive serve` uses; yields the port."""
    app = create_app(make_settings(body_timeout_s=SHORT_S))
    # log_config=None: uvicorn's loggers propagate to the root, where caplog sees them.
    with LiveServer(
        app,
        **{**connection_options(), "http": ShortHeadDeadline},
        log_config=None,
        log_level="info",
    ) as server:
        yield server.port


def connect(port: int) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", port))
    connection.settimeout(PATIENCE_S)
    return connection


def read_until_closed(connection: socket.socket) -> bytes:
    """Everything the server sends until it closes; socket.timeout if it never does."""
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    return received


def test_a_request_head_that_does_not_arrive_in_time_closes_the_connection(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    with served(make_settings, tmp_path) as port, connect(port) as connection:
        connection.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        assert read_until_closed(connection) == b""  # closed, without an answer


def test_a_slow_head_after_a_kept_alive_answer_is_closed_too(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    with served(make_settings, tmp_path) as port, connect(port) as connection:
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        # The head and the JSON body may come apart; an early close ends the loop too.
        while not answer.endswith(b"}") and (chunk := connection.recv(65536)):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200")
        connection.sendall(b"GET / HTTP/1.1\r\nHost: 1")
        assert read_until_closed(connection) == b""


def test_pipelined_requests_are_all_answered_then_an_idle_connection_is_closed(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    with served(make_settings, tmp_path) as port, connect(port) as connection:
        head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        connection.sendall(head * 3)
        answers = read_until_closed(connection)  # closed once idle, by a deadline
    assert answers.count(b"HTTP/1.1 200") == 3


def test_a_request_head_larger_than_the_ceiling_is_a_400(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    with served(make_settings, tmp_path) as port, connect(port) as connection:
        filler = b"X-Filler: " + b"a" * 1000 + b"\r\n"
        # In one write, so the server has read all of it when it answers and closes: bytes
        # still arriving after its close would reset the connection before the answer is read.
        head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + filler * (
            MAX_HEAD_BYTES // len(filler) + 2
        )
        connection.sendall(head)
        answer = read_until_closed(connection)
    assert answer.startswith(b"HTTP/1.1 400")


def head_of(size: int) -> bytes:
    """A GET /healthz whose head (request line, fields, blank line) is `size` bytes."""
    start = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    end = b"\r\n\r\n"
    filler = b"X-Filler: " + b"a" * (size - len(start) - len(b"X-Filler: ") - len(end))
    head = start + filler + end
    assert len(head) == size
    return head


# In pieces, as a slow network delivers it (h11 buffers it whole), or in one write.
PIECES = [1000, MAX_HEAD_BYTES]


@pytest.mark.parametrize("piece", PIECES)
def test_a_head_at_the_ceiling_is_answered(
    make_settings: SettingsFactory, tmp_path: Path, piece: int
) -> None:
    with served(make_settings, tmp_path) as port, connect(port) as connection:
        head = head_of(MAX_HEAD_BYTES)
        for offset in range(0, len(head), piece):
            connection.sendall(head[offset : offset + piece])
        answer = read_until_closed(connection)
    assert answer.startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("piece", PIECES)
def test_a_whole_head_one_byte_over_the_ceiling_is_a_readable_431(
    make_settings: SettingsFactory, tmp_path: Path, piece: int
) -> None:
    # Whole: its last piece completes it, so h11 (which bounds only an incomplete head) lets
    # it through, and the app measures it.
    with served(make_settings, tmp_path) as port, connect(port) as connection:
        head = head_of(MAX_HEAD_BYTES + 1).replace(b"Connection: close", b"Accept: text/html")
        for offset in range(0, len(head), piece):
            connection.sendall(head[offset : offset + piece])
        connection.settimeout(KEEP_ALIVE_TIMEOUT_S / 2)  # closed at once, not kept alive
        answer = read_until_closed(connection)
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert b"\r\nconnection: close\r\n" in answer.lower()
    assert b"content-type: text/html" in answer.lower()
    assert HEAD_TOO_LARGE.format(kib=MAX_HEAD_BYTES // 1024) in html.unescape(answer.decode())


@pytest.mark.parametrize(("method", "status"), [(b"GET", b"200"), (b"POST", b"405")])
def test_an_answer_sent_before_the_body_arrived_closes_the_connection(
    make_settings: SettingsFactory, tmp_path: Path, method: bytes, status: bytes
) -> None:
    """/healthz reads no body: it answers at once, then closes instead of waiting for a body
    that a client could send a byte a second, with no deadline since nothing reads it."""
    with served(make_settings, tmp_path) as port, connect(port) as connection:
        connection.sendall(
            method + b" /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 60000\r\n\r\nx"
        )
        connection.settimeout(KEEP_ALIVE_TIMEOUT_S / 2)  # well before the idle timeout
        answer = read_until_closed(connection)
    assert answer.startswith(b"HTTP/1.1 " + status)
    assert answer.lower().count(b"\r\nconnection: close\r\n") == 1


def test_an_answer_after_the_whole_body_keeps_the_connection(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    with served(make_settings, tmp_path) as port, connect(port) as connection:
        request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
        connection.sendall(request * 2)  # pipelined: both answered on one connection
        answers = read_until_closed(connection)  # closed once idle, by a deadline
    assert answers.count(b"HTTP/1.1 200") == 2
    assert b"connection: close" not in answers.lower()


def test_a_body_that_does_not_arrive_in_time_is_a_408(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    with served(make_settings, tmp_path) as port, connect(port) as connection:
        connection.sendall(
            b"POST /takeaway HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
            b"text=slow"
        )
        # The rest of the body is still owed on this connection: the server closes it at once
        # instead of keeping it alive.
        connection.settimeout(KEEP_ALIVE_TIMEOUT_S / 2)
        answer = read_until_closed(connection)
    assert answer.startswith(b"HTTP/1.1 408")
    assert b"\r\nconnection: close\r\n" in answer.lower()
    assert b"took longer than 0.5 seconds" in answer


def test_a_client_leaving_mid_body_is_one_info_line(
    make_settings: SettingsFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with served(make_settings, tmp_path) as port:
        with connect(port) as connection:
            connection.sendall(
                b"POST /takeaway HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
                b"text=half"
            )
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline and not any(
            "client left" in record.getMessage() for record in caplog.records
        ):
            time.sleep(0.05)
    left = [record for record in caplog.records if "client left" in record.getMessage()]
    assert len(left) == 1
    assert left[0].levelno == logging.INFO and left[0].exc_info is None
    assert "POST /takeaway" in left[0].getMessage()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_a_body_length_given_two_ways_is_refused_and_the_connection_closed(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    # Read as chunked by this server, it could be read by its Content-Length by a proxy in
    # front: the request pipelined after it would then be smuggled past the proxy.
    chunk = b"text=hi"
    request = (
        b"POST /takeaway HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
        + f"{len(chunk):x}".encode()
        + b"\r\n"
        + chunk
        + b"\r\n0\r\n\r\n"
    )
    pipelined = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with served(make_settings, tmp_path) as port, connect(port) as connection:
        connection.sendall(request + pipelined)
        answer = read_until_closed(connection)
    assert answer.startswith(b"HTTP/1.1 400")
    assert b"connection: close" in answer.lower()
    assert TWO_LENGTHS.split("'")[0].encode() in answer  # the page escapes the apostrophe
    assert answer.count(b"HTTP/1.1") == 1  # the pipelined request was never read


def test_head_is_answered_without_a_body_and_the_connection_goes_on(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    # A load balancer's health check: HEAD, then the next request on the same connection.
    head = b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    get = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    with served(make_settings, tmp_path) as port, connect(port) as connection:
        connection.sendall(head + get)
        answers = read_until_closed(connection)
    first, _, rest = answers.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 200") and b"content-length: " in first.lower()
    assert rest.startswith(b"HTTP/1.1 200")  # no body between the two answers
    assert rest.endswith(b"}")
