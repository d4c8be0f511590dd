"""Settings, read from the environment once, failing loudly on anything missing or malformed;
every default named here and nowhere else (README, "Deploying it", says what each means)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

DEFAULT_DATABASE_URL = "sqlite:///var/normdive.sqlite3"
DEFAULT_RECORDING_PATH = Path("recordings/the-transformer-block.json")
# A learner writes a few times a minute (one check covers six numbers); a script far more.
DEFAULT_ATTEMPTS_PER_MINUTE = 30
# `normdive serve`: loopback only unless the operator chooses an interface; one worker.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_WORKERS = 1

POSTGRESQL_DRIVER = "postgresql+psycopg"
# The drivers whose packages normdive installs; any other would fail on import.
SUPPORTED_DATABASE_DRIVERS = frozenset(
    {"sqlite", "sqlite+pysqlite", "postgresql", POSTGRESQL_DRIVER}
)
SUPPORTED_DATABASES = (
    "normdive supports SQLite (sqlite:///path/to/file.sqlite3) and PostgreSQL "
    "(postgresql://user:password@host/database)"
)

SECRET_KEY_MIN_LENGTH = 32
# estimated_bits: of a million secrets.token_hex(16), none scored below 88 ("ab" x 16 scores
# 32), so only what is certainly weak is refused, never a key made by `secrets`.
SECRET_KEY_MIN_BITS = 80
SECRET_KEY_HOW_TO = "generate one with: python -c 'import secrets; print(secrets.token_hex(32))'"
DEFAULT_DEV_LTI_LOOPBACK = False
# A class of 30 behind one school's address, twice over in private windows.
DEFAULT_NEW_LEARNERS_PER_HOUR = 60
# A class launching together holds only the few in flight (a launch uses its login, an unused
# one expires: lti.login.LOGIN_TTL); a script calling /lti/login would store a row a call.
DEFAULT_OPEN_LTI_LOGINS_PER_ADDRESS = 200
# uvicorn's own default for FORWARDED_ALLOW_IPS: only a proxy on this machine is trusted.
DEFAULT_FORWARDED_ALLOW_IPS = "127.0.0.1,::1"
# A form is at most 64 KiB, which a 50 kbit/s 2G phone sends in about 11 s.
DEFAULT_BODY_TIMEOUT_S = 30.0
# A working day.
DEFAULT_INSTRUCTOR_ACCESS_TTL_S = 8 * 60 * 60
# Enrolments change a few times a day; staff launching again must not re-read thousands.
DEFAULT_ROSTER_REFRESH_S = 15 * 60
DEFAULT_ROSTER_KEEP_NAMES = True
# Off: a course's context roles alone make staff, as LTI's roles say (normdive.lti.roles).
DEFAULT_LTI_ADMINISTRATORS_ARE_STAFF = False


class ActorIdentity(StrEnum):
    """What identifies a learner in xAPI statements (README, "Learning records")."""

    ACCOUNT = "account"
    ACCOUNT_AND_NAME = "account-and-name"
    EMAIL_AND_NAME = "email-and-name"


# Off by default: an LRS reads nothing that names a person unless the deployment chooses so.
DEFAULT_XAPI_ACTOR = ActorIdentity.ACCOUNT


def estimated_bits(text: str) -> float:
    """len(text) x the Shannon entropy of its character frequencies, in bits."""
    counts = Counter(text).values()
    return 0.0 - sum(count * math.log2(count / len(text)) for count in counts)


# The port each scheme's origin leaves unwritten (a browser's Origin header never names it).
DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str | None:
    """scheme://host[:port] of an http(s) URL as browsers write an origin; None otherwise."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not host:
        return None
    shown = f"[{host}]" if ":" in host else host
    written = port is not None and port != DEFAULT_PORTS[parts.scheme]
    return f"{parts.scheme}://{shown}" + (f":{port}" if written else "")


XAPI_ENDPOINT_HOW_TO = (
    "give the LRS's statements resource, e.g. https://lrs.example.edu/xAPI/statements"
)
ORIGIN_HOW_TO = "give https://host (and :port if any), without a path, the host in ASCII"


def exact_origin(text: str) -> str | None:
    """`text` as an origin (origin_of) when it is nothing more, its host in ASCII (browsers send
    punycode, xn--...); None otherwise."""
    given = text.strip().rstrip("/")
    try:
        parts = urlsplit(given)
    except ValueError:
        return None
    if not given.isascii() or parts.path or "@" in parts.netloc or "?" in given or "#" in given:
        return None
    return origin_of(given)


def checked_by(problem: Callable[[str], str | None]) -> AfterValidator:
    """A validator refusing a text with what `problem` says of it, when not None."""

    def check(text: str) -> str:
        said = problem(text)
        if said is not None:
            raise ValueError(said)
        return text

    return AfterValidator(check)


def database_url_problem(url: str) -> str | None:
    """Why `url` cannot hold the progress store, in one line, or None when it can."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return f"not a database URL SQLAlchemy can read; {SUPPORTED_DATABASES}"
    if parsed.drivername not in SUPPORTED_DATABASE_DRIVERS:
        return f"{parsed.drivername} is not supported; {SUPPORTED_DATABASES}"
    return None


class DatabaseSettings(BaseSettings):
    """Only the database URL, for the commands that sign no cookie and so need no secret."""

    model_config = SettingsConfigDict(env_prefix="NORMDIVE_", extra="ignore", frozen=True)

    database_url: Annotated[str, checked_by(database_url_problem)] = Field(
        default=DEFAULT_DATABASE_URL, validation_alias="DATABASE_URL"
    )


class Settings(DatabaseSettings):
    """Configuration of one server process."""

    secret_key: SecretStr = Field(min_length=SECRET_KEY_MIN_LENGTH)
    # Held to the secret key's rule: whoever has it records lesson 8.5 for any learner.
    host_token: SecretStr | None = Field(default=None, min_length=SECRET_KEY_MIN_LENGTH)
    dev_prerequisite_done: bool = False
    dev_lti_loopback: bool = DEFAULT_DEV_LTI_LOOPBACK
    recording_path: Path = DEFAULT_RECORDING_PATH
    cookie_secure: bool = False
    attempts_per_minute: int = Field(default=DEFAULT_ATTEMPTS_PER_MINUTE, ge=1)
    new_learners_per_hour: int = Field(default=DEFAULT_NEW_LEARNERS_PER_HOUR, ge=1)
    open_lti_logins_per_address: int = Field(default=DEFAULT_OPEN_LTI_LOGINS_PER_ADDRESS, ge=1)
    forwarded_allow_ips: str = Field(
        default=DEFAULT_FORWARDED_ALLOW_IPS, validation_alias="FORWARDED_ALLOW_IPS"
    )
    body_timeout_s: float = Field(default=DEFAULT_BODY_TIMEOUT_S, gt=0)
    instructor_access_ttl_s: int = Field(default=DEFAULT_INSTRUCTOR_ACCESS_TTL_S, ge=1)
    roster_refresh_s: float = Field(default=DEFAULT_ROSTER_REFRESH_S, ge=0)
    roster_keep_names: bool = DEFAULT_ROSTER_KEEP_NAMES
    lti_administrators_are_staff: bool = DEFAULT_LTI_ADMINISTRATORS_ARE_STAFF
    public_origin: str | None = None
    xapi_endpoint: str | None = None
    xapi_key: str | None = None
    xapi_secret: SecretStr | None = None
    xapi_actor: ActorIdentity = DEFAULT_XAPI_ACTOR

    @field_validator("xapi_endpoint")
    @classmethod
    def _an_http_url(cls, text: str | None) -> str | None:
        if text is None or not text.strip():
            return None
        if origin_of(text.strip()) is None:
            raise ValueError(f"{text!r} is not an http(s) URL: {XAPI_ENDPOINT_HOW_TO}")
        return text.strip()

    @field_validator("public_origin")
    @classmethod
    def _an_origin(cls, text: str | None) -> str | None:
        if text is None or not text.strip():
            return None
        origin = exact_origin(text)
        if origin is None:
            raise ValueError(f"{text!r} is not an origin: {ORIGIN_HOW_TO}")
        return origin

    @field_validator("secret_key", "host_token")
    @classmethod
    def _strong_secret(cls, key: SecretStr | None) -> SecretStr | None:
        if key is None:
            return None
        secret = key.get_secret_value()
        if not secret.strip():
            raise ValueError("blank")
        bits = estimated_bits(secret)
        if bits < SECRET_KEY_MIN_BITS:
            raise ValueError(
                f"too predictable (about {bits:.0f} bits estimated from its characters, "
                f"{SECRET_KEY_MIN_BITS} needed)"
            )
        return key


def environment_variable(name: str) -> str:
    """The variable a setting is read from, given its field name or its alias (a validation
    error names an aliased field by its alias, which is the variable itself)."""
    field = Settings.model_fields.get(name)
    if field is None:
        return name
    if isinstance(field.validation_alias, str):
        return field.validation_alias
    return f"{Settings.model_config.get('env_prefix', '')}{name}".upper()


SECRETS = frozenset({environment_variable("secret_key"), environment_variable("host_token")})


def settings_problems(error: ValidationError) -> list[str]:
    """One line per invalid setting, naming the environment variable to fix."""
    lines = []
    for problem in error.errors():
        field = ".".join(str(part) for part in problem["loc"])
        if problem["type"] == "missing":
            message = "missing"
        elif problem["type"] == "value_error":
            message = str(problem.get("ctx", {}).get("error", problem["msg"]))
        else:
            message = problem["msg"]
        if environment_variable(field) in SECRETS:
            message = f"{message}; {SECRET_KEY_HOW_TO}"
        lines.append(f"{environment_variable(field)}: {message}")
    return lines


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()  # secret_key comes from the environment (the pydantic plugin knows)
