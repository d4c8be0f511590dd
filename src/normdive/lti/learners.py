"""What a validated launch does: the platform's user becomes (or is again) one learner, keyed by
SHA-256 of (issuer, client id, deployment id, sub), so the same person is the same learner on
any device; their course is remembered, and 8.5 recorded as the registration says. The login is
consumed in the same transaction, so a launch happens whole or leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, insert, select, update
from sqlalchemy.exc import IntegrityError

from normdive.lti import launch as launches
from normdive.lti import passback
from normdive.lti.launch import RESOURCE_LINK_REQUEST, Launch
from normdive.lti.refusal import Refusal
from normdive.lti.registrations import CUSTOM_PREREQUISITE_PARAMETER, PrerequisiteMode
from normdive.lti.roles import CourseRole, course_role
from normdive.store.event_store import Store, new_learner_id, reading_connection
from normdive.store.prerequisite import PrerequisiteSource, record_prerequisite_done
from normdive.store.tables import Learner, LtiContextMember, LtiLearner, LtiLearnerLink

# Another launch of the same user or course storing the same row at once: the second finds it.
CONCURRENT_LAUNCH_TRIES = 2


@dataclass(frozen=True)
class SignedIn:
    learner_id: str
    new_learner: bool
    staff: bool
    context_key: str | None


def _digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=True).encode()).hexdigest()


def member_key(issuer: str, client_id: str, deployment_id: str, subject: str) -> str:
    """A platform's user's key (lti_learners.link_key): their launches' sub, or a course
    roster's user_id, which is the same identifier (NRPS 2.0, 2.3)."""
    return _digest("user", issuer, client_id, deployment_id, subject)


def user_key(launch: Launch) -> str:
    registration = launch.registration
    return member_key(
        registration.issuer, registration.client_id, launch.deployment_id, launch.subject
    )


def context_key(launch: Launch) -> str | None:
    if launch.context_id is None:
        return None
    registration = launch.registration
    return _digest(
        "context",
        registration.issuer,
        registration.client_id,
        launch.deployment_id,
        launch.context_id,
    )


def _learner(connection: Connection, key: str, name: str | None) -> tuple[str, bool]:
    found = connection.execute(
        select(LtiLearner.learner_id, LtiLearner.name).where(LtiLearner.link_key == key)
    ).first()
    if found is not None:
        if found.name != name:
            connection.execute(
                update(LtiLearner).where(LtiLearner.link_key == key).values(name=name)
            )
        return found.learner_id, False
    learner_id = new_learner_id()
    connection.execute(insert(Learner).values(id=learner_id, created_by=None))
    connection.execute(insert(LtiLearner).values(link_key=key, learner_id=learner_id, name=name))
    return learner_id, True


def _remember_course(connection: Connection, key: str, learner_id: str, role: CourseRole) -> None:
    now = datetime.now(UTC)
    updated = connection.execute(
        update(LtiContextMember)
        .where(LtiContextMember.context_key == key, LtiContextMember.learner_id == learner_id)
        .values(last_launch_at=now, course_role=role.value)
    ).rowcount
    if not updated:
        connection.execute(
            insert(LtiContextMember).values(
                context_key=key, learner_id=learner_id, last_launch_at=now, course_role=role.value
            )
        )


def _remember_link(
    connection: Connection, launch: Launch, learner_id: str, course: str | None
) -> None:
    """The learner's latest link (lti_learner_links): what they do next is in its context."""
    key = passback.link_key(launch)
    values = {
        "registration_id": launch.registration.id,
        "user_id": launch.subject,
        "resource_link_id": launch.resource_link_id,
        "resource_link_title": launch.resource_link_title,
        "context_key": course,
        "context_id": launch.context_id,
        "context_title": launch.context_title,
        "platform": launch.platform_name,
        "locale": launch.locale,
        "last_launch_at": datetime.now(UTC),
    }
    mine = (LtiLearnerLink.learner_id == learner_id, LtiLearnerLink.link_key == key)
    if not connection.execute(update(LtiLearnerLink).where(*mine).values(**values)).rowcount:
        connection.execute(
            insert(LtiLearnerLink).values(learner_id=learner_id, link_key=key, **values)
        )


def latest_course(engine: Engine, learner_id: str) -> str | None:
    """The course the learner last launched from, or None. Read on every page view, so in one
    round trip (store.event_store.reading_connection)."""
    with reading_connection(engine) as connection:
        return connection.execute(
            select(LtiContextMember.context_key)
            .where(LtiContextMember.learner_id == learner_id)
            .order_by(LtiContextMember.last_launch_at.desc())
            .limit(1)
        ).scalar_one_or_none()


def _prerequisite_source(launch: Launch, staff: bool) -> PrerequisiteSource | None:
    if staff:
        return PrerequisiteSource.LTI_STAFF
    mode = launch.registration.prerequisite_mode
    if mode is PrerequisiteMode.PLATFORM:
        return PrerequisiteSource.LTI_PLATFORM
    said = launch.custom.get(CUSTOM_PREREQUISITE_PARAMETER, "").strip().lower()
    if mode is PrerequisiteMode.CUSTOM and said == "true":
        return PrerequisiteSource.LTI_CUSTOM
    return None


def sign_in(
    engine: Engine,
    store: Store,
    launch: Launch,
    *,
    administrators_are_staff: bool = False,
    keep_names: bool = False,
) -> SignedIn:
    """Map the launch to its learner and course in one transaction, a grade target only for a
    learner (lti.roles); then record 8.5 as the registration (or a staff role) says. Refusal,
    nothing stored, when the nonce was used meanwhile."""
    key = user_key(launch)
    course = context_key(launch)
    role = course_role(launch.roles, administrators_are_staff=administrators_are_staff)
    for attempt in range(CONCURRENT_LAUNCH_TRIES):
        try:
            with engine.begin() as connection:
                launches.consume(connection, launch.login)
                learner_id, new = _learner(
                    connection, key, launch.user_name if keep_names else None
                )
                if course is not None:
                    _remember_course(connection, course, learner_id, role)
                if launch.message_type == RESOURCE_LINK_REQUEST:
                    _remember_link(connection, launch, learner_id, course)
                if role is CourseRole.LEARNER:
                    passback.record_grade_target(connection, launch, learner_id)
                else:
                    passback.forget_grade_target(connection, launch, learner_id)
            break
        except IntegrityError:
            if attempt + 1 == CONCURRENT_LAUNCH_TRIES:
                raise Refusal(
                    409,
                    "concurrent_launch",
                    "Another launch of the same user stored the same learner at the same "
                    "moment, twice over. Launch the activity again.",
                ) from None
    staff = role is CourseRole.STAFF
    source = _prerequisite_source(launch, staff)
    if source is not None:
        record_prerequisite_done(store, learner_id, source)
    return SignedIn(learner_id=learner_id, new_learner=new, staff=staff, context_key=course)
