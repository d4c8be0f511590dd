"""The ceiling for bench/load.py: one FastAPI endpoint that does nothing but answer, served by
uvicorn with the same options and worker count as `normdive serve`."""

from __future__ import annotations

from fastapi import FastAPI


def create_app() -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/")
    async def hello() -> dict[str, bool]:
        return {"ok": True}

    return app
