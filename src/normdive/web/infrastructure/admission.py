"""Who a write is from: the learner the cookie vouched for (checked once per request), stored
on their first accepted write unless their address started too many learners lately
(web.security.ratelimit)."""

from __future__ import annotations

from sqlalchemy import Engine
from starlette.requests import Request

from normdive.config import Settings
from normdive.store.event_store import Store
from normdive.web.infrastructure.identity import Learner
from normdive.web.security.framing import FRAME_COOKIE
from normdive.web.security.ratelimit import TooManyLearners, address_key, too_many_learners


def admitted(
    store: Store, engine: Engine, settings: Settings, learner_id: str, address: str
) -> TooManyLearners | None:
    """Store the learner on their first write, unless `address` (the client's,
    web.security.proxy.client_address) started too many learners lately; None when the
    write may go on."""
    if store.learner_exists(learner_id):
        return None
    created_by = address_key(settings.secret_key, address)
    limited = too_many_learners(engine, created_by, settings.new_learners_per_hour)
    if limited is not None:
        return limited
    store.ensure_learner(learner_id, created_by)
    return None


def vouched_learner(request: Request, learner_id: str) -> Learner:
    """The learner of a write whose cookie was checked already (identity.learner_from_cookie
    vouched for `learner_id`): as identity.resolve_learner would answer, without checking the
    signature a second time."""
    return Learner(id=learner_id, new=False, framed=FRAME_COOKIE in request.cookies)
