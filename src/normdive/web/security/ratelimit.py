"""How often one learner may write, and how many learners one address may start, counted in
the database so every worker shares them. Read before the write, a burst in flight may pass by
a few: a brake on scripts, not an exact quota (README, "Deploying it")."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
from dataclasses import dataclass
from datetime import datetime

from pydantic import SecretStr
from sqlalchemy import Engine, Select, func, select

from normdive.i18n.catalogues import N_, gettext, ngettext
from normdive.progress.events import EventKind
from normdive.progress.history import NOT_LEARNER_WRITES
from normdive.store.event_store import as_utc
from normdive.store.tables import EventRecord, Learner

WINDOW_S = 60
# A learner's own writes (History.learner_writes), a check of format errors only among them.
COUNTED_KINDS = tuple(kind.value for kind in EventKind if kind not in NOT_LEARNER_WRITES)

TOO_MANY = N_(
    "That is {limit} within a minute, the most this lesson takes from one learner. "
    "Wait {seconds}, then try again; nothing was saved this time."
)


def _seconds(count: int) -> str:
    return ngettext("%(num)s second", "%(num)s seconds", count) % {"num": count}


@dataclass(frozen=True)
class LimitReached:
    limit: int
    retry_after_s: int  # whole seconds until one more is accepted (at least 1)


class Throttled(LimitReached):
    @property
    def message(self) -> str:
        answers = ngettext("%(num)s answer", "%(num)s answers", self.limit)
        return gettext(TOO_MANY).format(
            limit=answers % {"num": self.limit}, seconds=_seconds(self.retry_after_s)
        )


def _window_full(
    engine: Engine, newest_first: Select[datetime, datetime], limit: int, window_s: int
) -> int | None:
    """Seconds (at least 1) until one more fits the window, or None. `newest_first` selects
    (created_at, now) of what counts, with the database's clock beside each row."""
    with engine.connect() as connection:
        rows = connection.execute(newest_first.limit(limit)).all()
    if len(rows) < limit:
        return None
    oldest, now = as_utc(rows[-1].created_at), as_utc(rows[-1].now)
    age_s = (now - oldest).total_seconds()
    if age_s >= window_s:
        return None
    return max(1, math.ceil(window_s - age_s))


def throttled(engine: Engine, learner_id: str, limit: int) -> Throttled | None:
    query = (
        select(EventRecord.created_at, func.now().label("now"))
        .where(EventRecord.learner_id == learner_id, EventRecord.kind.in_(COUNTED_KINDS))
        .order_by(EventRecord.id.desc())
    )
    retry_after_s = _window_full(engine, query, limit, WINDOW_S)
    return None if retry_after_s is None else Throttled(limit, retry_after_s)


# A fresh learner's attempts count from 0, so learners per address are limited too.
NEW_LEARNER_WINDOW_S = 60 * 60
# Distinguishes this use of the secret key from the cookie's and the form token's.
ADDRESS_KEY_PURPOSE = b"normdive.client-address:"

TOO_MANY_LEARNERS = N_(
    "{limit} started from your network within an hour, the most this lesson takes from "
    "one address. Wait {minutes}, or go back to the browser you started in; nothing was saved "
    "this time."
)


class TooManyLearners(LimitReached):
    @property
    def message(self) -> str:
        minutes = max(1, math.ceil(self.retry_after_s / 60))
        learners = ngettext("%(num)s new learner", "%(num)s new learners", self.limit)
        waited = ngettext("%(num)s minute", "%(num)s minutes", minutes)
        return gettext(TOO_MANY_LEARNERS).format(
            limit=learners % {"num": self.limit}, minutes=waited % {"num": minutes}
        )


# An IPv6 client can pick a new address from its /64 for each request (RFC 4291's
# interface identifier is the rest).
IPV6_CLIENT_PREFIX = 64


def client_network(address: str) -> str:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:  # ::ffff:a.b.c.d is the IPv4 client a.b.c.d
            return str(parsed.ipv4_mapped)
        return str(ipaddress.ip_network(f"{parsed}/{IPV6_CLIENT_PREFIX}", strict=False))
    return str(parsed)


def address_key(secret_key: SecretStr, address: str) -> str:
    """The keyed hash stored for a client's network: 64 hex characters."""
    key = secret_key.get_secret_value().encode()
    client = client_network(address).encode()
    return hmac.new(key, ADDRESS_KEY_PURPOSE + client, hashlib.sha256).hexdigest()


def too_many_learners(engine: Engine, created_by: str, limit: int) -> TooManyLearners | None:
    query = (
        select(Learner.created_at, func.now().label("now"))
        .where(Learner.created_by == created_by)
        .order_by(Learner.created_at.desc())
    )
    retry_after_s = _window_full(engine, query, limit, NEW_LEARNER_WINDOW_S)
    return None if retry_after_s is None else TooManyLearners(limit, retry_after_s)
