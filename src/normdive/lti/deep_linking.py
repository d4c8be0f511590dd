"""Deep Linking 2.0: an instructor picks the lesson in the platform's content picker, and the
tool answers with a signed LtiDeepLinkingResponse: one ltiResourceLink with a line item
(passback.lineitem_declaration), from which the platform makes its gradebook column.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from joserfc import jwt
from sqlalchemy import Engine

from normdive.lesson.content import Lesson
from normdive.lti import tool_keys
from normdive.lti.launch import CLAIM, DEEP_LINKING_REQUEST, LTI_VERSION, RESOURCE_LINK_ITEM, Launch
from normdive.lti.passback import lineitem_declaration
from normdive.lti.refusal import Refusal
from normdive.lti.roles import is_staff

DEEP_LINKING_RESPONSE = "LtiDeepLinkingResponse"
DL_CLAIM = "https://purl.imsglobal.org/spec/lti-dl/claim/"
# The response's life: the instructor presses the button at once.
RESPONSE_LIFETIME_S = 600


@dataclass(frozen=True)
class DeepLinkingResponse:
    return_url: str
    jwt: str
    title: str


def respond(
    engine: Engine,
    launch: Launch,
    lesson: Lesson,
    launch_url: str,
    *,
    administrators_are_staff: bool = False,
) -> DeepLinkingResponse:
    """A Refusal for a learner's request: only those who teach or build the course pick content."""
    assert launch.message_type == DEEP_LINKING_REQUEST and launch.deep_linking is not None
    if not is_staff(launch.roles, administrators_are_staff=administrators_are_staff):
        raise Refusal(
            403,
            "not_staff",
            "Only a course's instructors, teaching assistants, content developers and "
            "administrators may add the lesson to a course.",
        )
    settings = launch.deep_linking
    title = f"{lesson.id.upper()} {lesson.title}"
    item: dict[str, Any] = {
        "type": RESOURCE_LINK_ITEM,
        "title": title,
        "text": lesson.summary,
        "url": launch_url,
        "lineItem": lineitem_declaration(lesson),
    }
    registration = launch.registration
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": registration.client_id,
        "aud": registration.issuer,
        "iat": now,
        "exp": now + RESPONSE_LIFETIME_S,
        "nonce": secrets.token_urlsafe(16),
        CLAIM + "message_type": DEEP_LINKING_RESPONSE,
        CLAIM + "version": LTI_VERSION,
        CLAIM + "deployment_id": launch.deployment_id,
        DL_CLAIM + "content_items": [item],
    }
    if isinstance(settings.get("data"), str):
        claims[DL_CLAIM + "data"] = settings["data"]
    key = tool_keys.signing_key(engine)
    token = jwt.encode(
        {"alg": tool_keys.SIGNING_ALGORITHM, "kid": key.kid, "typ": "JWT"}, claims, key
    )
    return DeepLinkingResponse(
        return_url=str(settings["deep_link_return_url"]), jwt=token, title=title
    )
