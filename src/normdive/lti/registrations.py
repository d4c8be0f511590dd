"""The platforms registered to launch the lesson: one (issuer, client id) each, with its URLs,
deployments and how 8.5 is known to be done (`normdive lti register`, `list`, `remove`).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy import ColumnElement, Engine, delete, insert, select
from sqlalchemy.exc import IntegrityError

from normdive.config import checked_by, origin_of
from normdive.like_named import like_named
from normdive.store.tables import (
    LTI_IDENTIFIER_LENGTH,
    LTI_URL_LENGTH,
    LtiDeployment,
    LtiRegistration,
    LtiUsedInvite,
)


class PrerequisiteMode(StrEnum):
    """How lesson 8.5 is known to be done for a platform's learners."""

    # The platform gates the lesson: a launch means 8.5 is done.
    PLATFORM = "platform"
    # POST /api/prerequisite, as outside an LMS.
    REPORT = "report"
    # CUSTOM_PREREQUISITE_PARAMETER is "true" when done.
    CUSTOM = "custom"


DEFAULT_PREREQUISITE_MODE = PrerequisiteMode.PLATFORM
# The administrator sets it to a substitution of the course's completion data.
CUSTOM_PREREQUISITE_PARAMETER = "lesson_8_5_done"
# Plain http only on this machine: keys and tokens never cross a network in clear.
LOOPBACK_NAMES = frozenset({"localhost"})
# Every name under it is this machine too (RFC 6761, section 6.3).
LOOPBACK_DOMAIN = ".localhost"


class RegistrationProblem(ValueError):
    """What is wrong with a registration as given, in one line for the administrator."""


class UnknownRegistration(LookupError):
    pass


@dataclass(frozen=True)
class Registration:
    id: int
    issuer: str
    client_id: str
    auth_login_url: str
    token_url: str
    jwks_url: str
    deployment_ids: tuple[str, ...]
    prerequisite_mode: PrerequisiteMode
    frame_origins: tuple[str, ...] = ()

    def framing_origins(self) -> tuple[str, ...]:
        """The issuer's, the login URL's, and the --frame-origin hosts (Canvas's courses are on
        school.instructure.com, its issuer canvas.instructure.com)."""
        found = [origin_of(self.issuer), origin_of(self.auth_login_url), *self.frame_origins]
        return tuple(dict.fromkeys(origin for origin in found if origin is not None))


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address `host` writes, in any form a connect would take it: dotted, and the
    short and numeric IPv4 forms inet_aton reads (127.1, 2130706433, 0x7f.1); None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _is_loopback(host: str) -> bool:
    """A loopback name or address (IPv4-mapped too), or the unspecified address, which a
    connect takes for this machine."""
    if host in LOOPBACK_NAMES or host.endswith(LOOPBACK_DOMAIN):
        return True
    address = _address(host)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address is not None and (address.is_loopback or address.is_unspecified)


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a platform's endpoint, or None."""
    if len(url) > LTI_URL_LENGTH:
        return f"longer than {LTI_URL_LENGTH} characters"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return "not a URL"
    if not host:
        return "not an absolute URL (https://host/path)"
    if parts.fragment:
        return "has a fragment (#...), which a request never sends"
    if parts.scheme == "https" or (parts.scheme == "http" and _is_loopback(host)):
        return None
    return "must be https (plain http only for this machine: localhost, 127.0.0.1, ::1)"


def registrant_url_problem(url: str, *, this_machine_allowed: bool) -> str | None:
    """url_problem, and this machine only when `this_machine_allowed`: a registrant cannot make
    the tool knock on its own ports. Refused before any connection, so no refusal depends on
    what listens there."""
    problem = url_problem(url)
    if problem is not None:
        return problem
    if not this_machine_allowed and _is_loopback(urlsplit(url).hostname or ""):
        return "names this machine, where no platform registering itself is"
    return None


Endpoint = Annotated[str, checked_by(url_problem)]


class RegistrationInput(BaseModel):
    """A registration as an administrator gives it, validated."""

    model_config = ConfigDict(frozen=True, str_strip_whitespace=True)

    issuer: str = Field(min_length=1, max_length=LTI_IDENTIFIER_LENGTH)
    client_id: str = Field(min_length=1, max_length=LTI_IDENTIFIER_LENGTH)
    auth_login_url: Endpoint
    token_url: Endpoint
    jwks_url: Endpoint
    deployment_ids: tuple[str, ...] = Field(min_length=1)
    prerequisite_mode: PrerequisiteMode = DEFAULT_PREREQUISITE_MODE
    frame_origins: tuple[str, ...] = ()

    @field_validator("frame_origins")
    @classmethod
    def _origins(cls, origins: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = []
        for given in origins:
            origin = origin_of(given.strip())
            if origin is None or origin != given.strip().rstrip("/").lower():
                raise ValueError(f"{given!r} is not an origin (https://host or https://host:port)")
            problem = url_problem(origin)
            if problem is not None:
                raise ValueError(f"{given!r}: {problem}")
            cleaned.append(origin)
        return tuple(dict.fromkeys(cleaned))

    @field_validator("deployment_ids")
    @classmethod
    def _deployments(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = tuple(dict.fromkeys(i.strip() for i in ids))
        if any(not i or len(i) > LTI_IDENTIFIER_LENGTH for i in cleaned):
            raise ValueError(f"each deployment id has 1 to {LTI_IDENTIFIER_LENGTH} characters")
        return cleaned


def validated(**fields: object) -> RegistrationInput:
    """The registration as given, or RegistrationProblem naming each field that is wrong."""
    try:
        return RegistrationInput.model_validate(fields)
    except ValidationError as error:
        lines = [
            f"{'.'.join(str(p) for p in problem['loc'])}: {problem['msg']}"
            for problem in error.errors()
        ]
        raise RegistrationProblem("; ".join(lines)) from None


class InviteUsed(RegistrationProblem):
    pass


INVITE_USED = (
    "this registration URL has registered a platform already, and each registers one; ask "
    "the tool's operator for a new one (normdive lti invite)"
)


def register(
    engine: Engine, given: RegistrationInput, *, invite: str | None = None
) -> Registration:
    """RegistrationProblem when the issuer and client id are taken; InviteUsed when `invite`
    (an invitation's digest, stored in the same transaction) registered a platform already."""
    storing = "registration"
    try:
        with engine.begin() as connection:
            registration_id = connection.execute(
                insert(LtiRegistration)
                .values(
                    issuer=given.issuer,
                    client_id=given.client_id,
                    auth_login_url=given.auth_login_url,
                    token_url=given.token_url,
                    jwks_url=given.jwks_url,
                    frame_origins=list(given.frame_origins),
                    prerequisite_mode=given.prerequisite_mode.value,
                )
                .returning(LtiRegistration.id)
            ).scalar_one()
            connection.execute(
                insert(LtiDeployment),
                [
                    {"registration_id": registration_id, "deployment_id": deployment}
                    for deployment in given.deployment_ids
                ],
            )
            if invite is not None:
                # Its key makes it once under any concurrency: a racing one stores nothing.
                storing = "invite"
                connection.execute(
                    insert(LtiUsedInvite).values(invite=invite, registration_id=registration_id)
                )
    except IntegrityError:
        if storing == "invite":
            raise InviteUsed(INVITE_USED) from None
        raise RegistrationProblem(
            f"issuer {given.issuer} with client id {given.client_id} is registered already; "
            "remove it first (normdive lti remove) to register it again"
        ) from None
    found = find(engine, given.issuer, given.client_id)
    assert found is not None  # just stored
    return found


def _registrations(engine: Engine, *conditions: ColumnElement[bool]) -> list[Registration]:
    with engine.connect() as connection:
        rows = connection.execute(
            select(LtiRegistration).where(*conditions).order_by(LtiRegistration.id)
        ).all()
        ids = [row.id for row in rows]
        deployments: dict[int, list[str]] = {i: [] for i in ids}
        if ids:
            for registration_id, deployment_id in connection.execute(
                select(LtiDeployment.registration_id, LtiDeployment.deployment_id)
                .where(LtiDeployment.registration_id.in_(ids))
                .order_by(LtiDeployment.deployment_id)
            ):
                deployments[registration_id].append(deployment_id)
    return [
        Registration(
            **like_named(
                row, "id", "issuer", "client_id", "auth_login_url", "token_url", "jwks_url"
            ),
            deployment_ids=tuple(deployments[row.id]),
            prerequisite_mode=PrerequisiteMode(row.prerequisite_mode),
            frame_origins=tuple(row.frame_origins),
        )
        for row in rows
    ]


def all_registrations(engine: Engine) -> list[Registration]:
    return _registrations(engine)


def find(engine: Engine, issuer: str, client_id: str | None) -> Registration | None:
    """With no client id, the issuer's only registration (None when it has several)."""
    if client_id is not None:
        found = _registrations(
            engine, LtiRegistration.issuer == issuer, LtiRegistration.client_id == client_id
        )
    else:
        found = _registrations(engine, LtiRegistration.issuer == issuer)
    return found[0] if len(found) == 1 else None


def by_id(engine: Engine, registration_id: int) -> Registration | None:
    found = _registrations(engine, LtiRegistration.id == registration_id)
    return found[0] if found else None


def remove(engine: Engine, issuer: str, client_id: str) -> None:
    """Remove a registration with its deployments, logins in flight and cached keys.
    UnknownRegistration when there is none. Learners it launched keep their progress."""
    with engine.begin() as connection:
        removed = connection.execute(
            delete(LtiRegistration).where(
                LtiRegistration.issuer == issuer, LtiRegistration.client_id == client_id
            )
        ).rowcount
    if not removed:
        raise UnknownRegistration(f"no registration for issuer {issuer} and client id {client_id}")


def describe(registration: Registration) -> Sequence[str]:
    """The registration in lines, as `normdive lti list` shows it."""
    return (
        f"issuer:         {registration.issuer}",
        f"client id:      {registration.client_id}",
        f"auth login URL: {registration.auth_login_url}",
        f"token URL:      {registration.token_url}",
        f"JWKS URL:       {registration.jwks_url}",
        f"deployment ids: {', '.join(registration.deployment_ids)}",
        f"8.5 checked by: {registration.prerequisite_mode.value}",
        f"may frame it:   {' '.join(registration.framing_origins())}",
    )


def invite_used(engine: Engine, invite: str) -> bool:
    with engine.connect() as connection:
        found = connection.execute(
            select(LtiUsedInvite.invite).where(LtiUsedInvite.invite == invite)
        ).first()
    return found is not None
