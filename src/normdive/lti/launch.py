"""The launch: the id_token a platform posts back after the login, validated completely (LTI 1.3
core 5.1.3, 1EdTech Security Framework 5.1.3), or a Refusal that tells the platform's
administrator what is wrong. `validate` stores nothing; `consume` deletes the login's state and
nonce in the caller's transaction, so an id_token serves one launch only.
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from joserfc import jws, jwt
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwt import JWTClaimsRegistry
from sqlalchemy import Connection, Engine, delete, select

from normdive.like_named import like_named
from normdive.lti import registrations
from normdive.lti.login import LOGIN_TTL, secret_digest
from normdive.lti.platform_json import MAX_JSON_DEPTH, too_deep
from normdive.lti.platform_keys import same_key, signing_key
from normdive.lti.refusal import Refusal
from normdive.lti.registrations import Registration
from normdive.store.tables import (
    LTI_IDENTIFIER_LENGTH,
    LTI_SECRET_LENGTH,
    LTI_URL_LENGTH,
    LtiNonce,
    LtiState,
)

logger = logging.getLogger(__name__)

# The 1EdTech Security Framework requires RS256. Checked before any key is used, so `alg: none`
# and HS256 signed with the public key are refused first.
ID_TOKEN_ALGORITHM = "RS256"
# Clock skew allowed for exp and iat.
CLOCK_LEEWAY_S = 60
# A real id_token is 2 to 8 KiB (Canvas, with custom claims and AGS endpoints, about 6).
MAX_ID_TOKEN_BYTES = 32 * 1024
LTI_VERSION = "1.3.0"
# A state this tool mints: URL-safe base64 (login.SECRET_BYTES), within the column's length.
STATE_PATTERN = re.compile(rf"[A-Za-z0-9_-]{{1,{LTI_SECRET_LENGTH}}}")
LOGIN_TTL_MINUTES = int(LOGIN_TTL.total_seconds() // 60)
RESOURCE_LINK_REQUEST = "LtiResourceLinkRequest"
# Deep Linking 2.0: an instructor picking the lesson in the platform's content picker.
DEEP_LINKING_REQUEST = "LtiDeepLinkingRequest"
# Submission Review 1.0: a gradebook opening one learner's work (for_user) in the tool.
SUBMISSION_REVIEW_REQUEST = "LtiSubmissionReviewRequest"
MESSAGE_TYPES = (RESOURCE_LINK_REQUEST, DEEP_LINKING_REQUEST, SUBMISSION_REVIEW_REQUEST)
# The messages that name a resource link (LTI 1.3 core 5.3.5; Submission Review 1.0).
LINKED_MESSAGE_TYPES = (RESOURCE_LINK_REQUEST, SUBMISSION_REVIEW_REQUEST)
DEEP_LINKING_SETTINGS_CLAIM = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
RESOURCE_LINK_ITEM = "ltiResourceLink"

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
MESSAGE_TYPE_CLAIM = CLAIM + "message_type"
VERSION_CLAIM = CLAIM + "version"
DEPLOYMENT_ID_CLAIM = CLAIM + "deployment_id"
TARGET_LINK_URI_CLAIM = CLAIM + "target_link_uri"
RESOURCE_LINK_CLAIM = CLAIM + "resource_link"
ROLES_CLAIM = CLAIM + "roles"
CONTEXT_CLAIM = CLAIM + "context"
CUSTOM_CLAIM = CLAIM + "custom"
AGS_ENDPOINT_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
LAUNCH_PRESENTATION_CLAIM = CLAIM + "launch_presentation"
TOOL_PLATFORM_CLAIM = CLAIM + "tool_platform"
# A BCP 47 tag is short; a longer "locale" is not one.
MAX_LOCALE_CHARS = 35
# A title or platform name is shown, never matched: cut, not refused.
MAX_OPTIONAL_TEXT_CHARS = 255
# Submission Review 1.0: the user whose work is reviewed (user_id; names and roles optional).
FOR_USER_CLAIM = CLAIM + "for_user"

CLAIM_MESSAGES = {
    "iss": "The id_token's issuer (iss) is not the platform this login was started for.",
    "aud": "The id_token's audience (aud) does not name this tool's client id",
    "nonce": "The id_token's nonce is not the one this tool sent with the login.",
    "sub": "The id_token has no usable subject (sub): the launch names no user.",
    "iat": "The id_token's issue time (iat) is in the future, beyond 60 s of clock skew.",
    "exp": "The id_token's expiry (exp) is not a time.",
}


@dataclass(frozen=True)
class PendingLogin:
    """A login this tool started: lti_states' row."""

    state: str
    registration_id: int
    nonce: str
    target_link_uri: str
    # SHA-256 of the secret the login put in the platform's storage; None when it put none.
    storage_key: str | None = None
    relaunch_query: str | None = None


@dataclass(frozen=True)
class BrowserProof:
    """What the launch request shows of the browser that started the login."""

    # The state the browser's state cookie holds (None: it sent none).
    cookie_state: str | None
    # The secret the tool's launch page read back from the platform's storage (None: none).
    storage_secret: str | None = None
    # The request came from this tool's own page (its Origin is this tool's), as the launch
    # page's second post does; a form another site makes a browser post never does.
    from_own_page: bool = False


class NeedsPlatformStorage(Exception):
    """The browser kept no cookie, but the login put a secret in the platform's storage: the
    launch page must read it back (in the browser) and post the launch again with it."""

    def __init__(self, login: PendingLogin) -> None:
        super().__init__("the launch must read the platform's storage")
        self.login = login


@dataclass(frozen=True)
class Launch:
    """A validated resource link launch: who, from where, in which course, with which roles."""

    registration: Registration
    login: PendingLogin
    deployment_id: str
    subject: str
    resource_link_id: str
    roles: tuple[str, ...]
    context_id: str | None
    context_title: str | None
    custom: Mapping[str, str] = field(default_factory=dict)
    ags_endpoint: Mapping[str, Any] | None = None
    names_roles: Mapping[str, Any] | None = None
    message_type: str = RESOURCE_LINK_REQUEST
    # A deep linking request's settings (deep_link_return_url, data, ...); None otherwise.
    deep_linking: Mapping[str, Any] | None = None
    # A submission review request's for_user claim (its user_id checked); None otherwise.
    for_user: Mapping[str, Any] | None = None
    user_name: str | None = None
    # launch_presentation.locale, a BCP 47 tag such as "de-DE".
    locale: str | None = None
    # The learner's xAPI context.
    resource_link_title: str | None = None
    platform_name: str | None = None


def _pending(engine: Engine, state: str) -> PendingLogin:
    refused = Refusal(
        400,
        "unknown_state",
        "This launch's state is not one this tool issued, or it was used already, or the "
        f"login it belongs to is more than {LOGIN_TTL_MINUTES} minutes old. Launch the "
        "activity again from the platform. (A replayed launch is refused this way too.)",
    )
    if not STATE_PATTERN.fullmatch(state):
        raise refused
    with engine.connect() as connection:
        row = connection.execute(
            select(LtiState).where(
                LtiState.state == state, LtiState.expires_at >= datetime.now(UTC)
            )
        ).first()
    if row is None:
        raise refused
    return PendingLogin(
        **like_named(
            row,
            "state",
            "registration_id",
            "nonce",
            "target_link_uri",
            "storage_key",
            "relaunch_query",
        )
    )


def _bound_to_this_browser(login: PendingLogin, proof: BrowserProof) -> bool:
    if proof.cookie_state is not None and hmac.compare_digest(proof.cookie_state, login.state):
        return True
    if login.storage_key is None or proof.storage_secret is None or not proof.from_own_page:
        return False
    digest = secret_digest(proof.storage_secret)
    return hmac.compare_digest(digest, login.storage_key)


def _header(id_token: str) -> Mapping[str, Any]:
    try:
        return jws.extract_compact(id_token.encode("ascii")).headers()
    except (JoseError, ValueError, UnicodeEncodeError, RecursionError):
        raise Refusal(
            400, "malformed_id_token", "The id_token is not a signed JWT (JWS compact form)."
        ) from None


def _claims(
    engine: Engine, id_token: str, registration: Registration, login: PendingLogin
) -> dict[str, Any]:
    header = _header(id_token)
    algorithm = header.get("alg")
    if algorithm != ID_TOKEN_ALGORITHM:
        raise Refusal(
            401,
            "algorithm_refused",
            f"The id_token is signed with {str(algorithm)[:20]!r}; LTI 1.3 id_tokens must be "
            f"signed with {ID_TOKEN_ALGORITHM} by the platform's private key. (Unsigned "
            "tokens, alg none, and tokens signed with HS256 are always refused.)",
        )
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise Refusal(
            401,
            "no_kid",
            "The id_token's header names no key (kid), so it cannot be checked against the "
            "platform's key set.",
        )
    key = signing_key(engine, registration, kid)
    try:
        try:
            token = jwt.decode(id_token, key, algorithms=[ID_TOKEN_ALGORITHM])
        except BadSignatureError:
            # The stored key may be out of date: a platform can replace a key and keep its id.
            fresh = signing_key(engine, registration, kid, distrusted=key)
            if same_key(fresh, key):
                raise
            token = jwt.decode(id_token, fresh, algorithms=[ID_TOKEN_ALGORITHM])
    except BadSignatureError:
        raise Refusal(
            401,
            "bad_signature",
            "The id_token's signature does not verify with the platform's key it names: it "
            "was altered, or not signed by the registered platform.",
        ) from None
    except (JoseError, RecursionError):
        # RecursionError: claims nested thousands deep, which Python's json parser recurses on.
        raise Refusal(
            400, "malformed_id_token", "The id_token's content is not a set of JSON claims."
        ) from None
    if too_deep(token.claims):
        raise Refusal(
            400,
            "malformed_id_token",
            f"The id_token's claims nest deeper than {MAX_JSON_DEPTH} levels, which no "
            "launch's do.",
        )
    registry = JWTClaimsRegistry(
        leeway=CLOCK_LEEWAY_S,
        iss={"essential": True, "value": registration.issuer},
        aud={"essential": True, "value": registration.client_id},
        sub={"essential": True},
        exp={"essential": True},
        iat={"essential": True},
        nonce={"essential": True, "value": login.nonce},
    )
    try:
        registry.validate(token.claims)
    except ExpiredTokenError:
        raise Refusal(
            401,
            "expired",
            f"The id_token has expired (its exp is past, beyond {CLOCK_LEEWAY_S} s of clock "
            "skew). Launch again; if it keeps happening, check the clocks of the platform and "
            "this server.",
        ) from None
    except MissingClaimError as error:
        raise Refusal(
            401,
            "missing_claim",
            f"The id_token lacks claims LTI 1.3 requires ({error.claim}).",
        ) from None
    except InvalidClaimError as error:
        message = CLAIM_MESSAGES.get(
            error.claim, f"The id_token's {error.claim} claim is not valid."
        )
        if error.claim == "aud":
            message += f" ({registration.client_id})."
        raise Refusal(401, f"wrong_{error.claim}", message) from None
    return token.claims


def _authorized_party(claims: Mapping[str, Any], registration: Registration) -> None:
    """OIDC Core 3.1.3.7 as LTI 1.3 applies it: with several audiences, azp must be present;
    when present, it must be this tool's client id."""
    audience = claims["aud"]
    several = isinstance(audience, list) and len(audience) > 1
    azp = claims.get("azp")
    if (several and azp is None) or (azp is not None and azp != registration.client_id):
        raise Refusal(
            401,
            "wrong_azp",
            "The id_token names several audiences, and its authorized party (azp) is not this "
            f"tool's client id ({registration.client_id}).",
        )


def _string(claims: Mapping[str, Any], name: str, what: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value:
        raise Refusal(401, "missing_claim", f"The id_token lacks {what} ({name}).")
    return value


def _lti_claims(claims: Mapping[str, Any], registration: Registration, login: PendingLogin) -> None:
    message_type = claims.get(MESSAGE_TYPE_CLAIM)
    if message_type not in MESSAGE_TYPES:
        raise Refusal(
            400,
            "unsupported_message_type",
            f"The launch is a {str(message_type)[:40]!r} message; this tool takes "
            f"{' and '.join(MESSAGE_TYPES)}.",
        )
    version = claims.get(VERSION_CLAIM)
    if version != LTI_VERSION:
        raise Refusal(
            400,
            "unsupported_version",
            f"The launch says LTI version {str(version)[:20]!r}; this tool takes {LTI_VERSION}.",
        )
    deployment_id = _string(claims, DEPLOYMENT_ID_CLAIM, "a deployment id")
    if deployment_id not in registration.deployment_ids:
        raise Refusal(
            403,
            "unregistered_deployment",
            f"The launch comes from deployment {deployment_id[:80]!r} of {registration.issuer}, "
            "which is not registered here. If this deployment is yours, register it with "
            "`normdive lti register`.",
        )
    target = _string(claims, TARGET_LINK_URI_CLAIM, "a target link URI")
    if target != login.target_link_uri:
        raise Refusal(
            400,
            "wrong_target_link_uri",
            "The id_token's target link URI is not the one the platform's login request named.",
        )
    if message_type in LINKED_MESSAGE_TYPES:
        link = claims.get(RESOURCE_LINK_CLAIM)
        if not isinstance(link, Mapping) or not isinstance(link.get("id"), str) or not link["id"]:
            raise Refusal(401, "missing_claim", "The launch names no resource link (its id).")
    else:
        _deep_linking_settings(claims)
    if message_type == SUBMISSION_REVIEW_REQUEST:
        _submission_review_claims(claims)
    roles = claims.get(ROLES_CLAIM)
    if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
        raise Refusal(401, "missing_claim", "The launch's roles claim is not a list of roles.")


# Hosts that are this machine: a platform on one of them may use plain http (a secure
# context's "potentially trustworthy" origins, as browsers define them).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def is_return_address(url: str) -> bool:
    """https with a host, or http on this machine: never javascript:, data: or the like, which
    would run or show whatever the answer page's form pointed at."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return False
    if not host or parts.username is not None:
        return False
    loopback = host in LOOPBACK_HOSTS or host.endswith(".localhost")
    return parts.scheme == "https" or (parts.scheme == "http" and loopback)


def _deep_linking_settings(claims: Mapping[str, Any]) -> Mapping[str, Any]:
    settings = claims.get(DEEP_LINKING_SETTINGS_CLAIM)
    if not isinstance(settings, Mapping) or not isinstance(
        settings.get("deep_link_return_url"), str
    ):
        raise Refusal(
            401,
            "missing_claim",
            "The deep linking request has no deep_linking_settings with a deep_link_return_url.",
        )
    if not is_return_address(settings["deep_link_return_url"]):
        raise Refusal(
            400,
            "bad_return_url",
            "The deep linking request's deep_link_return_url is not an https address (or http "
            "on this machine), so the tool will not send its answer there.",
        )
    accepted = settings.get("accept_types")
    if not isinstance(accepted, list) or RESOURCE_LINK_ITEM not in accepted:
        raise Refusal(
            400,
            "unacceptable_content",
            f"The platform's content picker does not accept {RESOURCE_LINK_ITEM} items here, "
            "which is what this lesson is.",
        )
    return settings


def _submission_review_claims(claims: Mapping[str, Any]) -> None:
    """Submission Review 1.0, 4.2: for_user with its user_id, and the line item under review."""
    for_user = claims.get(FOR_USER_CLAIM)
    user_id = for_user.get("user_id") if isinstance(for_user, Mapping) else None
    if not isinstance(user_id, str) or not user_id:
        raise Refusal(
            401,
            "missing_claim",
            f"The submission review request names no user whose work is reviewed (its "
            f"{FOR_USER_CLAIM} claim with a user_id).",
        )
    _storable(user_id, f"{FOR_USER_CLAIM} user_id", "reviewed user's id", LTI_IDENTIFIER_LENGTH)
    ags = claims.get(AGS_ENDPOINT_CLAIM)
    if not isinstance(ags, Mapping) or not isinstance(ags.get("lineitem"), str):
        raise Refusal(
            401,
            "missing_claim",
            "The submission review request names no line item under review (the grade "
            f"service claim {AGS_ENDPOINT_CLAIM} with its lineitem).",
        )


def _storable(value: str, claim: str, what: str, limit: int) -> None:
    """A Refusal unless it fits `limit` and is printable (PostgreSQL's text cannot hold NUL; no
    identifier or URL a platform sends has an invisible formatting character)."""
    if len(value) > limit:
        raise Refusal(
            400,
            "claim_too_long",
            f"The id_token's {what} ({claim}) is {len(value)} characters long; this tool "
            f"keeps at most {limit}.",
        )
    if not value.isprintable():
        raise Refusal(
            400,
            "claim_malformed",
            f"The id_token's {what} ({claim}) holds characters that cannot be printed (control "
            "or formatting characters).",
        )


def _check_stored_claims(claims: Mapping[str, Any]) -> None:
    """Refuse a launch the database could not store (OpenID Connect Core 2 allows a sub of 255
    ASCII characters, as LTI 1.3 does a resource link's id)."""
    _storable(claims["sub"], "sub", "subject", LTI_IDENTIFIER_LENGTH)
    if claims[MESSAGE_TYPE_CLAIM] in LINKED_MESSAGE_TYPES:
        _storable(
            claims[RESOURCE_LINK_CLAIM]["id"],
            f"{RESOURCE_LINK_CLAIM} id",
            "resource link id",
            LTI_IDENTIFIER_LENGTH,
        )
    ags = claims.get(AGS_ENDPOINT_CLAIM)
    if isinstance(ags, Mapping):
        for name in ("lineitem", "lineitems"):
            url = ags.get(name)
            if isinstance(url, str):
                _storable(url, f"{AGS_ENDPOINT_CLAIM} {name}", f"{name} URL", LTI_URL_LENGTH)


def validate(engine: Engine, *, id_token: str, state: str, proof: BrowserProof) -> Launch:
    """The launch, or a Refusal; NeedsPlatformStorage when only the platform's storage can show
    the browser started the login."""
    if len(id_token) > MAX_ID_TOKEN_BYTES:
        raise Refusal(
            413,
            "id_token_too_large",
            f"The id_token is {len(id_token) // 1024} KiB; this tool takes at most "
            f"{MAX_ID_TOKEN_BYTES // 1024} KiB.",
        )
    if not id_token:
        raise Refusal(400, "no_id_token", "The launch carries no id_token.")
    login = _pending(engine, state)
    if not _bound_to_this_browser(login, proof):
        if login.storage_key is not None and proof.storage_secret is None:
            raise NeedsPlatformStorage(login)
        raise Refusal(
            403,
            "state_from_another_browser",
            "This launch's state was issued to another browser, or this browser kept neither "
            "the login's cookie (it blocks third-party cookies) nor the platform's storage. "
            "Launch the activity again from the platform in this browser, or open the lesson "
            "in a window of its own.",
            relaunch_query=login.relaunch_query,
        )
    registration = registrations.by_id(engine, login.registration_id)
    if registration is None:
        raise Refusal(
            400,
            "unregistered_platform",
            "The platform this login was started for was removed since.",
        )
    claims = _blank_as_absent(_claims(engine, id_token, registration, login))
    _authorized_party(claims, registration)
    _lti_claims(claims, registration, login)
    _check_stored_claims(claims)
    context = claims.get(CONTEXT_CLAIM)
    context_id = context.get("id") if isinstance(context, Mapping) else None
    context_title = context.get("title") if isinstance(context, Mapping) else None
    custom = claims.get(CUSTOM_CLAIM)
    ags = claims.get(AGS_ENDPOINT_CLAIM)
    names_roles = claims.get(NRPS_CLAIM)
    message_type = claims[MESSAGE_TYPE_CLAIM]
    deep_linking = message_type == DEEP_LINKING_REQUEST
    return Launch(
        registration=registration,
        login=login,
        message_type=message_type,
        deep_linking=_deep_linking_settings(claims) if deep_linking else None,
        deployment_id=claims[DEPLOYMENT_ID_CLAIM],
        subject=claims["sub"],
        resource_link_id="" if deep_linking else claims[RESOURCE_LINK_CLAIM]["id"],
        roles=tuple(claims[ROLES_CLAIM]),
        context_id=context_id if isinstance(context_id, str) and context_id else None,
        context_title=context_title if isinstance(context_title, str) else None,
        custom=(
            {k: v for k, v in custom.items() if isinstance(v, str)}
            if isinstance(custom, Mapping)
            else {}
        ),
        ags_endpoint=ags if isinstance(ags, Mapping) else None,
        names_roles=names_roles if isinstance(names_roles, Mapping) else None,
        for_user=claims[FOR_USER_CLAIM] if message_type == SUBMISSION_REVIEW_REQUEST else None,
        locale=_presentation_locale(claims),
        user_name=person_name(claims),
        resource_link_title=None if deep_linking else _text(claims, RESOURCE_LINK_CLAIM, "title"),
        platform_name=_text(claims, TOOL_PLATFORM_CLAIM, "name")
        or _text(claims, TOOL_PLATFORM_CLAIM, "product_family_code"),
    )


# The claims whose members a platform may send as "" for "none": Moodle names a resource
# link's line item "" once the tool made one in the container.
CLAIMS_WITH_OPTIONAL_MEMBERS = (
    AGS_ENDPOINT_CLAIM,
    NRPS_CLAIM,
    CONTEXT_CLAIM,
    FOR_USER_CLAIM,
    LAUNCH_PRESENTATION_CLAIM,
    RESOURCE_LINK_CLAIM,
)


def _blank_as_absent(claims: Mapping[str, Any]) -> dict[str, Any]:
    cleaned = dict(claims)
    for name in CLAIMS_WITH_OPTIONAL_MEMBERS:
        claim = claims.get(name)
        if isinstance(claim, Mapping):
            cleaned[name] = {
                key: value
                for key, value in claim.items()
                if not (isinstance(value, str) and not value.strip())
            }
    return cleaned


MAX_NAME_CHARS = 200


def person_name(claims: Mapping[str, Any]) -> str | None:
    """OpenID Connect's name, else given_name and family_name, when printable (the id_token's
    and the for_user claim's)."""
    name = claims.get("name")
    if isinstance(name, str) and name.strip() and name.isprintable():
        return name.strip()[:MAX_NAME_CHARS]
    parts = [claims.get("given_name"), claims.get("family_name")]
    given = [part for part in parts if isinstance(part, str) and part.isprintable()]
    joined = " ".join(given).strip()
    return joined[:MAX_NAME_CHARS] if joined else None


def _text(claims: Mapping[str, Any], claim: str, name: str) -> str | None:
    """An optional text of an object claim; None when missing or malformed, never refused."""
    found = claims.get(claim)
    value = found.get(name) if isinstance(found, Mapping) else None
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:MAX_OPTIONAL_TEXT_CHARS]


def _presentation_locale(claims: Mapping[str, Any]) -> str | None:
    """LTI 1.3, 5.4.4; a malformed one is ignored, as the claim is optional."""
    presentation = claims.get(LAUNCH_PRESENTATION_CLAIM)
    locale = presentation.get("locale") if isinstance(presentation, Mapping) else None
    if isinstance(locale, str) and 0 < len(locale) <= MAX_LOCALE_CHARS:
        return locale
    return None


def consume(connection: Connection, login: PendingLogin) -> None:
    """Delete the login's state and nonce in the caller's transaction. A Refusal when the
    nonce is gone: another request used this id_token first (a replay racing the launch)."""
    used = connection.execute(
        delete(LtiNonce).where(
            LtiNonce.nonce == login.nonce, LtiNonce.expires_at >= datetime.now(UTC)
        )
    ).rowcount
    if used != 1:
        raise Refusal(
            400,
            "nonce_used",
            "This launch's nonce was used already: the id_token was replayed. Launch again "
            "from the platform.",
        )
    connection.execute(delete(LtiState).where(LtiState.state == login.state))
