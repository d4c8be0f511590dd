"""The web app factory: `create_app(settings)` wires settings, lesson, store and renderer
into a Starlette app: the routes of web.routes, the static files, readable error handling
(web.infrastructure.errors) and the middlewares of web.security and web.infrastructure.

Run it with `normdive serve`, or any ASGI server: `uvicorn --factory normdive.web.app:create_app`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.to_thread
from itsdangerous import Signer
from starlette.applications import Starlette
from starlette.routing import BaseRoute
from starlette.types import ASGIApp

from normdive.config import Settings, get_settings
from normdive.i18n.locales import LOCALES
from normdive.lesson.content import load_lesson
from normdive.lesson.translations import localized
from normdive.progress.history import History
from normdive.store.db import make_engine
from normdive.store.event_store import Store
from normdive.store.snapshots import Snapshots
from normdive.web.infrastructure.assets import CompressResponses, StaticAssets
from normdive.web.infrastructure.errors import DatabaseFailures, install_error_handlers
from normdive.web.infrastructure.head_as_get import HeadAsGet
from normdive.web.infrastructure.identity import make_signer
from normdive.web.infrastructure.language import Language
from normdive.web.infrastructure.learners import Histories
from normdive.web.infrastructure.services import Services
from normdive.web.routes import actions, instructor, lab, lti, pages, rerun, sweep
from normdive.web.security.framing import frame_signer
from normdive.web.security.headers import SecurityHeaders
from normdive.web.security.limits import MAX_BODY_BYTES, MAX_HEAD_BYTES, BodyLimit, HeadLimit
from normdive.web.security.proxy import TrustedProxy
from normdive.web.views.pool_reports import PoolReports
from normdive.web.views.rendering import STATIC_DIR, STATIC_MOUNT, Renderer, static_version

# Every route of the app, in the order they are matched: one list, the routes modules' own.
ROUTES: tuple[BaseRoute, ...] = (
    *pages.routes,
    *actions.routes,
    *sweep.routes,
    *lab.routes,
    *rerun.routes,
    *lti.routes,
    *instructor.routes,
)

# Threads per worker process that run requests' blocking work (the database, deriving,
# rendering). Python runs one thread at a time, so more threads only add waiting for the GIL:
# 4 overlap one request's database waits with another's work, at about 20 % less CPU per
# request than anyio's default of 40 (bench/RESULTS.md, "Load").
REQUEST_THREADS = 4


class NormdiveApp(Starlette):
    """Starlette with SecurityHeaders around its whole middleware stack. Starlette puts its
    ServerErrorMiddleware outside every middleware added with add_middleware, and that one
    sends the 500 for an unexpected error: headers added inside it never reach that 500."""

    frame_signer: Signer | None = None

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack(), self.frame_signer)


def create_app(settings: Settings | None = None) -> NormdiveApp:
    settings = settings or get_settings()
    engine = make_engine(settings.database_url)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        # run_in_threadpool (starlette) takes anyio's default limiter, one per event loop.
        anyio.to_thread.current_default_thread_limiter().total_tokens = REQUEST_THREADS
        yield
        engine.dispose()  # close the pool's connections when the server stops

    version = static_version(STATIC_DIR)
    app = NormdiveApp(routes=list(ROUTES), lifespan=lifespan)
    # No redirect from /path/ to /path: Starlette builds it from the request's Host, which any
    # client sets, and a 307 makes the browser post the form again, there.
    app.router.redirect_slashes = False
    lesson = load_lesson()
    # Each language's lesson text is read now: a malformed one fails at start-up, naming the
    # field, as d9.toml does; the texts one leaves in English are logged (lesson.translations).
    for locale in LOCALES:
        localized(lesson, locale)
    app.frame_signer = frame_signer(settings.secret_key)
    app.state.services = Services(
        settings=settings,
        lesson=lesson,
        engine=engine,
        store=Store(engine),
        signer=make_signer(settings),
        renderer=Renderer(version=version),
        histories=Histories(lesson),
        snapshots=Snapshots(engine, History.start(lesson)),
        pool_reports=PoolReports(lesson),
    )
    app.mount(STATIC_MOUNT, StaticAssets(STATIC_DIR, version), name="static")
    install_error_handlers(app)
    # Innermost: the request's locale is set for everything that draws or composes its answer.
    app.add_middleware(Language, settings=settings, unvaried=(STATIC_MOUNT + "/",))
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES, timeout_s=settings.body_timeout_s)
    app.add_middleware(CompressResponses)
    # Outside the others added, so everything inside sees the client a trusted proxy names.
    app.add_middleware(TrustedProxy, forwarded_allow_ips=settings.forwarded_allow_ips)
    app.add_middleware(HeadAsGet)
    # Outermost but one: the head is measured as it arrived, before anything uses it.
    app.add_middleware(HeadLimit, max_bytes=MAX_HEAD_BYTES)
    # Outermost of the added ones: a database failure raised in any of them is a 503 too.
    app.add_middleware(DatabaseFailures)
    return app
