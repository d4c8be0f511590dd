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


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()  # secret_key comes from the environment (the pydantic plugin knows)
