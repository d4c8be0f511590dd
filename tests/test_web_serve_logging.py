"""What `normdive serve` writes to its log (web.infrastructure.logging_setup): the access log
without the values of secret query parameters and with very long paths cut, and normdive's own INFO
and WARNING lines with a timestamp, level and logger name. One real server in a subprocess, its
stdout and stderr read from a file; the unit tests of the path rewriting need no server."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr

from helpers import SECRET_KEY, migrated_sqlite_url
from normdive.lti.submission_review import Review, grant_token, review_url
from normdive.web.infrastructure.instructor_access import Pool, instructor_link
from normdive.web.infrastructure.logging_setup import (
    CUT_MARKER,
    MAX_LOGGED_PATH_CHARS,
    REDACTED,
    SECRET_QUERY_PARAMETERS,
    loggable_path,
)
from ops_server import REQUEST_TIMEOUT_S, ServerProcess

# How long a test waits for a line to reach the log before failing.
PATIENCE_S = 15.0
# A line of normdive's own starts with its time: "2025-01-31 12:34:56,789 WARNING ...".
TIMESTAMP = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} "
# A path longer than the access log shows, well under the request head's limit.
LONG_PATH = "/" + "a" * 12_000


@pytest.mark.parametrize("name", SECRET_QUERY_PARAMETERS)
def test_each_secret_parameters_value_is_redacted(name: str) -> None:
    assert loggable_path(f"/x?eps=on&{name}=s3cret&row=1") == f"/x?eps=on&{name}={REDACTED}&row=1"


def test_an_encoded_name_is_redacted_as_starlette_would_read_it() -> None:
    assert loggable_path("/instructor?%61ccess=s3cret") == f"/instructor?%61ccess={REDACTED}"


def test_other_parameters_and_paths_are_kept() -> None:
    for path in ("/", "/?eps=on&row=1", "/?access", "/a=b", "/x?accessory=1&invited=2"):
        assert loggable_path(path) == path


def test_a_long_path_is_cut_with_a_count_of_what_was_cut() -> None:
    shown = loggable_path(LONG_PATH)
    cut = len(LONG_PATH) - MAX_LOGGED_PATH_CHARS
    assert shown == LONG_PATH[:MAX_LOGGED_PATH_CHARS] + CUT_MARKER.format(count=cut)


def test_a_secret_is_redacted_before_the_cut() -> None:
    path = "/instructor?" + "x=1&" * 200 + "access=" + "s" * 1000
    assert "s" * 10 not in loggable_path(path)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("serve-logging")
    with ServerProcess(migrated_sqlite_url(folder), folder) as process:
        yield process


def wait_for_log(server: ServerProcess, pattern: str) -> str:
    """The first line of the server's log matching `pattern`, once it has been written."""
    deadline = time.monotonic() + PATIENCE_S
    while True:
        text = server.log_path.read_text(errors="replace")
        match = re.search(pattern, text, re.MULTILINE)
        if match is not None:
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            return text[start : end if end >= 0 else len(text)]
        if time.monotonic() > deadline:
            raise AssertionError(f"no line matching {pattern!r} in: {server.log()}")
        time.sleep(0.05)


@pytest.mark.slow
def test_an_instructor_links_token_stays_out_of_the_access_log(server: ServerProcess) -> None:
    link = instructor_link(server.url, Pool(None), SecretStr(SECRET_KEY))
    token = link.rsplit("=", 1)[1]
    answer = httpx.get(link, timeout=REQUEST_TIMEOUT_S, follow_redirects=False)
    assert answer.status_code == 303  # a good link: the token logs in
    line = wait_for_log(server, r'"GET /instructor\?access=\S* HTTP/1.1" 303')
    assert f"/instructor?access={REDACTED} " in line
    assert token not in server.log_path.read_text(errors="replace")


@pytest.mark.slow
def test_a_registrations_invite_and_token_stay_out_and_its_refusal_is_a_formatted_warning(
    server: ServerProcess,
) -> None:
    query = (
        "invite=not-an-invite-0123&openid_configuration=https://lms.example"
        "&registration_token=tok-4567"
    )
    answer = httpx.get(f"{server.url}/lti/register?{query}", timeout=REQUEST_TIMEOUT_S)
    assert answer.status_code == 403
    line = wait_for_log(server, r'"GET /lti/register\?\S* HTTP/1.1" 403')
    assert (
        f"/lti/register?invite={REDACTED}&openid_configuration=https://lms.example"
        f"&registration_token={REDACTED} "
    ) in line
    log = server.log_path.read_text(errors="replace")
    assert "not-an-invite-0123" not in log and "tok-4567" not in log
    warning = "WARNING normdive.web.routes.lti: LTI registration refused (no_invite)"
    wait_for_log(server, TIMESTAMP + re.escape(warning))


@pytest.mark.slow
def test_a_long_path_is_cut_in_the_access_log(server: ServerProcess) -> None:
    answer = httpx.get(server.url + LONG_PATH, timeout=REQUEST_TIMEOUT_S)
    assert answer.status_code == 404
    cut = len(LONG_PATH) - MAX_LOGGED_PATH_CHARS
    line = wait_for_log(server, re.escape(CUT_MARKER.format(count=cut)))
    assert '"GET /aaaa' in line and line.endswith(" 404 Not Found")
    assert len(line) < MAX_LOGGED_PATH_CHARS + 100


@pytest.mark.slow
def test_normdives_info_lines_are_logged_with_time_level_and_logger(
    server: ServerProcess,
) -> None:
    # A client that leaves halfway through its body: one INFO line from the error handlers.
    with socket.create_connection(("127.0.0.1", server.port)) as connection:
        connection.sendall(
            b"POST /takeaway HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
            b"text=half"
        )
    info = (
        "INFO normdive.web.infrastructure.errors: "
        "client left before its request arrived whole: POST /takeaway"
    )
    wait_for_log(server, TIMESTAMP + re.escape(info))


@pytest.mark.slow
def test_a_review_grant_stays_out_of_the_access_log(server: ServerProcess) -> None:
    learner = "a" * 32
    review = Review(learner_id=learner, context_key=None, reviewer="r", label="Ada", own=False)
    token = grant_token(review, SecretStr(SECRET_KEY))
    answer = httpx.get(
        f"{server.url}{review_url(learner, token)}",
        timeout=REQUEST_TIMEOUT_S,
        follow_redirects=False,
    )
    # Exchanged for the page's cookie, at a clean address.
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/lti/review/{learner}"
    line = wait_for_log(server, r'"GET /lti/review/\S* HTTP/1.1" 303')
    assert f"?grant={REDACTED} " in line
    assert token not in server.log_path.read_text(errors="replace")
