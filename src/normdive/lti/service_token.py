"""The request for an access token to a platform's services: OAuth 2 client credentials with a
client assertion JWT signed with the tool's key (RFC 7523; 1EdTech Security Framework 1.0, 4.1).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence

from joserfc import jwt
from sqlalchemy import Engine

from normdive.lti import tool_keys
from normdive.lti.registrations import Registration

CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
# A client assertion is good for this long (RFC 7523 asks for a short life).
ASSERTION_LIFETIME_S = 300


def token_form(engine: Engine, registration: Registration, scopes: Sequence[str]) -> dict[str, str]:
    """The form to POST to the registration's token endpoint for a token with `scopes`."""
    key = tool_keys.signing_key(engine)
    now = int(time.time())
    assertion = jwt.encode(
        {"alg": tool_keys.SIGNING_ALGORITHM, "kid": key.kid, "typ": "JWT"},
        {
            "iss": registration.client_id,
            "sub": registration.client_id,
            "aud": registration.token_url,
            "iat": now,
            "exp": now + ASSERTION_LIFETIME_S,
            "jti": secrets.token_urlsafe(16),
        },
        key,
    )
    return {
        "grant_type": "client_credentials",
        "client_assertion_type": CLIENT_ASSERTION_TYPE,
        "client_assertion": assertion,
        "scope": " ".join(scopes),
    }
