"""Settings, read from the environment once, failing loudly on anything missing or malformed.

Every default is named here and nowhere else.
"""

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
# A learner thinking through the lesson writes a few times a minute at most (one check covers
# all six numbers); a script hammering the checker to open the hints writes far more.
DEFAULT_ATTEMPTS_PER_MINUTE = 30
# `normdive serve`: loopback only unless the operator chooses an interface; one worker.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_WORKERS = 1

# The PostgreSQL driver normdive depends on (psycopg 3), used when a URL names none.
POSTGRESQL_DRIVER = "postgresql+psycopg"
# The SQLAlchemy drivers whose Python packages normdive installs: the standard library's
# sqlite3 and psycopg 3. Any other (mysql, postgresql+psycopg2, ...) would fail on import.
SUPPORTED_DATABASE_DRIVERS = frozenset(
    {"sqlite", "sqlite+pysqlite", "postgresql", POSTGRESQL_DRIVER}
)
SUPPORTED_DATABASES = (
    "normdive supports SQLite (sqlite:///path/to/file.sqlite3) and PostgreSQL "
    "(postgresql://user:password@host/database)"
)

SECRET_KEY_MIN_LENGTH = 32
# The secret's strength, estimated as its length times the Shannon entropy of its character
# frequencies, in bits. The estimate is 0 for a blank key or one repeated character and 32
# for "ab" x 16; it is close to the truth for a random key (of a million
# secrets.token_hex(16), the 128-bit keys of 32 characters, none scored below 88; token_hex(32)
# scores about 240). It cannot see that a repeated word is guessable, so it refuses only what
# is certainly weak, and never a key made by `secrets`.
SECRET_KEY_MIN_BITS = 80
SECRET_KEY_HOW_TO = "generate one with: python -c 'import secrets; print(secrets.token_hex(32))'"
# Off: a platform registering itself may not name this machine (dynamic registration).
DEFAULT_DEV_LTI_LOOPBACK = False
# New learners one client address may start in any hour. A class of 30 behind one school's
# address starts 30, twice over if every learner opens a private window; a script starting over
# to dodge the attempts limit needs far more. Raise it for larger groups behind one address.
DEFAULT_NEW_LEARNERS_PER_HOUR = 60
# LTI logins one client address may have begun and not finished at once. A launch uses up its
# login, and a login unused expires after ten minutes (lti.login.LOGIN_TTL): a class launching
# together from one school's address holds only the few in flight, while a script calling
# /lti/login over and over would otherwise store a row for every call.
DEFAULT_OPEN_LTI_LOGINS_PER_ADDRESS = 200
# uvicorn's own default for FORWARDED_ALLOW_IPS: only a proxy on this machine is trusted.
DEFAULT_FORWARDED_ALLOW_IPS = "127.0.0.1,::1"
# How long a request's body may take to arrive, in seconds, from the first read: a form is at
# most 64 KiB, which a slow 2G phone (50 kbit/s) sends in about 11 s.
DEFAULT_BODY_TIMEOUT_S = 30.0
# How long an instructor link (`normdive instructor-link`) stays good, and how long the
# instructor view stays open in a browser after that link or a staff launch: a working day.
DEFAULT_INSTRUCTOR_ACCESS_TTL_S = 8 * 60 * 60
# A course's roster (LTI Names and Role Provisioning Services) is fetched again at most this
# often, in seconds, whoever asks (a staff launch, `normdive lti roster`): a course's
# enrolments change a few times a day, and an instructor launching over and over must not
# make D9 read a roster of thousands each time.
DEFAULT_ROSTER_REFRESH_S = 15 * 60
# Keep roster members' names and emails, and a launching user's name, when the platform sends
# them (it sends them only where its administrator lets the tool have them): the instructor
# view names who has not started, and a submission review whom it shows. Off, they are never
# stored, and the next refresh or launch forgets those stored before.
DEFAULT_ROSTER_KEEP_NAMES = True
# Off: a platform's or institution's administrator who is not staff of the course by a context
# role is a learner there, as the LTI roles say (normdive.lti.roles).
DEFAULT_LTI_ADMINISTRATORS_ARE_STAFF = False


class ActorIdentity(StrEnum):
    """What identifies a learner in the xAPI statements D9 sends an LRS (NORMDIVE_XAPI_ACTOR).
    Names and emails come only from a course's roster, so only where the platform sent them
    and NORMDIVE_ROSTER_KEEP_NAMES kept them; a learner without one is identified by the
    account alone."""

    # The LTI account (the platform's issuer and the user's sub), or an anonymous learner's
    # random id under the tool's origin: nothing the LRS can read a person from.
    ACCOUNT = "account"
    # The account, and the learner's name.
    ACCOUNT_AND_NAME = "account-and-name"
    # The learner's email (mbox) in place of the account, and their name.
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
    """scheme://host[:port] of an http(s) URL, lowercased, the scheme's default port left out
    as browsers write an origin; None for anything else."""
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
    """`text` as an origin (origin_of: lowercased, without a default port) when it is one and
    nothing more: no user, path (a trailing slash aside), query or fragment, and a host in
    ASCII (a browser sends a non-ASCII host in its punycode form, xn--...). None otherwise."""
    given = text.strip().rstrip("/")
    try:
        parts = urlsplit(given)
    except ValueError:
        return None
    if not given.isascii() or parts.path or "@" in parts.netloc or "?" in given or "#" in given:
        return None
    return origin_of(given)


def checked_by(problem: Callable[[str], str | None]) -> AfterValidator:
    """A pydantic validator for a text field: the text as given, refused with what `problem`
    says of it when that is not None."""

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
    """Only the database URL: what the commands that sign no cookie (`normdive db upgrade`,
    `normdive prerequisite done`) read, so they need no secret."""

    model_config = SettingsConfigDict(env_prefix="NORMDIVE_", extra="ignore", frozen=True)

    # A SQLAlchemy URL of SQLite or PostgreSQL; SQLite files get WAL and foreign keys.
    database_url: Annotated[str, checked_by(database_url_problem)] = Field(
        default=DEFAULT_DATABASE_URL, validation_alias="DATABASE_URL"
    )


class Settings(DatabaseSettings):
    """Configuration of one server process. Environment variables are named in each field."""

    # Signs the learner cookie. Required: a server without one refuses to start.
    secret_key: SecretStr = Field(min_length=SECRET_KEY_MIN_LENGTH)
    # Bearer token the host platform uses to report that lesson 8.5 is done. Unset: refused.
    # Held to the secret key's rule: whoever has it records lesson 8.5 for any learner.
    host_token: SecretStr | None = Field(default=None, min_length=SECRET_KEY_MIN_LENGTH)
    # Development only: treat 8.5 as done for everyone (the page says so).
    dev_prerequisite_done: bool = False
    # Development only: a platform registering itself (dynamic registration) may name this
    # machine (http://localhost, http://127.0.0.1, ...). Off, it names https URLs elsewhere.
    dev_lti_loopback: bool = DEFAULT_DEV_LTI_LOOPBACK
    # The 8.5 lesson's recording, with the ablation rows in it.
    recording_path: Path = DEFAULT_RECORDING_PATH
    # Send the learner cookie only over HTTPS. Turn on behind TLS in production.
    cookie_secure: bool = False
    # Writes one learner may make in any 60 s (checks, locks, row predictions and plays, hint
    # opens, takeaway saves); beyond it, 429. Counted in the database, so shared by workers.
    attempts_per_minute: int = Field(default=DEFAULT_ATTEMPTS_PER_MINUTE, ge=1)
    # Learners one client address may start in any hour (a learner starts with their first
    # write; reading stores nothing); beyond it, 429. Counted in the database, by a keyed hash
    # of the address, so shared by workers.
    new_learners_per_hour: int = Field(default=DEFAULT_NEW_LEARNERS_PER_HOUR, ge=1)
    # LTI logins one client address may have begun and not finished (their launch not yet
    # made, and not expired); beyond it, 429. Counted in the database, as the learners are.
    open_lti_logins_per_address: int = Field(default=DEFAULT_OPEN_LTI_LOGINS_PER_ADDRESS, ge=1)
    # The proxies whose X-Forwarded-For, -Proto and -Host are believed: uvicorn's variable and
    # rule (comma-separated addresses or CIDR networks, or "*" for any peer). From any other
    # peer those headers are ignored, and the peer itself is the client address.
    forwarded_allow_ips: str = Field(
        default=DEFAULT_FORWARDED_ALLOW_IPS, validation_alias="FORWARDED_ALLOW_IPS"
    )
    # The longest a request's body may take to arrive, in seconds; beyond it, 408.
    body_timeout_s: float = Field(default=DEFAULT_BODY_TIMEOUT_S, gt=0)
    # Seconds an instructor link, and the instructor view's access in a browser, stay good.
    instructor_access_ttl_s: int = Field(default=DEFAULT_INSTRUCTOR_ACCESS_TTL_S, ge=1)
    # The least time, in seconds, between two fetches of a course's roster.
    roster_refresh_s: float = Field(default=DEFAULT_ROSTER_REFRESH_S, ge=0)
    # Keep roster members' names and emails, and launching users' names, when sent.
    roster_keep_names: bool = DEFAULT_ROSTER_KEEP_NAMES
    # Treat a platform's or institution's administrator (system/person#Administrator or
    # #SysAdmin, institution/person#Administrator) as staff of every course they launch from.
    lti_administrators_are_staff: bool = DEFAULT_LTI_ADMINISTRATORS_ARE_STAFF
    # The origin learners and platforms reach the tool at (https://host[:port]). The URLs the
    # tool gives out (its LTI configuration, launch and redirect URLs, links it prints) are built
    # from it. Unset: from each request's Host (or a trusted proxy's X-Forwarded-Host/-Proto).
    public_origin: str | None = None
    # The deployment's Learning Record Store (xAPI): its statements resource, and the key and
    # secret it knows D9 by. Unset: none from the environment (`normdive xapi add` stores one).
    xapi_endpoint: str | None = None
    xapi_key: str | None = None
    xapi_secret: SecretStr | None = None
    # What identifies a learner in the statements (ActorIdentity).
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


# The settings held to the secret key's rule, by their variables.
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
