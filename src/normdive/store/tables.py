"""The progress store's tables, as typed SQLAlchemy 2 declarative models.

`learners` holds anonymous ids; `events` is each learner's append-only history;
`prediction_tallies` counts learners per first prediction, kept with the events that add to
it; `learner_snapshots` keeps each learner's folded history as a starting point for readers.
The `lti_*` tables hold what an LTI 1.3 launch needs on any worker (normdive.lti): the
platforms registered, their deployments, the logins in flight (states and nonces), the
platforms' key sets, the tool's own keys, and which learner and course a launch stands for.
The `xapi_*` tables hold the Learning Record Stores statements go to and the outbox of events
whose statements are due (normdive.xapi), and lti_learner_links what each launch said of its
resource link. The Alembic migrations under store/migrations/ create exactly these (a test
compares the two). Portable types only: the same models run on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    CHAR,
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Select,
    String,
    Text,
    UniqueConstraint,
    func,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# A learner id is 128 random bits written as 32 lowercase hex characters.
LEARNER_ID_LENGTH = 32
# A keyed hash of the address that started a learner: HMAC-SHA256, 64 hex characters.
ADDRESS_KEY_LENGTH = 64
# Longest event kind name; EventKind values stay well under it.
EVENT_KIND_LENGTH = 40

# Named constraints, so migrations on any backend refer to the same names.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# LTI 1.3 caps its identifiers (deployment_id, context and resource link ids) at 255 ASCII
# characters; issuers, client ids and subjects are no longer in practice.
LTI_IDENTIFIER_LENGTH = 255
# A URL a registration names (login, token, key set); browsers handle 2,048 everywhere.
LTI_URL_LENGTH = 2048
# States and nonces the tool mints: secrets.token_urlsafe(32) is 43 characters.
LTI_SECRET_LENGTH = 64
# SHA-256 in hex: the key of a (platform, subject) or (platform, context) pair.
LTI_DIGEST_LENGTH = 64
# The longest prerequisite mode name (normdive.lti.registrations.PrerequisiteMode).
LTI_MODE_LENGTH = 20

# PostgreSQL stores payloads as JSONB; elsewhere the generic JSON type (text on SQLite).
PAYLOAD_TYPE = JSON().with_variant(JSONB(), "postgresql")
# SQLite only auto-numbers an INTEGER PRIMARY KEY, so BIGINT becomes INTEGER there.
EVENT_ID_TYPE = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Learner(Base):
    __tablename__ = "learners"
    __table_args__ = (
        # Learners one address started lately, newest first (the new-learner limit), 0003.
        Index("ix_learners_created_by_created_at", "created_by", "created_at"),
    )

    id: Mapped[str] = mapped_column(CHAR(LEARNER_ID_LENGTH), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )
    # HMAC of the client address whose first write stored this learner (never the address
    # itself); None for learners stored by the host platform, an operator, or before 0003.
    created_by: Mapped[str | None] = mapped_column(CHAR(ADDRESS_KEY_LENGTH), nullable=True)


class EventRecord(Base):
    __tablename__ = "events"
    __table_args__ = (
        # One learner's history, in order (every page view).
        Index("ix_events_learner_id_id", "learner_id", "id"),
        # Every learner's first event of a kind (the predictions aggregate), migration 0002.
        Index("ix_events_kind_learner_id_id", "kind", "learner_id", "id"),
    )

    id: Mapped[int] = mapped_column(EVENT_ID_TYPE, Identity(), primary_key=True)
    learner_id: Mapped[str] = mapped_column(
        CHAR(LEARNER_ID_LENGTH),
        ForeignKey("learners.id", ondelete="CASCADE"),
        nullable=False,
    )
    kind: Mapped[str] = mapped_column(String(EVENT_KIND_LENGTH), nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(PAYLOAD_TYPE, nullable=False)
    # Server time: the database's clock, never the app's.
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )


# Longest question or answer a tally names: a row key, a choice id or an outcome id.
TALLY_KEY_LENGTH = 40


class PredictionTally(Base):
    """How many learners made each first prediction, counted as the prediction is appended, in
    the same transaction (Store.append_decided), so reading "how everyone predicted" is one
    small table, whatever the number of learners (migration 0004 counted what came before).

    question "" is the opening prediction (answer: the choice id, "" if the payload had none);
    otherwise the row key, and the answer its outcome id."""

    __tablename__ = "prediction_tallies"

    question: Mapped[str] = mapped_column(String(TALLY_KEY_LENGTH), primary_key=True)
    answer: Mapped[str] = mapped_column(String(TALLY_KEY_LENGTH), primary_key=True)
    learners: Mapped[int] = mapped_column(Integer, nullable=False)


# lesson_key: progress.history.lesson_key, 16 hex characters.
SNAPSHOT_LESSON_KEY_LENGTH = 16


class LearnerSnapshot(Base):
    """One learner's History (progress/history.py) as of `last_event_id`, kept so that a
    server that has not seen the learner, and the instructor view, read one row instead of
    their whole history. Only a starting point, never the truth: a reader extends it by the
    learner's events after `last_event_id`, and folds the history again when `lesson_key` is
    not the lesson's own (content edited since). Written after appends, only forwards
    (store.snapshots.Snapshots.keep); migration 0006 made it empty, and readers fill it."""

    __tablename__ = "learner_snapshots"

    learner_id: Mapped[str] = mapped_column(
        CHAR(LEARNER_ID_LENGTH),
        ForeignKey("learners.id", ondelete="CASCADE"),
        primary_key=True,
    )
    lesson_key: Mapped[str] = mapped_column(String(SNAPSHOT_LESSON_KEY_LENGTH), nullable=False)
    last_event_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    body: Mapped[str] = mapped_column(Text, nullable=False)  # History.to_json(), as JSON text
    # progress.report.summary_record(History), as JSON text: all the instructor view reads.
    summary: Mapped[str] = mapped_column(Text, nullable=False)


class LtiRegistration(Base):
    """A platform (an LMS) registered to launch the lesson: one (issuer, client id) pair."""

    __tablename__ = "lti_registrations"
    __table_args__ = (UniqueConstraint("issuer", "client_id"),)

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    issuer: Mapped[str] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=False)
    client_id: Mapped[str] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=False)
    # Where the tool sends the browser to authenticate (OIDC authorization endpoint).
    auth_login_url: Mapped[str] = mapped_column(String(LTI_URL_LENGTH), nullable=False)
    # Where the tool asks for an access token for the platform's services (OAuth 2).
    token_url: Mapped[str] = mapped_column(String(LTI_URL_LENGTH), nullable=False)
    # The platform's public keys, which sign its id_tokens.
    jwks_url: Mapped[str] = mapped_column(String(LTI_URL_LENGTH), nullable=False)
    # Origins that may frame the lesson for this platform's learners besides the issuer's and
    # the login URL's (a JSON list of "https://host[:port]"): where the course pages are.
    frame_origins: Mapped[list[str]] = mapped_column(PAYLOAD_TYPE, nullable=False)
    # How lesson 8.5 is known to be done for this platform's learners.
    prerequisite_mode: Mapped[str] = mapped_column(String(LTI_MODE_LENGTH), nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )


class LtiDeployment(Base):
    """A deployment of the tool on a registered platform: launches name one of these."""

    __tablename__ = "lti_deployments"
    __table_args__ = (PrimaryKeyConstraint("registration_id", "deployment_id"),)

    registration_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_registrations.id", ondelete="CASCADE"), nullable=False
    )
    deployment_id: Mapped[str] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=False)


class LtiState(Base):
    """A login in flight: the state the tool sent the platform, the nonce the id_token must
    carry back, and the target the launch must name. Deleted by the launch that uses it."""

    __tablename__ = "lti_states"
    __table_args__ = (
        Index("ix_lti_states_expires_at", "expires_at"),
        Index("ix_lti_states_created_by_expires_at", "created_by", "expires_at"),
    )

    state: Mapped[str] = mapped_column(String(LTI_SECRET_LENGTH), primary_key=True)
    registration_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_registrations.id", ondelete="CASCADE"), nullable=False
    )
    nonce: Mapped[str] = mapped_column(String(LTI_SECRET_LENGTH), nullable=False)
    target_link_uri: Mapped[str] = mapped_column(String(LTI_URL_LENGTH), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    # SHA-256 (hex) of the secret the login put in the platform's storage (LTI client-side
    # postMessages), when the platform offered it: the launch's other proof of the browser.
    storage_key: Mapped[str | None] = mapped_column(CHAR(LTI_DIGEST_LENGTH), nullable=True)
    # The login's parameters, to start it again in a window of its own (the last resort when
    # the browser keeps neither a cookie nor the platform's storage).
    relaunch_query: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The keyed hash of the client address that began the login (web.security.ratelimit's
    # address_key), for the limit on logins begun and not finished.
    created_by: Mapped[str | None] = mapped_column(CHAR(ADDRESS_KEY_LENGTH), nullable=True)


class LtiUsedInvite(Base):
    """A dynamic registration invitation that registered a platform: each registers one."""

    __tablename__ = "lti_used_invites"

    # SHA-256 (hex) of the invitation's random part (lti.dynamic_registration.invite_digest).
    invite: Mapped[str] = mapped_column(CHAR(LTI_DIGEST_LENGTH), primary_key=True)
    registration_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_registrations.id", ondelete="CASCADE"), nullable=False
    )
    used_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )


class LtiNonce(Base):
    """A nonce the tool minted and no id_token has used yet: a launch deletes it, so a
    replayed id_token finds it gone."""

    __tablename__ = "lti_nonces"
    __table_args__ = (Index("ix_lti_nonces_expires_at", "expires_at"),)

    nonce: Mapped[str] = mapped_column(String(LTI_SECRET_LENGTH), primary_key=True)
    registration_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_registrations.id", ondelete="CASCADE"), nullable=False
    )
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class LtiPlatformKeySet(Base):
    """The last key set fetched from a registration's JWKS URL (RFC 7517 JSON), shared by
    every worker."""

    __tablename__ = "lti_platform_key_sets"

    registration_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_registrations.id", ondelete="CASCADE"), primary_key=True
    )
    key_set: Mapped[dict[str, Any]] = mapped_column(PAYLOAD_TYPE, nullable=False)
    fetched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class LtiToolKey(Base):
    """One of the tool's own signing keys (a private JWK): the newest one not retired signs;
    all not retired are published in the tool's key set."""

    __tablename__ = "lti_tool_keys"

    kid: Mapped[str] = mapped_column(String(LTI_SECRET_LENGTH), primary_key=True)
    private_jwk: Mapped[dict[str, Any]] = mapped_column(PAYLOAD_TYPE, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class LtiLearner(Base):
    """The learner a platform's user is: SHA-256 of (issuer, client id, deployment id, sub)
    -> learner id, so the same person launching again, from any device, resumes; and their
    name as their latest launch gave it, where the operator keeps names (a review names them)."""

    __tablename__ = "lti_learners"

    link_key: Mapped[str] = mapped_column(CHAR(LTI_DIGEST_LENGTH), primary_key=True)
    learner_id: Mapped[str] = mapped_column(
        CHAR(LEARNER_ID_LENGTH),
        ForeignKey("learners.id", ondelete="CASCADE"),
        nullable=False,
        unique=True,
    )
    name: Mapped[str | None] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=True)


# A course member's role there (normdive.lti.roles.CourseRole's values); a course's learners
# are its members who are not staff (course_learners).
LTI_COURSE_ROLE_LENGTH = 10
STAFF_COURSE_ROLE = "staff"


class LtiContextMember(Base):
    """A user launched from a course (an LTI context): SHA-256 of (issuer, client id,
    deployment id, context id), when they last launched from it, and their role there as that
    launch showed it (staff are members, but not the course's learners)."""

    __tablename__ = "lti_context_members"
    __table_args__ = (
        PrimaryKeyConstraint("context_key", "learner_id"),
        # A learner's latest course (which aggregate their page shows).
        Index("ix_lti_context_members_learner_id_last_launch_at", "learner_id", "last_launch_at"),
    )

    context_key: Mapped[str] = mapped_column(CHAR(LTI_DIGEST_LENGTH), nullable=False)
    learner_id: Mapped[str] = mapped_column(
        CHAR(LEARNER_ID_LENGTH), ForeignKey("learners.id", ondelete="CASCADE"), nullable=False
    )
    last_launch_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    course_role: Mapped[str] = mapped_column(
        String(LTI_COURSE_ROLE_LENGTH), server_default="learner", nullable=False
    )


def course_learners(context_key: Any) -> Select[Any]:
    """The learner ids of a course's learners: its members but its staff. `context_key` is a
    context key or a bound parameter standing for one."""
    return select(LtiContextMember.learner_id).where(
        LtiContextMember.context_key == context_key,
        LtiContextMember.course_role != STAFF_COURSE_ROLE,
    )


# A grade target's status and line item source (normdive.lti.passback.TargetStatus and
# LineitemSource): the longest name is well under these.
LTI_TARGET_STATUS_LENGTH = 10
LTI_LINEITEM_SOURCE_LENGTH = 10


class LtiGradeTarget(Base):
    """Where a learner's score goes: a resource link's line item on a platform that offered
    the Assignment and Grade Services score scope in a launch. `target_key` is SHA-256 of
    (issuer, client id, deployment id, resource link id). Each target is sent, retried and
    reported on its own (normdive.lti.passback; migration 0009 added its state)."""

    __tablename__ = "lti_grade_targets"
    __table_args__ = (
        PrimaryKeyConstraint("learner_id", "target_key"),
        # The targets due to be sent, soonest first (every round of the passback worker).
        Index("ix_lti_grade_targets_due_at", "due_at"),
    )

    learner_id: Mapped[str] = mapped_column(
        CHAR(LEARNER_ID_LENGTH), ForeignKey("learners.id", ondelete="CASCADE"), nullable=False
    )
    target_key: Mapped[str] = mapped_column(CHAR(LTI_DIGEST_LENGTH), nullable=False)
    registration_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_registrations.id", ondelete="CASCADE"), nullable=False
    )
    # The platform's user (the launch's sub): the score's userId.
    user_id: Mapped[str] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=False)
    resource_link_id: Mapped[str] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=False)
    # The launch's line item, or the one the tool created in `lineitems_url` (None until then).
    lineitem_url: Mapped[str | None] = mapped_column(String(LTI_URL_LENGTH), nullable=True)
    lineitems_url: Mapped[str | None] = mapped_column(String(LTI_URL_LENGTH), nullable=True)
    # The last score the platform took (its JSON, less the timestamp): not sent again. The
    # latest timestamp a score was sent with, kept before its answer: the next is later.
    sent_score: Mapped[dict[str, Any] | None] = mapped_column(PAYLOAD_TYPE, nullable=True)
    sent_timestamp: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # What the platform last made of this target (passback.TargetStatus): due (not tried yet),
    # sent, failing (an outage: tried again at due_at), refused, gone, foreign.
    status: Mapped[str] = mapped_column(
        String(LTI_TARGET_STATUS_LENGTH), server_default="due", nullable=False
    )
    # When the target is tried next; None: nothing to send until the learner's score changes
    # (or, for a gone line item, until a launch names one).
    due_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Outage answers in a row: the backoff's exponent.
    attempts: Mapped[int] = mapped_column(Integer, server_default="0", nullable=False)
    # Grows with each write that may change the learner's score, so that a send finishing
    # after such a write leaves the target due instead of sent.
    score_version: Mapped[int] = mapped_column(Integer, server_default="0", nullable=False)
    # Who made lineitem_url (passback.LineitemSource): None, the launch (or none yet).
    lineitem_source: Mapped[str | None] = mapped_column(
        String(LTI_LINEITEM_SOURCE_LENGTH), nullable=True
    )
    # The score the platform refused (its JSON, less the timestamp): not sent again unchanged.
    refused_score: Mapped[dict[str, Any] | None] = mapped_column(PAYLOAD_TYPE, nullable=True)
    # The platform's last answer: its HTTP status (None: no answer) and the start of its words.
    last_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_answer: Mapped[str | None] = mapped_column(Text, nullable=True)
    # What the last try means, in words for the platform's administrator.
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    updated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class LtiLinkLineitem(Base):
    """The line item this tool made (or found) for a resource link whose launches name only
    the line items container: one per (issuer, client id, deployment id, resource link id),
    the grade targets' `target_key`, shared by all the link's learners. A sender claims the
    row (unique) before it looks for or creates the line item, so that two learners' first
    scores at once make one line item (normdive.lti.passback)."""

    __tablename__ = "lti_link_lineitems"

    link_key: Mapped[str] = mapped_column(CHAR(LTI_DIGEST_LENGTH), primary_key=True)
    registration_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_registrations.id", ondelete="CASCADE"), nullable=False
    )
    # None while a sender is finding or creating it.
    lineitem_url: Mapped[str | None] = mapped_column(String(LTI_URL_LENGTH), nullable=True)
    # Until when the sender that claimed the row holds it; None: nobody is creating it.
    claimed_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


# A roster member's status as the platform names it (NRPS 2.0: Active, Inactive, and
# Deleted in a differences answer): the longest is well under this.
LTI_ROSTER_STATUS_LENGTH = 10


class LtiRosterService(Base):
    """A course's Names and Role Provisioning Service, as its launches named it: the context
    key of lti_context_members, and where and how its memberships were last fetched
    (normdive.lti.roster; migration 0010)."""

    __tablename__ = "lti_roster_services"

    context_key: Mapped[str] = mapped_column(CHAR(LTI_DIGEST_LENGTH), primary_key=True)
    registration_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_registrations.id", ondelete="CASCADE"), nullable=False
    )
    deployment_id: Mapped[str] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=False)
    memberships_url: Mapped[str] = mapped_column(String(LTI_URL_LENGTH), nullable=False)
    # When a refresh last began (None: never): one refresh per interval, whoever asks.
    refresh_started_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    # When the members below were fetched whole (None: never).
    fetched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Why the last refresh kept the members as they were, in words (None: it did not fail).
    problem: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The members readers see are this generation's (0: those stored before generations).
    generation: Mapped[int] = mapped_column(Integer, server_default="0", nullable=False)
    # The newest generation a refresh was given: each stores its members under its own, in
    # short transactions, and makes it the one seen only once all are stored (migration 0014).
    latest_generation: Mapped[int] = mapped_column(Integer, server_default="0", nullable=False)


class LtiRosterMember(Base):
    """A learner on a course's roster (NRPS): SHA-256 of (issuer, client id, deployment id,
    user_id), the same key as lti_learners.link_key, so a member who launched is found; in the
    generation of the refresh that stored them (the course's `generation` is the one seen)."""

    __tablename__ = "lti_roster_members"
    __table_args__ = (PrimaryKeyConstraint("context_key", "generation", "link_key"),)

    context_key: Mapped[str] = mapped_column(
        CHAR(LTI_DIGEST_LENGTH),
        ForeignKey("lti_roster_services.context_key", ondelete="CASCADE"),
        nullable=False,
    )
    generation: Mapped[int] = mapped_column(Integer, server_default="0", nullable=False)
    link_key: Mapped[str] = mapped_column(CHAR(LTI_DIGEST_LENGTH), nullable=False)
    status: Mapped[str] = mapped_column(String(LTI_ROSTER_STATUS_LENGTH), nullable=False)
    # The member's roles, space-separated (role URIs hold no space).
    roles: Mapped[str] = mapped_column(Text, nullable=False)
    # Only when the platform sends them and the operator keeps them (roster_keep_names).
    name: Mapped[str | None] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=True)
    email: Mapped[str | None] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=True)


class LtiScoreOutbox(Base):
    """A learner whose score may have changed: one row per learner, put here by the database
    itself (a trigger on events, migration 0005) in the same transaction as the write that
    may change their gate. The passback worker fans it out to the learner's grade targets
    (which each keep their own state and retries) and deletes it. `version` grows with each
    such write, so a worker deletes only what it fanned out. `due_at`, `attempts` and
    `last_error` are what the trigger writes; since 0009 the targets' own columns say when
    and why, and the worker reads none of the three."""

    __tablename__ = "lti_score_outbox"
    __table_args__ = (Index("ix_lti_score_outbox_due_at", "due_at"),)

    learner_id: Mapped[str] = mapped_column(
        CHAR(LEARNER_ID_LENGTH), ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    due_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)


# A BCP 47 language tag as a platform names the learner's (launch_presentation.locale).
LOCALE_TAG_LENGTH = 35


class LtiLearnerLink(Base):
    """An LTI resource link a learner launched, with what its launch said about it: the
    platform's user (sub), the course, their titles, the platform's name and the learner's
    language. `link_key` is SHA-256 of (issuer, client id, deployment id, resource link id),
    as lti_grade_targets.target_key. The learner's latest launch is the context of what they
    do next: their xAPI statements' actor and context (normdive.xapi; migration 0013)."""

    __tablename__ = "lti_learner_links"
    __table_args__ = (
        PrimaryKeyConstraint("learner_id", "link_key"),
        # A learner's latest link (the xAPI outbox trigger reads it with each event).
        Index("ix_lti_learner_links_learner_id_last_launch_at", "learner_id", "last_launch_at"),
    )

    learner_id: Mapped[str] = mapped_column(
        CHAR(LEARNER_ID_LENGTH), ForeignKey("learners.id", ondelete="CASCADE"), nullable=False
    )
    link_key: Mapped[str] = mapped_column(CHAR(LTI_DIGEST_LENGTH), nullable=False)
    registration_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("lti_registrations.id", ondelete="CASCADE"), nullable=False
    )
    user_id: Mapped[str] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=False)
    resource_link_id: Mapped[str] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=False)
    resource_link_title: Mapped[str | None] = mapped_column(Text, nullable=True)
    # lti_context_members.context_key of the launch's course (None: launched outside any).
    context_key: Mapped[str | None] = mapped_column(CHAR(LTI_DIGEST_LENGTH), nullable=True)
    context_id: Mapped[str | None] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=True)
    context_title: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The platform's name as its tool_platform claim gives it (None: the claim named none).
    platform: Mapped[str | None] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=True)
    locale: Mapped[str | None] = mapped_column(String(LOCALE_TAG_LENGTH), nullable=True)
    last_launch_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


# An LRS's name (`normdive xapi add --name`), and an outbox row's status
# (normdive.xapi.outbox.StatementStatus): the longest is well under these.
XAPI_LRS_NAME_LENGTH = 64
XAPI_STATUS_LENGTH = 10


class XapiLrs(Base):
    """A Learning Record Store the learners' xAPI statements go to: its statements resource
    and the key and secret it knows D9 by (HTTP Basic). `context_key` None: the deployment's
    LRS, for every learner whose course has none of its own (normdive.xapi.lrs)."""

    __tablename__ = "xapi_lrs"
    __table_args__ = (UniqueConstraint("name"),)

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(String(XAPI_LRS_NAME_LENGTH), nullable=False)
    endpoint: Mapped[str] = mapped_column(String(LTI_URL_LENGTH), nullable=False)
    key: Mapped[str] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=False)
    secret: Mapped[str] = mapped_column(String(LTI_IDENTIFIER_LENGTH), nullable=False)
    context_key: Mapped[str | None] = mapped_column(CHAR(LTI_DIGEST_LENGTH), nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )


class XapiOutbox(Base):
    """An event whose xAPI statements go to an LRS: put here by the database itself (a
    trigger on events, migration 0013) in the same transaction as the event, while an LRS is
    set, with the learner's latest LTI link then. Each row is claimed, sent, retried and
    reported on its own (normdive.xapi.outbox), and kept once sent: a learner's statements
    can be voided or sent again on request."""

    __tablename__ = "xapi_outbox"
    __table_args__ = (
        # The rows due to be sent, soonest first (every round of the sender).
        Index("ix_xapi_outbox_due_at", "due_at"),
        # A learner's rows (their statements removed or sent again on request).
        Index("ix_xapi_outbox_learner_id", "learner_id"),
        # The rows one round of one sender claimed.
        Index("ix_xapi_outbox_claim", "claim"),
    )

    event_id: Mapped[int] = mapped_column(
        EVENT_ID_TYPE, ForeignKey("events.id", ondelete="CASCADE"), primary_key=True
    )
    learner_id: Mapped[str] = mapped_column(
        CHAR(LEARNER_ID_LENGTH), ForeignKey("learners.id", ondelete="CASCADE"), nullable=False
    )
    # lti_learner_links.link_key of the learner's latest launch when the event was stored.
    link_key: Mapped[str | None] = mapped_column(CHAR(LTI_DIGEST_LENGTH), nullable=True)
    status: Mapped[str] = mapped_column(
        String(XAPI_STATUS_LENGTH), server_default="due", nullable=False
    )
    # When the row is tried next; None: nothing to send.
    due_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Outage answers in a row: the backoff's exponent.
    attempts: Mapped[int] = mapped_column(Integer, server_default="0", nullable=False)
    # The round that claimed the row last (a random token), so a sender reads back its own.
    claim: Mapped[str | None] = mapped_column(CHAR(LTI_DIGEST_LENGTH), nullable=True)
    # The LRS the row went to, or was last tried at.
    lrs_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The LRS's last answer (None: no answer) and what it means, in words.
    last_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    updated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
