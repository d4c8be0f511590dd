"""No acknowledged write is lost, none is doubled, when the server is killed mid-load.

Learners save takeaways (one event each, a text never sent before) through the real route of
a real `normdive serve` process, each remembering every save the server acknowledged (a 2xx).
Once enough are acknowledged, the server's process group gets SIGKILL while the learners are
still sending; a new server starts on the same database. Then every acknowledged text is in
the database exactly once; a save cut off by the kill may or may not be there, never twice;
and each learner carries on with the same cookie. On a SQLite file and on PostgreSQL.
Bounded: a few hundred requests on 127.0.0.1, and a deadline.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from normdive.progress.events import EventKind
from normdive.store.db import make_engine
from normdive.store.event_store import Store
from ops_server import Learner, ServerProcess

pytestmark = [pytest.mark.both_databases, pytest.mark.slow]

# Learners writing at once.
CLIENTS = 6
# The kill comes once this many saves were acknowledged, in all.
KILL_AFTER_ACKS = 90
# No learner sends more than this (bounds the test if the kill never came).
MAX_SAVES_PER_CLIENT = 100
# The load phase ends by then whatever happens.
DEADLINE_S = 120.0


@dataclass
class Writer:
    """One learner's saves: what it sent and which of those the server acknowledged."""

    number: int
    learner: Learner
    learner_id: str = ""
    sent: list[str] = field(default_factory=list)
    acknowledged: list[str] = field(default_factory=list)
    cut_off: int = 0  # saves that got no answer (the kill)
    refused: list[str] = field(default_factory=list)  # unexpected answers (the test fails)


def _write_until_the_server_dies(writer: Writer, stop: threading.Event) -> None:
    for index in range(MAX_SAVES_PER_CLIENT):
        if stop.is_set():
            return
        text = f"learner {writer.number}, save {index}"
        writer.sent.append(text)
        try:
            answer = writer.learner.post("/takeaway", {"text": text})
        except httpx.TransportError:
            writer.cut_off += 1
            return  # the server is gone
        if 200 <= answer.status_code < 300:
            writer.acknowledged.append(text)
        else:
            writer.refused.append(f"{answer.status_code}: {answer.text[:200]}")
            return


def _acknowledged(writers: list[Writer]) -> int:
    return sum(len(writer.acknowledged) for writer in writers)


def test_every_acknowledged_save_survives_a_sigkill(database_url: str, tmp_path: Path) -> None:
    server = ServerProcess(database_url, tmp_path).start()
    writers = [Writer(number, Learner(server.url)) for number in range(CLIENTS)]
    for writer in writers:
        writer.learner_id = writer.learner.id  # creates the learner, fetches the form token
    stop = threading.Event()
    threads = [
        threading.Thread(target=_write_until_the_server_dies, args=(writer, stop))
        for writer in writers
    ]
    try:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + DEADLINE_S
        while _acknowledged(writers) < KILL_AFTER_ACKS and time.monotonic() < deadline:
            if not any(thread.is_alive() for thread in threads):
                break
            time.sleep(0.005)
        server.kill()  # mid-load: the learners are still sending
        stop.set()
        for thread in threads:
            thread.join(timeout=DEADLINE_S)
    finally:
        server.kill()
        stop.set()

    assert [writer.refused for writer in writers] == [[]] * CLIENTS
    assert _acknowledged(writers) >= KILL_AFTER_ACKS
    # The kill cut requests off in flight, not after the load had ended.
    assert sum(writer.cut_off for writer in writers) >= 1

    with ServerProcess(database_url, tmp_path) as restarted:
        engine = make_engine(database_url)
        try:
            store = Store(engine)
            for writer in writers:
                saved = Counter(
                    str(event.payload["text"])
                    for event in store.events_for(writer.learner_id)
                    if event.kind is EventKind.TAKEAWAY_SAVED
                )
                missing = [text for text in writer.acknowledged if saved[text] != 1]
                assert missing == [], f"acknowledged but not stored exactly once: {missing}"
                assert all(count == 1 for count in saved.values()), saved
                assert set(saved) <= set(writer.sent)
        finally:
            engine.dispose()

        # The same cookies work on the restarted server, which takes new saves.
        for writer in writers:
            writer.learner.at(restarted.url)
            assert writer.learner.id == writer.learner_id
            answer = writer.learner.post("/takeaway", {"text": "after the restart"})
            assert answer.status_code == 200, answer.text
            assert writer.learner.state()["state"]["takeaway"] == "after the restart"
            writer.learner.close()
