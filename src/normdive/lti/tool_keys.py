"""The tool's own RSA signing keys, kept in the database (lti_tool_keys) so every worker signs
with the same one and publishes the same set (GET /lti/jwks). After `normdive lti rotate-key`
the previous key stays published, so assertions it signed a moment ago still verify.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any, cast

from joserfc.jwk import KeySetSerialization, RSAKey
from sqlalchemy import Connection, Engine, insert, select, update

from normdive.store.tables import LtiToolKey

# 2048-bit RSA keys sign RS256, which every platform verifies (1EdTech Security Framework).
TOOL_KEY_BITS = 2048
SIGNING_ALGORITHM = "RS256"
# Keys published at once after a rotation: the new one and the one it replaced.
PUBLISHED_KEYS = 2


def _new_key(connection: Connection) -> RSAKey:
    kid = secrets.token_urlsafe(16)
    key = RSAKey.generate_key(
        TOOL_KEY_BITS, parameters={"kid": kid, "use": "sig", "alg": SIGNING_ALGORITHM}
    )
    connection.execute(
        insert(LtiToolKey).values(
            kid=kid, private_jwk=dict(key.as_dict(private=True)), created_at=datetime.now(UTC)
        )
    )
    return key


def _live(connection: Connection) -> list[RSAKey]:
    rows = connection.execute(
        select(LtiToolKey.private_jwk)
        .where(LtiToolKey.retired_at.is_(None))
        .order_by(LtiToolKey.created_at.desc(), LtiToolKey.kid)
    ).scalars()
    return [RSAKey.import_key(cast(Any, jwk)) for jwk in rows]


def signing_key(engine: Engine) -> RSAKey:
    """The newest key not retired; made (and stored) on first use."""
    with engine.begin() as connection:
        live = _live(connection)
        return live[0] if live else _new_key(connection)


def public_key_set(engine: Engine) -> KeySetSerialization:
    """The published keys, public parts only (what GET /lti/jwks serves)."""
    signing_key(engine)  # a platform may fetch the set before the tool first signs
    with engine.connect() as connection:
        keys = _live(connection)
    return {"keys": [key.as_dict(private=False) for key in keys]}


def rotate(engine: Engine) -> str:
    """Make a new signing key; retire all but the previous one. Returns the new key's id."""
    with engine.begin() as connection:
        key = _new_key(connection)
        live = _live(connection)
        stale = [str(old.kid) for old in live[PUBLISHED_KEYS:]]
        if stale:
            connection.execute(
                update(LtiToolKey)
                .where(LtiToolKey.kid.in_(stale))
                .values(retired_at=datetime.now(UTC))
            )
    return str(key.kid)
