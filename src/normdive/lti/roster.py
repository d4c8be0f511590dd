"""A course's roster from its platform (LTI Names and Role Provisioning Services 2.0).

A launch naming the course's memberships URL keeps it (lti_roster_services). A refresh, at most
once per NORMDIVE_ROSTER_REFRESH_S whoever asks, reads every page of the course's learners and
stores them under a generation of its own, shown in one UPDATE once all are stored: readers see
a roster whole. A member is keyed as lti_learners keys a user (learners.member_key), so a
member who launched is the learner they became.
"""

from __future__ import annotations

import logging
import time
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

import httpx
from sqlalchemy import Engine, Row, and_, delete, insert, select, update

from normdive.config import origin_of
from normdive.lti import registrations
from normdive.lti.grade_doctor import error_page_for_token
from normdive.lti.launch import Launch
from normdive.lti.learners import context_key, member_key
from normdive.lti.passback import is_error_page, platform_origins, platform_words
from normdive.lti.platform_http import AnswerTooLarge, read_body
from normdive.lti.platform_json import NotPlatformJson, parsed
from normdive.lti.registrations import Registration, url_problem
from normdive.lti.roles import LIS_VOCABULARY, CourseRole, course_role
from normdive.lti.service_token import token_form
from normdive.store.db import DATABASE_ERRORS, failure_reason
from normdive.store.event_store import as_utc
from normdive.store.tables import (
    LTI_IDENTIFIER_LENGTH,
    LtiContextMember,
    LtiLearner,
    LtiRosterMember,
    LtiRosterService,
)

logger = logging.getLogger(__name__)

MEMBERSHIPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
MEMBERSHIPS_MEDIA_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
# The `role` filter (NRPS 2.0, 2.4.1): only learners are counted.
LEARNER_ROLE = f"{LIS_VOCABULARY}membership#Learner"
ROLE_FILTER_PARAMETER = "role"
LIMIT_PARAMETER = "limit"
# NRPS 2.0, 2.4.2: a platform may send fewer (Canvas at most 50; Moodle and Open edX all).
MEMBERS_PER_PAGE = 100
# A course of 10,000 at Canvas's 50 a page.
MAX_PAGES = 200
# A member is 100-400 bytes with a name and email: 1,000 fit many times over.
MAX_PAGE_BYTES = 2 * 1024 * 1024
# A token and every page together.
ROSTER_DEADLINE_S = 60.0
# The statuses a member may have (NRPS 2.0, 2.3: Active when the platform names none).
ACTIVE = "Active"
INACTIVE = "Inactive"
# Only in an answer of differences (`since`); a whole roster leaves such members out.
DELETED = "Deleted"
STATUSES = (ACTIVE, INACTIVE)
SHORT_ID_CHARS = 8
# Control characters (NUL among them) and surrogates: no stored text holds them.
UNSTORED = ("Cc", "Cs")
# A transaction's rows: on SQLite a learner's write waits for the batch (a busy timeout of 10 s,
# then a 503), and 2,000 take a few tens of milliseconds.
STORE_BATCH_ROWS = 2_000
# Longer than SQLite's longest busy-handler sleep (100 ms, sqliteDefaultBusyCallback in
# sqlite3.c), so every waiting writer gets the lock in between. PostgreSQL locks rows.
SQLITE_BATCH_PAUSE_S = 0.12


class RosterProblem(Exception):
    """Why a refresh kept the roster as it was, in words for the operator."""


@dataclass(frozen=True)
class Member:
    key: str
    status: str
    roles: tuple[str, ...]
    name: str | None = None
    email: str | None = None


def memberships_url(launch: Launch) -> str | None:
    """The memberships URL the launch's NRPS claim names, or None (no claim, not a URL)."""
    claim = launch.names_roles or {}
    url = _unspaced(claim.get("context_memberships_url"))
    if url is None or url_problem(url) is not None:
        return None
    return url


def remember_service(engine: Engine, launch: Launch) -> str | None:
    """Keep the memberships URL the launch names; the course's context key, or None."""
    course = context_key(launch)
    url = memberships_url(launch)
    if course is None or url is None:
        return None
    values = {
        "registration_id": launch.registration.id,
        "deployment_id": launch.deployment_id,
        "memberships_url": url,
    }
    with engine.begin() as connection:
        updated = connection.execute(
            update(LtiRosterService).where(LtiRosterService.context_key == course).values(**values)
        ).rowcount
        if not updated:
            connection.execute(insert(LtiRosterService).values(context_key=course, **values))
    return course


def foreign(url: str, registration: Registration, what: str) -> str | None:
    """Why the token must not go to `url`, or None: passback.platform_origins' rule."""
    allowed = platform_origins(registration)
    if origin_of(url) in allowed:
        return None
    return (
        f"{what} is on {origin_of(url) or repr(url)}, which is none of the origins registered "
        f"for {registration.issuer} ({', '.join(allowed)}): D9 sends no token there. If the "
        "platform serves its roster there, register that host with --frame-origin"
    )


def is_learner(roles: tuple[str, ...]) -> bool:
    return course_role(roles) is CourseRole.LEARNER


def first_page(url: str, members_per_page: int) -> str:
    """`url` asking for learners only, `members_per_page` a page (its own query kept)."""
    parts = urlsplit(url)
    asked = (ROLE_FILTER_PARAMETER, LIMIT_PARAMETER)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in asked]
    query.extend(((ROLE_FILTER_PARAMETER, LEARNER_ROLE), (LIMIT_PARAMETER, str(members_per_page))))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def _text(value: Any) -> str | None:
    """Without UNSTORED characters: PostgreSQL refuses a NUL in any text, and neither database
    encodes a lone surrogate, which JSON can carry."""
    if not isinstance(value, str):
        return None
    kept = "".join(c for c in " ".join(value.split()) if unicodedata.category(c) not in UNSTORED)
    return kept.strip()[:LTI_IDENTIFIER_LENGTH] or None


def _unspaced(value: Any) -> str | None:
    """A role or URL, or None if it holds a space (stored roles are parted by spaces) or an
    UNSTORED character."""
    if not isinstance(value, str) or not value or value != "".join(value.split()):
        return None
    if any(unicodedata.category(c) in UNSTORED for c in value):
        return None
    return value


def members_of(
    page: Any, registration: Registration, deployment_id: str, keep_names: bool
) -> Iterator[Member]:
    """The learners one page lists (others, and members without a user_id, left out)."""
    listed = page.get("members") if isinstance(page, Mapping) else None
    if not isinstance(listed, list):
        raise RosterProblem("a page of the roster lists no members")
    for entry in listed:
        if not isinstance(entry, Mapping):
            continue
        user = entry.get("user_id")
        roles = entry.get("roles")
        if not isinstance(user, str) or not user or not isinstance(roles, list):
            continue
        named = tuple(role for role in map(_unspaced, roles) if role is not None)
        status = entry.get("status", ACTIVE)
        if status == DELETED or not is_learner(named):
            continue
        yield Member(
            key=member_key(registration.issuer, registration.client_id, deployment_id, user),
            status=status if status in STATUSES else ACTIVE,
            roles=named,
            name=_text(entry.get("name")) if keep_names else None,
            email=_text(entry.get("email")) if keep_names else None,
        )


@dataclass(frozen=True)
class Bounds:
    """How much one refresh may read, and for how long."""

    max_pages: int = MAX_PAGES
    members_per_page: int = MEMBERS_PER_PAGE
    max_page_bytes: int = MAX_PAGE_BYTES
    deadline_s: float = ROSTER_DEADLINE_S


class _Fetch:
    """One refresh's requests, all before one deadline."""

    def __init__(self, client: httpx.Client, bounds: Bounds, clock: Callable[[], float]) -> None:
        self.client = client
        self.bounds = bounds
        self.clock = clock
        self.deadline = clock() + bounds.deadline_s

    def _in_time(self) -> None:
        if self.clock() > self.deadline:
            raise RosterProblem(
                f"the platform did not answer within {self.bounds.deadline_s:g} s: D9 tries "
                "again at the next refresh"
            )

    def request(
        self, method: str, url: str, what: str, **sent: Any
    ) -> tuple[int, bytes, httpx.Headers]:
        self._in_time()
        left = max(self.deadline - self.clock(), 0.001)
        try:
            with self.client.stream(method, url, timeout=left, **sent) as response:
                try:
                    body = read_body(response, self.bounds.max_page_bytes, self._in_time)
                except AnswerTooLarge:
                    raise RosterProblem(
                        f"{what} was over {self.bounds.max_page_bytes // 1024} KiB; D9 read no "
                        "more of it. Ask the platform for smaller pages"
                    ) from None
                return response.status_code, body, response.headers
        except httpx.TimeoutException:
            raise RosterProblem(
                f"the platform did not answer within {self.bounds.deadline_s:g} s: D9 tries "
                "again at the next refresh"
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise RosterProblem(
                f"no answer from {what} ({type(error).__name__}): D9 tries again at the next "
                "refresh"
            ) from None


def _token(engine: Engine, registration: Registration, fetch: _Fetch) -> str:
    what = f"the platform's token endpoint {registration.token_url}"
    status, body, _ = fetch.request(
        "POST",
        registration.token_url,
        what,
        data=token_form(engine, registration, (MEMBERSHIPS_SCOPE,)),
    )
    if status != 200 and is_error_page(body):
        raise RosterProblem(
            f"{error_page_for_token(status, registration.issuer)}. D9 tries again at the next "
            "refresh"
        )
    if status != 200:
        raise RosterProblem(
            f"the platform refused the token ({status}: {platform_words(body)}): the tool may "
            "not be allowed the course roster (Names and Role Provisioning Services) in its "
            f"settings on {registration.issuer}, or the client was disabled"
        )
    try:
        value = parsed(body)["access_token"]
    except (NotPlatformJson, KeyError, TypeError):
        value = None
    if not isinstance(value, str):
        raise RosterProblem(f"{what} gave no access token")
    return value


def fetch_members(
    engine: Engine,
    registration: Registration,
    deployment_id: str,
    url: str,
    *,
    keep_names: bool,
    client: httpx.Client | None = None,
    bounds: Bounds = Bounds(),
    clock: Callable[[], float] = time.monotonic,
) -> list[Member]:
    """Every learner the memberships URL lists, page after page; RosterProblem when the
    whole roster could not be read within the bounds."""
    why = foreign(url, registration, "the course's roster service")
    if why is not None:
        raise RosterProblem(why)
    owned = client is None
    client = client or httpx.Client(follow_redirects=False)
    try:
        fetch = _Fetch(client, bounds, clock)
        token = _token(engine, registration, fetch)
        found: dict[str, Member] = {}
        page_url: str | None = first_page(url, bounds.members_per_page)
        pages = 0
        while page_url is not None:
            if pages == bounds.max_pages:
                raise RosterProblem(
                    f"the roster runs over {bounds.max_pages} pages; D9 read no more of it "
                    "and keeps the roster it had"
                )
            pages += 1
            status, body, headers = fetch.request(
                "GET",
                page_url,
                f"page {pages} of the roster",
                headers={"Authorization": f"Bearer {token}", "Accept": MEMBERSHIPS_MEDIA_TYPE},
            )
            if status != 200:
                raise RosterProblem(
                    f"the platform refused page {pages} of the roster ({status}: "
                    f"{platform_words(body)})"
                )
            try:
                page = parsed(body)
            except NotPlatformJson:
                raise RosterProblem(f"page {pages} of the roster is not JSON") from None
            for member in members_of(page, registration, deployment_id, keep_names):
                found[member.key] = member
            page_url = _next_page(page_url, headers, registration)
        return list(found.values())
    finally:
        if owned:
            client.close()


def _next_page(current: str, headers: httpx.Headers, registration: Registration) -> str | None:
    """The page after `current` (its Link header's rel="next", RFC 8288), or None."""
    link = httpx.Response(200, headers=headers).links.get("next")
    target = link.get("url") if link else None
    if not target:
        return None
    absolute = urljoin(current, target)
    why = foreign(absolute, registration, "the roster's next page")
    if why is not None:
        raise RosterProblem(why)
    return absolute


@dataclass(frozen=True)
class Refreshed:
    """What a refresh did: `members` kept (None when it was not tried or failed)."""

    members: int | None
    # Why it was not tried (refreshed lately, or no service for the course) or failed.
    problem: str | None = None


@dataclass(frozen=True)
class Batches:
    """How a refresh stores its members: `rows` a transaction, `pause_s` between two on SQLite."""

    rows: int = STORE_BATCH_ROWS
    pause_s: float = SQLITE_BATCH_PAUSE_S


def _busy(service: Row[datetime | None, datetime | None, str | None], interval_s: float) -> str:
    started = as_utc(service.refresh_started_at)
    since = f"{started:%Y-%m-%d %H:%M:%S} UTC, less than {interval_s:g} s ago"
    if service.fetched_at is not None and as_utc(service.fetched_at) >= started:
        return f"refreshed at {since}"
    told = f"; the last problem recorded: {service.problem}" if service.problem else ""
    return f"a refresh began at {since}, and has stored nothing: it is under way, or failed{told}"


def _claim(
    engine: Engine, course: str, moment: datetime, interval_s: float, force: bool
) -> Row[int, str, str, int] | Refreshed:
    """The service and the generation to store under, or a Refreshed saying why not."""
    fresh = LtiRosterService.refresh_started_at.is_(None) | (
        LtiRosterService.refresh_started_at < moment - timedelta(seconds=interval_s)
    )
    mine = LtiRosterService.context_key == course
    with engine.begin() as connection:
        claimed = connection.execute(
            update(LtiRosterService)
            .where(mine, *(() if force else (fresh,)))
            .values(
                refresh_started_at=moment,
                latest_generation=LtiRosterService.latest_generation + 1,
            )
            .returning(
                LtiRosterService.registration_id,
                LtiRosterService.deployment_id,
                LtiRosterService.memberships_url,
                LtiRosterService.latest_generation,
            )
        ).first()
        if claimed is not None:
            return claimed
        service = connection.execute(
            select(
                LtiRosterService.refresh_started_at,
                LtiRosterService.fetched_at,
                LtiRosterService.problem,
            ).where(mine)
        ).first()
    if service is None:
        return Refreshed(None, "no launch from this course named its roster service")
    return Refreshed(None, _busy(service, interval_s))


def refresh(
    engine: Engine,
    course: str,
    *,
    keep_names: bool,
    interval_s: float,
    force: bool = False,
    client: httpx.Client | None = None,
    bounds: Bounds = Bounds(),
    batches: Batches = Batches(),
    now: datetime | None = None,
) -> Refreshed:
    """Unless a refresh began less than `interval_s` ago (`force`: whenever). A failed fetch
    keeps the claim (the platform is asked again after the interval); a failed store gives it
    up. Either says why in the course's `problem`."""
    moment = now or datetime.now(UTC)
    claimed = _claim(engine, course, moment, interval_s, force)
    if isinstance(claimed, Refreshed):
        return claimed
    registration = registrations.by_id(engine, claimed.registration_id)
    if registration is None:
        return Refreshed(None, "the course's platform was removed")
    try:
        members = fetch_members(
            engine,
            registration,
            claimed.deployment_id,
            claimed.memberships_url,
            keep_names=keep_names,
            client=client,
            bounds=bounds,
        )
    except RosterProblem as problem:
        return _failed(engine, course, str(problem), give_up_claim=False)
    try:
        _store(engine, course, claimed.latest_generation, members, moment, batches)
    except DATABASE_ERRORS as error:
        return _failed(
            engine,
            course,
            f"the platform sent {len(members)} learner(s), but the database refused to store "
            f"them ({failure_reason(error)}): D9 tries again at the next staff launch",
            give_up_claim=True,
        )
    try:
        _forget_older(engine, course, batches)
    except DATABASE_ERRORS as error:
        # Seen by nobody; the next refresh forgets them.
        logger.warning("roster of course %s: older members kept: %s", course, failure_reason(error))
    return Refreshed(len(members))


def _failed(engine: Engine, course: str, problem: str, *, give_up_claim: bool) -> Refreshed:
    """Say why in the course's `problem` where the database lets us, and always in the log."""
    logger.warning("roster of course %s: %s", course, problem)
    values: dict[str, Any] = {"problem": problem}
    if give_up_claim:
        values["refresh_started_at"] = None
    try:
        with engine.begin() as connection:
            connection.execute(
                update(LtiRosterService)
                .where(LtiRosterService.context_key == course)
                .values(values)
            )
    except DATABASE_ERRORS as error:
        logger.warning(
            "roster of course %s: the problem was not recorded either: %s",
            course,
            failure_reason(error),
        )
    return Refreshed(None, problem)


def _pause(engine: Engine, batches: Batches) -> None:
    if engine.dialect.name == "sqlite":
        time.sleep(batches.pause_s)


def _store(
    engine: Engine,
    course: str,
    generation: int,
    members: list[Member],
    moment: datetime,
    batches: Batches,
) -> None:
    """A batch a transaction, then shown at once: readers see only the course's `generation`.
    A newer refresh shown already stays shown."""
    rows = [
        {
            "context_key": course,
            "generation": generation,
            "link_key": member.key,
            "status": member.status,
            "roles": " ".join(member.roles),
            "name": member.name,
            "email": member.email,
        }
        for member in members
    ]
    for start in range(0, len(rows), batches.rows):
        if start:
            _pause(engine, batches)
        with engine.begin() as connection:
            connection.execute(insert(LtiRosterMember), rows[start : start + batches.rows])
    with engine.begin() as connection:
        connection.execute(
            update(LtiRosterService)
            .where(
                LtiRosterService.context_key == course,
                LtiRosterService.generation < generation,
            )
            .values(generation=generation, fetched_at=moment, problem=None)
        )


def _forget_older(engine: Engine, course: str, batches: Batches) -> None:
    """Older than the generation shown (a refresh under way, newer, stays), in batches."""
    shown = (
        select(LtiRosterService.generation)
        .where(LtiRosterService.context_key == course)
        .scalar_subquery()
    )
    older = and_(LtiRosterMember.context_key == course, LtiRosterMember.generation < shown)
    while True:
        with engine.begin() as connection:
            batch = select(LtiRosterMember.link_key).where(older).limit(batches.rows)
            forgotten = connection.execute(
                delete(LtiRosterMember).where(older, LtiRosterMember.link_key.in_(batch))
            ).rowcount
        if not forgotten:
            return
        _pause(engine, batches)


@dataclass(frozen=True)
class RosterEntry:
    """A learner on the course's roster, and whether they opened D9 from the course."""

    key: str
    status: str
    roles: tuple[str, ...]
    name: str | None
    email: str | None
    # The learner they became, when they launched from this course; None: never opened.
    learner_id: str | None

    @property
    def short_id(self) -> str:
        return self.key[:SHORT_ID_CHARS]

    @property
    def label(self) -> str:
        return self.name or f"member {self.short_id}"


@dataclass(frozen=True)
class Roster:
    fetched_at: datetime
    problem: str | None
    members: tuple[RosterEntry, ...]

    @property
    def enrolled(self) -> int:
        return sum(member.status == ACTIVE for member in self.members)

    @property
    def not_opened(self) -> tuple[RosterEntry, ...]:
        """Active learners who never opened D9 from the course, by name (or short id)."""
        return tuple(
            sorted(
                (m for m in self.members if m.status == ACTIVE and m.learner_id is None),
                key=lambda member: (
                    member.name is None,
                    (member.name or "").casefold(),
                    member.key,
                ),
            )
        )

    def by_learner(self) -> dict[str, RosterEntry]:
        return {m.learner_id: m for m in self.members if m.learner_id is not None}


def roster_of(engine: Engine, course: str | None) -> Roster | None:
    """As last fetched whole, read in one statement; None: no course, or never fetched."""
    if course is None:
        return None
    with engine.connect() as connection:
        service = connection.execute(
            select(LtiRosterService.fetched_at, LtiRosterService.problem).where(
                LtiRosterService.context_key == course
            )
        ).first()
        if service is None or service.fetched_at is None:
            return None
        rows = connection.execute(
            select(
                LtiRosterMember.link_key,
                LtiRosterMember.status,
                LtiRosterMember.roles,
                LtiRosterMember.name,
                LtiRosterMember.email,
                LtiContextMember.learner_id,
            )
            .select_from(LtiRosterMember)
            .outerjoin(LtiLearner, LtiLearner.link_key == LtiRosterMember.link_key)
            .outerjoin(
                LtiContextMember,
                and_(
                    LtiContextMember.learner_id == LtiLearner.learner_id,
                    LtiContextMember.context_key == course,
                ),
            )
            .join(
                LtiRosterService,
                and_(
                    LtiRosterService.context_key == LtiRosterMember.context_key,
                    LtiRosterService.generation == LtiRosterMember.generation,
                ),
            )
            .where(LtiRosterMember.context_key == course)
            .order_by(LtiRosterMember.link_key)
        ).all()
    return Roster(
        fetched_at=as_utc(service.fetched_at),
        problem=service.problem,
        members=tuple(
            RosterEntry(
                key=row.link_key,
                status=row.status,
                roles=tuple(row.roles.split()),
                name=row.name,
                email=row.email,
                learner_id=row.learner_id,
            )
            for row in rows
        ),
    )
