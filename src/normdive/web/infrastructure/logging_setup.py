"""How `normdive serve` logs (web.infrastructure.serving.run hands `logging_config()` to uvicorn,
which applies it in every process it serves from, the workers of --workers and --reload included).

- uvicorn's own lines stay as uvicorn writes them (stderr), and so does its access log
  (stdout), except that RedactAccessLog, a filter on the "uvicorn.access" logger, replaces the
  values of SECRET_QUERY_PARAMETERS with REDACTED and cuts a path longer than
  MAX_LOGGED_PATH_CHARS: an instructor link's token, read from the log, would open the
  instructor view for hours, and a client sending paths of tens of kilobytes (refused, but
  logged) would otherwise add as much to the log with every request.
- normdive's own loggers write from INFO up, and every other library's from WARNING up, to
  stderr with a timestamp, the level and the logger's name (LOG_FORMAT).
"""

from __future__ import annotations

import copy
import logging
from typing import Any
from urllib.parse import unquote_plus

from uvicorn.config import LOGGING_CONFIG

from normdive.lti.dynamic_registration import INVITE_PARAMETER
from normdive.lti.submission_review import GRANT_PARAMETER
from normdive.web.infrastructure.instructor_access import ACCESS_PARAMETER

ACCESS_LOGGER = "uvicorn.access"
# Query parameters whose value is a credential: an instructor link's token (good for the
# instructor view's TTL), a submission review grant (minutes), a dynamic registration
# invitation (a week), the platform's registration token, and an LTI id_token, which platforms
# post but a misconfigured one could send in the query of a GET.
SECRET_QUERY_PARAMETERS = (
    ACCESS_PARAMETER,
    GRANT_PARAMETER,
    INVITE_PARAMETER,
    "registration_token",
    "id_token",
)
REDACTED = "[redacted]"
# The longest path (with its query) the access log shows; what is left is counted instead.
MAX_LOGGED_PATH_CHARS = 512
CUT_MARKER = "[... {count} more characters]"
# Where uvicorn's access log call puts the path in its arguments: (client address, method,
# path with query, HTTP version, status) (uvicorn.protocols.http.*_impl).
ACCESS_LOG_ARGUMENTS = 5
PATH_ARGUMENT = 2

APP_LOGGER = "normdive"
APP_LOG_LEVEL = "INFO"
# Libraries other than uvicorn (SQLAlchemy, httpx, ...) log through the root logger.
OTHER_LOG_LEVEL = "WARNING"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _redacted_field(field: str) -> str:
    name, equals, _value = field.partition("=")
    # Decoded as Starlette decodes it, so "%61ccess=" is the access parameter here too.
    if equals and unquote_plus(name) in SECRET_QUERY_PARAMETERS:
        return f"{name}={REDACTED}"
    return field


def loggable_path(path: str) -> str:
    """`path` (with its query, as uvicorn logs it) with the secret parameters' values
    replaced, cut to MAX_LOGGED_PATH_CHARS with a count of what was cut."""
    route, question, query = path.partition("?")
    if question:
        query = "&".join(_redacted_field(field) for field in query.split("&"))
    shown = route + question + query
    if len(shown) > MAX_LOGGED_PATH_CHARS:
        cut = len(shown) - MAX_LOGGED_PATH_CHARS
        shown = shown[:MAX_LOGGED_PATH_CHARS] + CUT_MARKER.format(count=cut)
    return shown


class RedactAccessLog(logging.Filter):
    """On the access logger: rewrites each record's path (loggable_path) before any handler
    formats it, whatever the formatter."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == ACCESS_LOG_ARGUMENTS:
            path = args[PATH_ARGUMENT]
            if isinstance(path, str):
                shown = loggable_path(path)
                record.args = (*args[:PATH_ARGUMENT], shown, *args[PATH_ARGUMENT + 1 :])
        return True


def logging_config() -> dict[str, Any]:
    """uvicorn's logging configuration (a logging.config.dictConfig dictionary) with the access
    log's filter, and a handler for normdive's and other libraries' lines."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"redact": {"()": RedactAccessLog}}
    config["loggers"][ACCESS_LOGGER]["filters"] = ["redact"]
    config["formatters"]["normdive"] = {"format": LOG_FORMAT}
    config["handlers"]["normdive"] = {
        "class": "logging.StreamHandler",
        "formatter": "normdive",
        "stream": "ext://sys.stderr",
    }
    # normdive's records reach the root's handler: a handler has no level of its own here, and
    # the root's level applies only to what is logged on the root itself.
    config["loggers"][APP_LOGGER] = {"level": APP_LOG_LEVEL}
    config["root"] = {"level": OTHER_LOG_LEVEL, "handlers": ["normdive"]}
    return config
