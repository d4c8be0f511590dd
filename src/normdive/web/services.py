"""What a request handler has to hand: settings, lesson, store, signer and renderer, built
once per app by create_app, plus reading a learner's derived state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from itsdangerous import Signer
from sqlalchemy import Engine
from starlette.requests import Request

from normdive.config import Settings
from normdive.lesson.content import Lesson
from normdive.progress.facts import recording_facts_at
from normdive.progress.state import LessonState, derive
from normdive.store.events import Store
from normdive.web.rendering import Renderer


@dataclass(frozen=True)
class Services:
    settings: Settings
    lesson: Lesson
    engine: Engine
    store: Store
    signer: Signer
    renderer: Renderer

    def state_of(self, learner_id: str) -> LessonState:
        """The learner's state, derived afresh from their events and the recording."""
        return derive(
            self.store.events_for(learner_id),
            self.lesson,
            # The reader caches the file by (path, mtime, size): a re-recording shows at once.
            recording=recording_facts_at(self.settings.recording_path),
            dev_prerequisite_done=self.settings.dev_prerequisite_done,
        )


def services(request: Request) -> Services:
    return cast(Services, request.app.state.services)
