"""What a request handler has to hand: settings, lesson, store, signer and renderer, built
once per app by create_app; a learner's read and write (web.infrastructure.learners, one owner
for both); the page's view, with the recording's views and the pool's predictions; and the
threads that refresh course rosters (web.infrastructure.roster_refreshes).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import partial
from typing import cast

from itsdangerous import Signer
from sqlalchemy import Engine
from starlette.requests import Request

from normdive.config import Settings
from normdive.lesson.content import Lesson
from normdive.lti import roster
from normdive.lti.learners import latest_course
from normdive.progress.lab import lab_runs, run_line
from normdive.progress.state import LessonState
from normdive.progress.sweep import compare_line
from normdive.recording import reader
from normdive.recording.runs import Runs
from normdive.recording.sweep import sweep_path_for
from normdive.recording.sweep_reader import sweep_status
from normdive.store.event_store import EventList, Store
from normdive.store.snapshots import Snapshots
from normdive.web.infrastructure.learners import (
    Act,
    Histories,
    LabDecide,
    LabWritten,
    Learners,
    Read,
    RecordingStatus,
    RerunDecide,
    RerunWritten,
    Written,
)
from normdive.web.infrastructure.roster_refreshes import RosterRefreshes
from normdive.web.security.csrf import form_token
from normdive.web.views.page import PageView, Refusal, build_page_view
from normdive.web.views.pool_reports import PoolReports
from normdive.web.views.rendering import Renderer


@dataclass(frozen=True)
class Services:
    settings: Settings
    lesson: Lesson
    engine: Engine
    store: Store
    signer: Signer
    renderer: Renderer
    histories: Histories
    snapshots: Snapshots
    pool_reports: PoolReports
    learners: Learners = field(init=False)
    rosters: RosterRefreshes = field(init=False)

    def __post_init__(self) -> None:
        learners = Learners(
            self.settings, self.lesson, self.engine, self.store, self.histories, self.snapshots
        )
        object.__setattr__(self, "learners", learners)
        rosters = RosterRefreshes(
            partial(
                roster.refresh,
                self.engine,
                keep_names=self.settings.roster_keep_names,
                interval_s=self.settings.roster_refresh_s,
            )
        )
        object.__setattr__(self, "rosters", rosters)

    def read(self, learner_id: str) -> Read:
        """The learner now (Learners.read: the gate's closing recorded when due)."""
        return self.learners.read(learner_id)

    def write(self, learner_id: str, act: Act, *, address: str) -> Written:
        """One form's write (Learners.write)."""
        return self.learners.write(learner_id, act, address=address)

    def write_lab(self, learner_id: str, decide: LabDecide) -> LabWritten:
        """One lab write (Learners.write_lab)."""
        return self.learners.write_lab(learner_id, decide)

    def write_rerun(self, learner_id: str, decide: RerunDecide) -> RerunWritten:
        """One write of the re-run of the ablation (Learners.write_rerun)."""
        return self.learners.write_rerun(learner_id, decide)

    def recording(self) -> RecordingStatus:
        """The recording, or why it cannot be used (reader.recording_snapshot: cached per
        path, a change noticed by stat and by content)."""
        return self.learners.recording_snapshot().status

    def state_of(self, learner_id: str, status: RecordingStatus | None = None) -> LessonState:
        """The learner's state, derived from their History and the recording (nothing
        recorded: Services.read records the gate's closing)."""
        status = status if status is not None else self.recording()
        return self.learners.state(learner_id, self.learners.history(learner_id), status)

    def page_view(
        self,
        learner_id: str,
        state: LessonState,
        status: RecordingStatus,
        *,
        eps_on: bool = True,
        own_row_text: str | None = None,
        player_row: str | None = None,
        refusal: Refusal | None = None,
        aggregate: bool = True,
        lab: bool = True,
    ) -> PageView:
        """Everything one render of the page needs, the recording's views and (once the
        learner has committed) how the learners of their pool predicted included (their course's,
        or outside an LMS everyone's who came outside one). `aggregate=False` leaves
        that out, for answers that re-render no region showing it: it reads every learner's
        predictions, the one query here whose cost grows with the course. `lab=False` leaves
        out the lab panel's runs, for answers that re-render no region listing them: once the
        gate has closed, they are read from every event of the learner's."""
        view = build_page_view(
            self.lesson,
            state,
            learner_id,
            eps_on=eps_on,
            own_row_text=own_row_text,
            refusal=refusal,
            player_row=player_row,
            recording=status if isinstance(status, Runs) else None,
            recording_file=self.settings.recording_path.name,
            # The learner's course, when an LMS launched them from one, is their pool.
            counts=self.store.prediction_counts(latest_course(self.engine, learner_id))
            if aggregate and state.prediction is not None
            else None,
            csrf_token=form_token(self.settings.secret_key, learner_id),
            sweep_line=self.sweep_line(state, status),
        )
        if not (lab and state.gate.closed):
            return view
        return dataclasses.replace(view, lab_lines=self.lab_lines(learner_id))

    def lab_lines(self, learner_id: str) -> tuple[str, ...]:
        """The lab panel's list of the runs the learner kept (one query: their events)."""
        runs = lab_runs(self.store.read(learner_id, EventList()).events)
        return tuple(run_line(self.lesson, run) for run in runs)

    def sweep_line(self, state: LessonState, status: RecordingStatus) -> str | None:
        """The compare section's line about other depths, once the gate has closed and both
        single-component rows have played (before then, "at other depths your prediction is
        what happens" would tell the depth's own answer unseen), and when the sweep beside the
        recording bears the learner's prediction out elsewhere (the sweep is read then, cached
        by its stat; never before the gate closes)."""
        if not (state.gate.closed and state.compare.revealed) or not isinstance(status, Runs):
            return None
        sweep = sweep_status(sweep_path_for(self.settings.recording_path))
        if isinstance(sweep, reader.RecordingProblem):
            return None
        return compare_line(
            sweep,
            self.lesson,
            state.prediction,
            depth=status.plan.base.depth,
            init=status.plan.base.init,
            agrees=state.compare.opening_verdict == "agrees",
        )


def services(request: Request) -> Services:
    return cast(Services, request.app.state.services)
