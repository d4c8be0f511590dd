"""A learner is stored on their first accepted write, unless their address started too many
learners lately (web.security.ratelimit)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from normdive.web.infrastructure.errors import error_response
from normdive.web.infrastructure.services import Services
from normdive.web.security.proxy import client_address
from normdive.web.security.ratelimit import address_key, too_many_learners


def admit_learner(svc: Services, request: Request, learner_id: str) -> Response | None:
    """Store the learner on their first write, unless their address started too many
    learners lately (429, web.security.ratelimit); None when the write may go on."""
    if svc.store.learner_exists(learner_id):
        return None
    created_by = address_key(svc.settings.secret_key, client_address(request))
    limited = too_many_learners(svc.engine, created_by, svc.settings.new_learners_per_hour)
    if limited is not None:
        retry = {"Retry-After": str(limited.retry_after_s)}
        return error_response(request, 429, limited.message, retry)
    svc.store.ensure_learner(learner_id, created_by)
    return None
