"""What the tool tells a platform about itself: its URLs, messages and services, as Canvas's
developer key JSON configuration (GET /lti/canvas.json); dynamic registration sends the same.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from normdive.lesson.content import Lesson
from normdive.lti.passback import LINEITEM_SCOPE, SCORE_SCOPE
from normdive.lti.roster import MEMBERSHIPS_SCOPE

# The tool's paths (served by normdive.web.routes.lti).
LOGIN_PATH = "/lti/login"
LAUNCH_PATH = "/lti/launch"
JWKS_PATH = "/lti/jwks"
# Scores, the line item they go to, and the roster (who has not opened D9 yet).
SCOPES = (LINEITEM_SCOPE, SCORE_SCOPE, MEMBERSHIPS_SCOPE)
# Canvas's privacy level: the tool needs only the user's opaque id (sub), no name or email.
CANVAS_PRIVACY_LEVEL = "anonymous"
CANVAS_PLATFORM = "canvas.instructure.com"


def title(lesson: Lesson) -> str:
    return f"{lesson.id.upper()} {lesson.title}"


def canvas_configuration(origin: str, lesson: Lesson) -> dict[str, Any]:
    """No submission review: a Canvas placement's message_type cannot be one, and Canvas's
    gradebook sends none."""
    launch = origin + LAUNCH_PATH
    return {
        "title": title(lesson),
        "description": lesson.summary,
        "oidc_initiation_url": origin + LOGIN_PATH,
        "target_link_uri": launch,
        "public_jwk_url": origin + JWKS_PATH,
        "scopes": list(SCOPES),
        "extensions": [
            {
                "platform": CANVAS_PLATFORM,
                "domain": urlsplit(origin).hostname,
                "privacy_level": CANVAS_PRIVACY_LEVEL,
                "settings": {
                    "placements": [
                        {
                            "placement": "link_selection",
                            "message_type": "LtiDeepLinkingRequest",
                            "target_link_uri": launch,
                        },
                        {
                            "placement": "assignment_selection",
                            "message_type": "LtiDeepLinkingRequest",
                            "target_link_uri": launch,
                        },
                    ]
                },
            }
        ],
        "custom_fields": {},
    }
