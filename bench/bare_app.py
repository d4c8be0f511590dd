"""The ceilings for bench/load.py, served by uvicorn with the same options and worker count as
`normdive serve` (servers.bare_server):

    GET /        answers and does nothing else: the ceiling of any request
    POST /write  one durable SQLite insert, then a small JSON: the ceiling of a request that
                 must write (the "floor" of load.py)

POST /write opens the SQLite file named by $BARE_DATABASE_PATH the way normdive's store opens
its database (normdive.store.db._configure_sqlite: WAL, foreign keys, a busy timeout) and
keeps SQLite's default synchronous=FULL, which the store keeps too (set here by name so the
floor stays durable whatever the build's default): every insert is its own autocommit
transaction, fsynced to the WAL before the answer, as the store's autocommit appends are.
Like normdive's routes it runs its database call in the thread pool (a plain `def` route),
one connection per thread. Without $BARE_DATABASE_PATH the route is not there.
"""

from __future__ import annotations

import os
import sqlite3
import threading

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

# The variable servers.bare_server sets to the floor's SQLite file.
DATABASE_PATH_VARIABLE = "BARE_DATABASE_PATH"
# normdive.store.db's pragmas, by value (this app imports nothing of normdive's).
SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=10000",
    "PRAGMA synchronous=FULL",
)
# A row about the size of one numbers_checked event's payload (six short answers).
PAYLOAD = '{"answers": [' + ", ".join(['{"field": "f", "raw": "2.5", "verdict": "wrong"}'] * 6)
PAYLOAD += "]}"
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS writes ("
    "id INTEGER PRIMARY KEY, payload TEXT NOT NULL, "
    "created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)"
)


def _connect(path: str) -> sqlite3.Connection:
    # isolation_level=None: autocommit, each INSERT one transaction, as Store._writing.
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    for pragma in SQLITE_PRAGMAS:
        connection.execute(pragma)
    return connection


async def hello(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


def create_app() -> Starlette:
    """GET / that only answers; with DATABASE_PATH_VARIABLE set, POST /write too (the floor)."""
    path = os.environ.get(DATABASE_PATH_VARIABLE)
    if not path:
        return Starlette(routes=[Route("/", hello)])
    _connect(path).execute(SCHEMA).connection.close()
    local = threading.local()

    def write(request: Request) -> JSONResponse:
        # A plain function: Starlette runs it in its thread pool, as the app's writes are.
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = _connect(path)
        row_id = connection.execute("INSERT INTO writes (payload) VALUES (?)", (PAYLOAD,)).lastrowid
        return JSONResponse({"ok": True, "id": row_id})

    return Starlette(routes=[Route("/", hello), Route("/write", write, methods=["POST"])])
