"""Settings, read from the environment once, failing loudly on anything missing or malformed.

Every default is named here and nowhere else.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite:///var/normdive.sqlite3"
DEFAULT_RECORDING_PATH = Path("recordings/the-transformer-block.json")
# A learner thinking through the lesson writes a few times a minute at most (one check covers
# all six numbers); a script hammering the checker to open the hints writes far more.
DEFAULT_ATTEMPTS_PER_MINUTE = 30
# New learners one client address may start in any hour. A class of 30 behind one school's
# address starts 30, twice over if every learner opens a private window; a script starting over
# to dodge the attempts limit needs far more. Raise it for larger groups behind one address.
DEFAULT_NEW_LEARNERS_PER_HOUR = 60
# uvicorn's own default for FORWARDED_ALLOW_IPS: only a proxy on this machine is trusted.
DEFAULT_FORWARDED_ALLOW_IPS = "127.0.0.1,::1"
# How long a request's body may take to arrive, in seconds, from the first read: a form is at
# most 64 KiB, which a slow 2G phone (50 kbit/s) sends in about 11 s.
DEFAULT_BODY_TIMEOUT_S = 30.0


class Settings(BaseSettings):
    """Configuration of one server process. Environment variables are named in each field."""

    model_config = SettingsConfigDict(env_prefix="NORMDIVE_", extra="ignore", frozen=True)

    # Any SQLAlchemy URL; SQLite files get WAL and foreign keys, PostgreSQL works as is.
    database_url: str = Field(default=DEFAULT_DATABASE_URL, validation_alias="DATABASE_URL")
    # Signs the learner cookie. Required: a server without one refuses to start.
    secret_key: SecretStr = Field(min_length=32)
    # Bearer token the host platform uses to report that lesson 8.5 is done. Unset: refused.
    host_token: SecretStr | None = None
    # Development only: treat 8.5 as done for everyone (the page says so).
    dev_prerequisite_done: bool = False
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
    # The proxies whose X-Forwarded-For, -Proto and -Host are believed: uvicorn's variable and
    # rule (comma-separated addresses or CIDR networks, or "*" for any peer). From any other
    # peer those headers are ignored, and the peer itself is the client address.
    forwarded_allow_ips: str = Field(
        default=DEFAULT_FORWARDED_ALLOW_IPS, validation_alias="FORWARDED_ALLOW_IPS"
    )
    # The longest a request's body may take to arrive, in seconds; beyond it, 408.
    body_timeout_s: float = Field(default=DEFAULT_BODY_TIMEOUT_S, gt=0)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()  # secret_key comes from the environment (the pydantic plugin knows)
