"""Course rosters refreshed off the threads that serve learners (lti.roster.refresh).

A staff launch asks for its course's roster once its answer is sent. The fetch waits on the
platform, up to lti.roster.ROSTER_DEADLINE_S, and a platform that trickles its pages makes it
wait all of that: on a request thread, a few such courses held every thread, and the lesson and
/healthz waited with them. So each server process refreshes rosters on ROSTER_THREADS threads
of its own, started when asked and ended when nothing waits. A course is refreshed one at a
time: asked again while its refresh waits or runs, it is not queued again. At most
ROSTER_WAITING courses wait; past that an ask is dropped, and the course's next staff launch
asks again (a refresh claims the course only when it starts). A refresh that fails logs one
line (a database failure, as the requests' do, without a traceback).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from normdive.store.db import failure_reason, is_database_failure

logger = logging.getLogger(__name__)

# Threads per server process that refresh rosters; the request threads are web.app's.
ROSTER_THREADS = 2
# Courses that may wait for a roster thread, per server process.
ROSTER_WAITING = 64


class RosterRefreshes:
    """Runs `refresh(course)` on at most `threads` threads of its own, each course once at a
    time, with at most `waiting` courses queued."""

    def __init__(
        self,
        refresh: Callable[[str], object],
        *,
        threads: int = ROSTER_THREADS,
        waiting: int = ROSTER_WAITING,
    ) -> None:
        self._refresh = refresh
        self._threads = threads
        self._waiting = waiting
        self._changed = threading.Condition()
        self._queue: deque[str] = deque()
        # Courses queued or being refreshed.
        self._asked: set[str] = set()
        self._running = 0

    def ask(self, course: str) -> bool:
        """Refresh `course` on a roster thread, unless it is queued or being refreshed already;
        False when too many courses wait (nothing is queued)."""
        with self._changed:
            if course in self._asked:
                return True
            if len(self._queue) >= self._waiting:
                logger.warning(
                    "roster of course %s not fetched: %d courses wait for theirs; the next "
                    "staff launch asks again",
                    course,
                    len(self._queue),
                )
                return False
            self._queue.append(course)
            self._asked.add(course)
            if self._running < self._threads:
                self._running += 1
                threading.Thread(target=self._work, name="normdive-roster", daemon=True).start()
            return True

    def wait_until_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until no course waits or is being refreshed; False if `timeout_s` passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._asked, timeout=timeout_s)

    def _work(self) -> None:
        while True:
            with self._changed:
                if not self._queue:
                    self._running -= 1
                    self._changed.notify_all()
                    return
                course = self._queue.popleft()
            try:
                self._refresh(course)
            except Exception as error:  # a roster thread outlives any one course's failure
                if is_database_failure(error):
                    logger.warning(
                        "roster of course %s not refreshed: the database failed: %s",
                        course,
                        failure_reason(error),
                    )
                else:
                    logger.exception("roster of course %s: the refresh failed", course)
            finally:
                with self._changed:
                    self._asked.discard(course)
                    self._changed.notify_all()
