"""The Learning Record Stores a deployment sends statements to (xapi_lrs): each one's statements
resource and its HTTP Basic key and secret (xAPI 1.0.3 Communication 4.1). One is the
deployment's; a course's own takes its learners' statements instead. While none is stored the
outbox trigger queues nothing: xAPI is off.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, delete, insert, select, update

from normdive.config import Settings, origin_of
from normdive.store.tables import XAPI_LRS_NAME_LENGTH, XapiLrs

# The environment's (NORMDIVE_XAPI_*), stored by `normdive serve` and `xapi send` as they start.
ENVIRONMENT_LRS = "environment"


class LrsProblem(ValueError):
    """An LRS that cannot be stored as given: the message says why."""


@dataclass(frozen=True)
class Lrs:
    id: int
    name: str
    endpoint: str
    key: str
    secret: str
    # The course whose learners' statements it takes; None: the deployment's.
    context_key: str | None

    @property
    def scope(self) -> str:
        return f"course {self.context_key}" if self.context_key else "the deployment"


def endpoint_problem(endpoint: str) -> str | None:
    """Why `endpoint` cannot be an LRS's statements resource, or None."""
    if origin_of(endpoint) is None:
        return f"{endpoint!r} is not an http(s) URL"
    if not endpoint.rstrip("/").endswith("/statements"):
        return (
            f"{endpoint!r} is not a statements resource: give the URL that ends in "
            "/statements (e.g. https://lrs.example.edu/xAPI/statements)"
        )
    return None


def stored(engine: Engine) -> list[Lrs]:
    """Every LRS stored, the deployment's first."""
    with engine.connect() as connection:
        rows = connection.execute(select(XapiLrs).order_by(XapiLrs.id)).all()
    found = [
        Lrs(row.id, row.name, row.endpoint, row.key, row.secret, row.context_key) for row in rows
    ]
    return sorted(found, key=lambda lrs: (lrs.context_key is not None, lrs.id))


def add(
    engine: Engine,
    name: str,
    endpoint: str,
    key: str,
    secret: str,
    context_key: str | None = None,
) -> Lrs:
    """Store an LRS; LrsProblem when the name is taken, the course (or the deployment) has one
    already, or the endpoint is not a statements resource."""
    problem = _problem(name, endpoint, key, secret)
    if problem is not None:
        raise LrsProblem(problem)
    for lrs in stored(engine):
        if lrs.name == name:
            raise LrsProblem(f"an LRS named {name!r} is stored already (`normdive xapi remove`)")
        if lrs.context_key == context_key:
            raise LrsProblem(f"{lrs.scope} sends to the LRS {lrs.name!r} already; remove it first")
    with engine.begin() as connection:
        connection.execute(
            insert(XapiLrs).values(
                name=name, endpoint=endpoint, key=key, secret=secret, context_key=context_key
            )
        )
    return next(lrs for lrs in stored(engine) if lrs.name == name)


def _problem(name: str, endpoint: str, key: str, secret: str) -> str | None:
    if not name.strip() or len(name) > XAPI_LRS_NAME_LENGTH:
        return f"an LRS's name is 1 to {XAPI_LRS_NAME_LENGTH} characters"
    if not key or not secret:
        return "an LRS needs its key and its secret (HTTP Basic)"
    return endpoint_problem(endpoint)


def remove(engine: Engine, name: str) -> bool:
    """False when there is none. Statements waiting for it wait for the next LRS."""
    with engine.begin() as connection:
        return bool(connection.execute(delete(XapiLrs).where(XapiLrs.name == name)).rowcount)


def sync_environment(engine: Engine, settings: Settings) -> Lrs | None:
    """Make ENVIRONMENT_LRS what the environment says, writing only what changes (a server may
    start on a database it cannot write to yet). LrsProblem when it cannot be stored."""
    kept = {lrs.name: lrs for lrs in stored(engine)}
    if settings.xapi_endpoint is None:
        if ENVIRONMENT_LRS in kept:
            remove(engine, ENVIRONMENT_LRS)
        return None
    secret = settings.xapi_secret.get_secret_value() if settings.xapi_secret else ""
    key = settings.xapi_key or ""
    problem = _problem(ENVIRONMENT_LRS, settings.xapi_endpoint, key, secret)
    if problem is not None:
        raise LrsProblem(f"NORMDIVE_XAPI_ENDPOINT, _KEY, _SECRET: {problem}")
    if ENVIRONMENT_LRS not in kept:
        return add(engine, ENVIRONMENT_LRS, settings.xapi_endpoint, key, secret)
    now = kept[ENVIRONMENT_LRS]
    if (now.endpoint, now.key, now.secret) == (settings.xapi_endpoint, key, secret):
        return now
    with engine.begin() as connection:
        connection.execute(
            update(XapiLrs)
            .where(XapiLrs.name == ENVIRONMENT_LRS)
            .values(endpoint=settings.xapi_endpoint, key=key, secret=secret)
        )
    return next(lrs for lrs in stored(engine) if lrs.name == ENVIRONMENT_LRS)


def route(stores: list[Lrs], context_key: str | None) -> Lrs | None:
    """The LRS a learner's statements go to: their course's own, else the deployment's."""
    by_course = {lrs.context_key: lrs for lrs in stores}
    if context_key is not None and context_key in by_course:
        return by_course[context_key]
    return by_course.get(None)
