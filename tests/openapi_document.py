"""An OpenAPI document of the app's routes, describing what each one really takes and
answers, for the schemathesis tests (tests/test_security_schemathesis.py) to generate their
hostile cases from. The app serves no API documentation.

The route list is the app's own (`app.routes`, web.app.ROUTES), and this module fills in each
operation: the routes are plain Starlette and read their forms and JSON by hand (one flow for
every form, web.routes.actions), so nothing else describes their bodies. Written out here: the
form fields of every page form (with the lesson's own ids as enums where anything else is
refused), the carried switch/row/player fields, the form token, the learner cookie, the host
platform's JSON and bearer token, and every status a route gives with its body (a JSON answer
or an HTML page; refusals always hold a readable `message`).
`described_operations` lists what is written out; the tests hold it equal to the app's routes
(`route_operations`), so a new route cannot go unfuzzed.

Reference: OpenAPI 3.1, https://spec.openapis.org/oas/v3.1.0
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route

from normdive import __version__
from normdive.lesson.content import Lesson
from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.web.security import csrf

JSON = "application/json"
HTML = "text/html"
FORM = "application/x-www-form-urlencoded"
Schema = dict[str, Any]

LEARNER_ID: Schema = {"type": "string", "pattern": "^[0-9a-f]{32}$"}
REFUSAL: Schema = {
    "type": "object",
    "required": ["ok", "message"],
    "properties": {"ok": {"const": False}, "message": {"type": "string", "minLength": 1}},
}
FORM_ANSWER: Schema = {
    "type": "object",
    "required": ["ok", "message", "fragments"],
    "properties": {
        "ok": {"type": "boolean"},
        "message": {"type": "string"},
        "fragments": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
STATE: Schema = {
    "type": "object",
    "required": ["learner_id", "state", "csrf_token"],
    "properties": {
        "learner_id": LEARNER_ID,
        "state": {"type": "object"},
        "csrf_token": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
    },
}
HEALTH: Schema = {
    "type": "object",
    "required": ["ok"],
    "properties": {"ok": {"type": "boolean"}, "database": {"type": "string"}},
}
REPORTED: Schema = {
    "type": "object",
    "required": ["ok", "message"],
    "properties": {
        "ok": {"const": True},
        "message": {"type": "string", "minLength": 1},
        "already_done": {"type": "boolean"},
    },
}
PAGE: Schema = {"type": "string"}

SECURITY_SCHEMES: Schema = {
    "learnerCookie": {
        "type": "apiKey",
        "in": "cookie",
        "name": COOKIE_NAME,
        "description": "The anonymous learner, signed by the server (created on first visit).",
    },
    "formToken": {
        "type": "apiKey",
        "in": "header",
        "name": csrf.HEADER,
        "description": (
            "The learner's form token (GET /api/state, or the page's meta tag); may instead "
            f"be sent as the form field `{csrf.FIELD}`."
        ),
    },
    "hostToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "The host platform's token (NORMDIVE_HOST_TOKEN).",
    },
}


def _either(description: str, json: Schema) -> Schema:
    """A response given as JSON (Accept: application/json, or the API) or as an HTML page."""
    return {
        "description": description,
        "content": {JSON: {"schema": json}, HTML: {"schema": PAGE}},
    }


def _json(description: str, schema: Schema) -> Schema:
    return {"description": description, "content": {JSON: {"schema": schema}}}


def _refusals(*statuses: int) -> dict[str, Schema]:
    words = {
        400: "The body could not be read as a form.",
        403: "Refused: another origin, or no valid learner cookie or form token.",
        404: "No such row or hint in this lesson.",
        405: "This path does not take this method.",
        409: "Not yet: the action does not fit the learner's progress.",
        413: "The body is over the size limit.",
        422: "The input cannot be used as it is.",
        429: "Too many writes by this learner in the last minute (Retry-After says when).",
        503: "The progress store (or the recording) cannot be used right now.",
    }
    return {str(status): _either(words[status], REFUSAL) for status in statuses}


def _form_refusal(description: str) -> Schema:
    """A refused form: JSON with the regions re-drawn and the message, or the page with it."""
    return {
        "description": description,
        "content": {JSON: {"schema": FORM_ANSWER}, HTML: {"schema": PAGE}},
    }


def _text(max_length: int | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "string", **extra}
    if max_length is not None:
        schema["maxLength"] = max_length
    return schema


def _carried() -> dict[str, Schema]:
    """What every form carries for a page without JavaScript (view.Carry) and the token."""
    return {
        "eps": _text(description='The switch: "off" turns it off; anything else leaves it on.'),
        "row": _text(description="The learner's own row, as typed (dropped when unusable)."),
        "play": _text(description="The row in the player (dropped when the lesson has none)."),
        csrf.FIELD: _text(description="The learner's form token (or the X-CSRF-Token header)."),
    }


def _form_operation(fields: dict[str, Schema], *, refusals: tuple[int, ...] = ()) -> Schema:
    """A page form: 303 or JSON on success, refusals beside the form or as plain messages."""
    responses: dict[str, Schema] = {
        "200": _json("Done (Accept: application/json): the regions to re-draw.", FORM_ANSWER),
        "303": {
            "description": "Done (no JavaScript): back to the page, where the form was.",
            "headers": {"Location": {"schema": {"type": "string"}}},
        },
        "409": _form_refusal("Not yet: the action does not fit the learner's progress."),
        "422": _form_refusal("The input cannot be used as it is."),
        "429": {
            **_form_refusal("Too many writes by this learner in the last minute."),
            "headers": {"Retry-After": {"schema": {"type": "string", "pattern": "^[0-9]+$"}}},
        },
        **_refusals(400, 403, 413, *refusals),
    }
    return {
        "requestBody": {
            "required": False,
            "content": {
                FORM: {
                    "schema": {
                        "type": "object",
                        "properties": {**fields, **_carried()},
                        # A form holds text fields only; ones the form does not use are ignored.
                        "additionalProperties": {"type": "string"},
                    },
                }
            },
        },
        "security": [{"learnerCookie": [], "formToken": []}],
        "responses": responses,
    }


def _path_parameter(name: str, schema: Schema, description: str) -> Schema:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": schema,
        "description": description,
    }


def _query_parameter(name: str, description: str) -> Schema:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": _text(),
        "description": description,
    }


def _sweep_page(description: str) -> Schema:
    """GET of the sweep's figures: an HTML page or fragment, 409 (readable) before the gate
    has closed."""
    page = {HTML: {"schema": PAGE}}
    return {
        "parameters": [_query_parameter("cell", "The sweep's cell to show in the player.")],
        "security": [{}, {"learnerCookie": []}],
        "responses": {
            "200": {"description": description, "content": page},
            "409": {"description": "The learner's gate has not closed yet.", "content": page},
        },
    }


def _lab_page(description: str) -> Schema:
    """GET of the lab's panel or page: HTML, 409 (readable) before the gate has closed."""
    page = {HTML: {"schema": PAGE}}
    return {
        "security": [{}, {"learnerCookie": []}],
        "responses": {
            "200": {"description": description, "content": page},
            "409": {"description": "The learner's gate has not closed yet.", "content": page},
        },
    }


LAB_ANSWER: Schema = {
    "type": "object",
    "required": ["ok", "message", "html"],
    "properties": {
        "ok": {"type": "boolean"},
        "message": {"type": "string"},
        "html": {"type": "string"},
    },
}


RERUN_ANSWER: Schema = {
    "type": "object",
    "required": ["ok", "message", "results", "data", "startLabel"],
    "properties": {
        "ok": {"type": "boolean"},
        "message": {"type": "string"},
        "results": {"type": "string"},
        "data": {"type": "string"},
        "startLabel": {"type": "string"},
    },
}


def _lab_write(
    fields: dict[str, Schema], *refusals: int, answer: Schema = LAB_ANSWER, redirect: bool = True
) -> Schema:
    """A lab write (web.routes.lab, web.routes.rerun): JSON with the panel (or its results)
    drawn again, or (no JavaScript, the lab only) a redirect to /lab; refusals say why, as
    JSON or the lab's page."""
    done: dict[str, Schema] = {
        "303": {
            "description": "Done (no JavaScript): on to the lab's page.",
            "headers": {"Location": {"schema": {"type": "string"}}},
        }
    }
    return {
        "requestBody": {
            "required": False,
            "content": {
                FORM: {
                    "schema": {
                        "type": "object",
                        "properties": {
                            **fields,
                            csrf.FIELD: _text(description="The learner's form token."),
                        },
                        "additionalProperties": {"type": "string"},
                    },
                }
            },
        },
        "security": [{"learnerCookie": [], "formToken": []}],
        "responses": {
            "200": _json("Done: the panel drawn again, and what to announce.", answer),
            **(done if redirect else {}),
            "429": {
                **_either("Too many writes by this learner in the last minute.", REFUSAL),
                "headers": {"Retry-After": {"schema": {"type": "string", "pattern": "^[0-9]+$"}}},
            },
            **_refusals(400, 403, 409, 413, 422, 503, *refusals),
        },
    }


def _lab_operations(lesson: Lesson) -> dict[str, Schema]:
    offered = lesson.lab.offered
    choice = {
        "depth": {"type": "string", "enum": [str(depth) for depth in offered.depths]},
        "row": {"type": "string", "enum": [row.key for row in lesson.rows]},
        "eps": {"type": "string", "enum": [f"{eps.normalize():f}" for eps in offered.eps]},
        "init": {"type": "string", "enum": list(offered.inits)},
        "seed": {"type": "string", "enum": [str(seed) for seed in offered.seeds]},
        "outcome": {"type": "string", "enum": [o.id for o in lesson.outcomes]},
    }
    return {
        "/lab": {"get": _lab_page("The lab as a page: the learner's runs and the grid.")},
        "/lab/panel": {"get": _lab_page("The lab's panel, as HTML the page swaps in.")},
        "/lab/runs": {"post": _lab_write(choice)},
        "/lab/runs/{number}/result": {
            "post": {
                **_lab_write({"result": _text(description='JSON {"final", "curve"}.')}, 404),
                "parameters": [_path_parameter("number", _text(), "The learner's lab run.")],
            }
        },
        "/lab/rerun/panel": {"get": _lab_page("The re-run's panel, as HTML the page swaps in.")},
        "/lab/reruns/{number}/rows/{row}": {
            "post": {
                **_lab_write(
                    {"result": _text(description='JSON {"final", "curve"}.')},
                    404,
                    answer=RERUN_ANSWER,
                    redirect=False,
                ),
                "parameters": [
                    _path_parameter("number", _text(), "The learner's re-run of the ablation."),
                    _path_parameter("row", _text(), "The row of the ablation."),
                ],
            }
        },
    }


def _lti_answer(description: str, *refusals: int) -> dict[str, Schema]:
    """An LTI step's answers: the page (or a redirect) it goes on with, or a refusal page an
    administrator can read (normdive.lti.refusal: 4xx, nothing stored)."""
    page = {HTML: {"schema": PAGE}}
    answers: dict[str, Schema] = {
        "200": {"description": description, "content": page},
        "303": {
            "description": "On to the next step (the platform, or the lesson).",
            "headers": {"Location": {"schema": {"type": "string"}}},
        },
    }
    for status in refusals:
        # A body the app cannot read (too large, too many fields) is refused before the LTI
        # step, by the app's own handler: JSON or a page, as for every route.
        content = {**page, JSON: {"schema": REFUSAL}} if status in (400, 413) else page
        answers[str(status)] = {"description": "Refused, saying why.", "content": content}
    return answers


# The OIDC login initiation's parameters (LTI 1.3 core, 5.1.1; all text).
LTI_LOGIN_FIELDS = (
    "iss",
    "login_hint",
    "target_link_uri",
    "lti_message_hint",
    "lti_deployment_id",
    "client_id",
    "lti_storage_target",
)


def _lti_operations() -> dict[str, dict[str, Schema]]:
    login_fields = {name: _text() for name in LTI_LOGIN_FIELDS}
    login_refusals = (400, 401, 403, 413, 429)
    return {
        "/lti/login": {
            "get": {
                "parameters": [
                    _query_parameter(name, "An OIDC login initiation parameter.")
                    for name in LTI_LOGIN_FIELDS
                ],
                "responses": _lti_answer("The platform's storage flow, or on.", *login_refusals),
            },
            "post": {
                "requestBody": {
                    "required": False,
                    "content": {FORM: {"schema": {"type": "object", "properties": login_fields}}},
                },
                "responses": _lti_answer("The platform's storage flow, or on.", *login_refusals),
            },
        },
        "/lti/launch": {
            "post": {
                "requestBody": {
                    "required": False,
                    "content": {
                        FORM: {
                            "schema": {
                                "type": "object",
                                "properties": {"id_token": _text(), "state": _text()},
                            }
                        }
                    },
                },
                "responses": _lti_answer("The launch's next page.", 400, 401, 403, 409, 413),
            }
        },
        "/lti/jwks": {
            "get": {"responses": {"200": _json("The tool's public keys.", {"type": "object"})}}
        },
        "/lti/canvas.json": {
            "get": {
                "responses": {
                    "200": _json("Canvas's developer key configuration.", {"type": "object"})
                }
            }
        },
        "/lti/register": {
            "get": {
                "parameters": [
                    _query_parameter(name, "A dynamic registration parameter.")
                    for name in ("invite", "openid_configuration", "registration_token")
                ],
                "responses": _lti_answer("Registered.", 400, 403, 429, 503),
            }
        },
        "/lti/review/{learner_id}": {
            "get": {
                "parameters": [
                    _path_parameter("learner_id", _text(), "The learner reviewed."),
                    _query_parameter("grant", "A review grant (lti.submission_review)."),
                ],
                "responses": _lti_answer("The learner's work, read-only.", 403),
            }
        },
    }


def _instructor_operations() -> dict[str, dict[str, Schema]]:
    """The instructor view: its page, the CSV and the figures; 403 (readable) without the
    instructor cookie or a valid link."""
    no_access = _either("No instructor access: no cookie, or a link forged or expired.", REFUSAL)
    page = {HTML: {"schema": PAGE}}
    return {
        "/instructor": {
            "get": {
                "parameters": [_query_parameter("access", "An instructor link's token.")],
                "responses": {
                    "200": {"description": "The view.", "content": page},
                    "303": {
                        "description": "A link's token exchanged for the cookie.",
                        "headers": {"Location": {"schema": {"type": "string"}}},
                    },
                    "403": no_access,
                },
            }
        },
        "/instructor/export.csv": {
            "get": {
                "responses": {
                    "200": {
                        "description": "One row per learner.",
                        "content": {"text/csv": {"schema": {"type": "string"}}},
                    },
                    "403": no_access,
                }
            }
        },
        "/instructor/aggregate.json": {
            "get": {
                "responses": {
                    "200": _json("The pool's figures.", {"type": "object"}),
                    "403": no_access,
                }
            }
        },
        "/instructor/resend": {
            "post": {
                "requestBody": {
                    "required": False,
                    "content": {
                        FORM: {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    csrf.FIELD: _text(description="The view's form token.")
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "303": {
                        "description": "Queued: back to the view, with the counts.",
                        "headers": {"Location": {"schema": {"type": "string"}}},
                    },
                    "403": no_access,
                    **_refusals(400, 413),
                },
            }
        },
    }


def operations(lesson: Lesson) -> dict[str, dict[str, Schema]]:
    """Each route's parameters, body and answers, by path and method."""
    number_fields = {
        field.id: _text(description=f"{field.label}: a number as typed (blank: not checked).")
        for field in lesson.number_fields
    }
    row_key = _path_parameter(
        "key", {"type": "string", "enum": [row.key for row in lesson.rows]}, "The row's key."
    )
    rung = _path_parameter(
        "rung",
        {"type": "integer", "minimum": 1, "maximum": len(lesson.hints.rungs)},
        "The hint's number.",
    )
    optional_learner: list[Schema] = [{}, {"learnerCookie": []}]
    return {
        "/": {
            "get": {
                "parameters": [
                    _query_parameter("eps", 'The switch: "off" turns it off.'),
                    _query_parameter("row", "The learner's own row (1 to 16 numbers)."),
                    _query_parameter("play", "The played row to show in the player."),
                ],
                "security": optional_learner,
                "responses": {
                    "200": {"description": "The lesson page.", "content": {HTML: {"schema": PAGE}}},
                    "303": {"description": "A parameter given twice: the address with it once."},
                },
            }
        },
        "/api/state": {
            "get": {
                "security": optional_learner,
                "responses": {"200": _json("The learner's state and form token.", STATE)},
            }
        },
        "/depths": {"get": _sweep_page("The runs at other depths, as a page.")},
        "/depths/panel": {"get": _sweep_page("The runs at other depths, as the panel's HTML.")},
        **_lab_operations(lesson),
        **_lti_operations(),
        **_instructor_operations(),
        "/healthz": {
            "get": {
                "responses": {
                    "200": _json("The progress store answers.", HEALTH),
                    "503": _json("The progress store does not answer.", REFUSAL),
                }
            }
        },
        "/predict": {
            "post": _form_operation(
                {"choice": {"type": "string", "enum": [c.id for c in lesson.predict.choices]}},
            )
        },
        "/numbers": {"post": _form_operation(number_fields)},
        "/reading": {
            "post": _form_operation(
                {"choice": {"type": "string", "enum": [c.id for c in lesson.reading.choices]}},
            )
        },
        "/takeaway": {"post": _form_operation({"text": _text(lesson.takeaway.max_chars)})},
        "/rows/{key}/predict": {
            "post": {
                "parameters": [row_key],
                **_form_operation(
                    {"outcome": {"type": "string", "enum": [o.id for o in lesson.outcomes]}},
                    refusals=(404,),
                ),
            }
        },
        "/rows/{key}/play": {
            "post": {"parameters": [row_key], **_form_operation({}, refusals=(404,))}
        },
        "/hints/{rung}": {"post": {"parameters": [rung], **_form_operation({}, refusals=(404,))}},
        "/api/prerequisite": {
            "post": {
                "requestBody": {
                    "required": True,
                    "content": {
                        JSON: {
                            "schema": {
                                "type": "object",
                                "required": ["learner_id"],
                                "properties": {"learner_id": LEARNER_ID},
                            }
                        }
                    },
                },
                "security": [{"hostToken": []}],
                "responses": {
                    "200": _json("Recorded (or recorded before: already_done).", REPORTED),
                    "401": {
                        **_json("No host token, or not the one this server expects.", REFUSAL),
                        "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
                    },
                    "404": _json("No learner with that id.", REFUSAL),
                    "413": _json("The body is over the size limit.", REFUSAL),
                    "422": _json("The body is not a JSON object with a learner id.", REFUSAL),
                    "503": _json("This server has no host token set.", REFUSAL),
                },
            }
        },
    }


def _route_methods(routes: Sequence[BaseRoute]) -> dict[str, dict[str, Route]]:
    """path -> method -> route, for every route but the static files' mount; HEAD, which
    Starlette adds to every GET route, is the GET operation and not described apart."""
    paths: dict[str, dict[str, Route]] = {}
    for route in routes:
        if isinstance(route, Route):
            for method in sorted((route.methods or set()) - {"HEAD"}):
                paths.setdefault(route.path, {})[method.lower()] = route
    return paths


def openapi_document(app: Starlette) -> dict[str, Any]:
    """The OpenAPI document of the app's own routes, each operation written out by
    `operations` (with the route's docstring as its description)."""
    described = operations(app.state.services.lesson)
    paths: dict[str, dict[str, Schema]] = {}
    for path, methods in _route_methods(app.routes).items():
        for method, route in methods.items():
            written = described.get(path, {}).get(method, {"responses": {}})
            summary = route.name.replace("_", " ").capitalize()
            doc = inspect.getdoc(route.endpoint) or summary
            paths.setdefault(path, {})[method] = {
                "summary": summary,
                "description": doc,
                "operationId": f"{route.name}_{method}",
                **written,
            }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "normdive",
            "version": __version__,
            "description": "The D9 deep dive's lesson page and its host platform API.",
        },
        "paths": paths,
        "components": {"securitySchemes": SECURITY_SCHEMES},
    }


def route_operations(routes: Sequence[BaseRoute]) -> list[str]:
    """Every operation of these routes, as "METHOD /path" (the static files' mount aside)."""
    return [
        f"{method.upper()} {path}"
        for path, methods in _route_methods(routes).items()
        for method in methods
    ]


def described_operations(lesson: Lesson) -> list[str]:
    """Every operation `operations` writes out, as "METHOD /path"."""
    return [
        f"{method.upper()} {path}"
        for path, methods in operations(lesson).items()
        for method in methods
    ]
