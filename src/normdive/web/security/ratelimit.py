"""How often one learner may write: at most `Settings.attempts_per_minute` writes in any 60
seconds, so nobody can hammer the checker (or the row player) to run up evaluated runs and
open the hints, or flood the progress store.

What counts is what was written: the learner's own events whose `created_at` (the database's
clock) lies within the last WINDOW_S seconds, of every kind a learner's request appends
(numbers checked, readings locked, predictions, row predictions and plays, hint opens,
takeaway saves; not the host platform's prerequisite report, nor the gate's closing, which
goes with the write that closes it). The count lives in the events
table, so every worker of a deployment sees the same one; no process keeps state.

A check whose every field is a format error still appends its numbers_checked event (with the
verdicts "format_error"; it costs no attempt on the page), so format errors count here too. A
request refused before anything is written (409, 422, or this 429) writes nothing and so adds
nothing, but once the limit is reached every write is refused until the oldest counted event
is older than the window; Retry-After says how many seconds that is.

The check reads, then the action appends: requests of one learner that arrive at the same
moment may each see the count below the limit, so a burst can pass it by at most the number of
requests in flight. The limit is a brake on scripts, not an exact quota.

How many learners one client address may start is limited too (`too_many_learners`, below).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
from dataclasses import dataclass
from datetime import datetime

from pydantic import SecretStr
from sqlalchemy import Engine, Select, func, select

from normdive.lesson.wording import counted
from normdive.progress.events import EventKind
from normdive.progress.history import NOT_LEARNER_WRITES
from normdive.store.event_store import as_utc
from normdive.store.tables import EventRecord, Learner

# The window the limit counts over: "per minute".
WINDOW_S = 60
# Every kind a learner's own request writes; the host platform's report is not theirs, nor
# the gate's closing (History.learner_writes counts the same kinds).
COUNTED_KINDS = tuple(kind.value for kind in EventKind if kind not in NOT_LEARNER_WRITES)

TOO_MANY = (
    "That is {limit} within a minute, the most this lesson takes from one learner. "
    "Wait {seconds}, then try again; nothing was saved this time."
)


@dataclass(frozen=True)
class LimitReached:
    """A client reached one of the limits here: refuse with 429 and Retry-After."""

    limit: int
    retry_after_s: int  # whole seconds until one more is accepted (at least 1)


class Throttled(LimitReached):
    """The learner wrote `limit` events within WINDOW_S seconds."""

    @property
    def message(self) -> str:
        return TOO_MANY.format(
            limit=counted(self.limit, "answer"), seconds=counted(self.retry_after_s, "second")
        )


def _window_full(
    engine: Engine, newest_first: Select[datetime, datetime], limit: int, window_s: int
) -> int | None:
    """The sliding window both limits share: `newest_first` selects (created_at, now) of what
    counts, newest first, with the database's own clock beside each row; it is read for at
    most `limit` rows. None when fewer than `limit` lie within the last `window_s` seconds,
    else the whole seconds (at least 1) until the limit-th newest leaves the window and one
    more is accepted."""
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
    """Throttled when the learner already wrote `limit` events in the last WINDOW_S seconds,
    else None. One indexed query (events by learner, newest first)."""
    query = (
        select(EventRecord.created_at, func.now().label("now"))
        .where(EventRecord.learner_id == learner_id, EventRecord.kind.in_(COUNTED_KINDS))
        .order_by(EventRecord.id.desc())
    )
    retry_after_s = _window_full(engine, query, limit, WINDOW_S)
    return None if retry_after_s is None else Throttled(limit, retry_after_s)


# --- how many new learners one address may start ----------------------------------------------
#
# Starting over is free: a client without a cookie gets a fresh learner, whose attempts count
# from zero. So learners are also limited per client address: at most
# `Settings.new_learners_per_hour` learners stored in any NEW_LEARNER_WINDOW_S seconds from one
# address. A learner is stored by their first write (reading stores nothing), so the limit
# costs a reader nothing. The address is the peer, or the client a trusted proxy names
# (web.security.proxy). What is stored is an HMAC of it under the server's secret key: the
# table can count one address's learners, but does not hold the address, and without the key
# nobody can test an address against it. As with the attempts, requests in flight at the same
# moment may each see the count below the limit.

# The window the new-learner limit counts over: "per hour".
NEW_LEARNER_WINDOW_S = 60 * 60
# Distinguishes this use of the secret key from the cookie's and the form token's.
ADDRESS_KEY_PURPOSE = b"normdive.client-address:"

TOO_MANY_LEARNERS = (
    "{limit} started from your network within an hour, the most this lesson takes from "
    "one address. Wait {minutes}, or go back to the browser you started in; nothing was saved "
    "this time."
)


class TooManyLearners(LimitReached):
    """The address started `limit` learners within NEW_LEARNER_WINDOW_S seconds."""

    @property
    def message(self) -> str:
        minutes = max(1, math.ceil(self.retry_after_s / 60))
        return TOO_MANY_LEARNERS.format(
            limit=counted(self.limit, "new learner"), minutes=counted(minutes, "minute")
        )


# An IPv6 client is normally handed a whole /64 network (2**64 addresses) and can pick a new
# address from it for each request, so an IPv6 address counts by its /64 prefix (RFC 4291's
# interface identifier is the rest); an IPv4 address counts as itself.
IPV6_CLIENT_PREFIX = 64


def client_network(address: str) -> str:
    """What the new-learner limit counts one client by: an IPv4 address, or an IPv6 address's
    /64 network; anything else (a name a test client gives) as it is."""
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
    """The keyed hash stored for a client (client_network of its address): 64 hex
    characters."""
    key = secret_key.get_secret_value().encode()
    client = client_network(address).encode()
    return hmac.new(key, ADDRESS_KEY_PURPOSE + client, hashlib.sha256).hexdigest()


def too_many_learners(engine: Engine, created_by: str, limit: int) -> TooManyLearners | None:
    """TooManyLearners when `limit` learners were started by this address key in the last
    NEW_LEARNER_WINDOW_S seconds, else None. One indexed query (learners by address key,
    newest first)."""
    query = (
        select(Learner.created_at, func.now().label("now"))
        .where(Learner.created_by == created_by)
        .order_by(Learner.created_at.desc())
    )
    retry_after_s = _window_full(engine, query, limit, NEW_LEARNER_WINDOW_S)
    return None if retry_after_s is None else TooManyLearners(limit, retry_after_s)
