"""The `normdive` command, every command declared here. Each body imports its work when it runs,
so importing this module reads only the defaults the help shows (`normdive --help` stays fast),
and only `record-runs` imports normdive.training and torch."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:
    from sqlalchemy import Engine

from normdive.config import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_RECORDING_PATH,
    DEFAULT_WORKERS,
    SECRET_KEY_MIN_LENGTH,
    Settings,
    environment_variable,
)
from normdive.lab.config import (
    LAB_EPS,
    LAB_EPS_ONLY_DEPTHS,
    LAB_EXTRA_EPS_SEEDS,
    OFFERED_DEPTHS,
    OFFERED_EPS,
)
from normdive.recording.format import DEFAULT_SEEDS, ROW_KEYS, RowKey, RunConfig
from normdive.recording.lab_grid import lab_path_for
from normdive.recording.sweep import SWEEP_DEPTHS, shard_path_for, sweep_path_for

app = typer.Typer(
    help="normdive: deep dive D9 'Layer norm and residuals'.",
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(help="The progress store's database.", no_args_is_help=True)
prerequisite_app = typer.Typer(help="Lesson 8.5, which D9 waits for.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(prerequisite_app, name="prerequisite")
lti_app = typer.Typer(
    help="LTI 1.3: the platforms (LMSs) registered to launch the lesson.", no_args_is_help=True
)
app.add_typer(lti_app, name="lti")
xapi_app = typer.Typer(
    help="Learning records: the learners' events as xAPI statements in a Learning Record Store.",
    no_args_is_help=True,
)
app.add_typer(xapi_app, name="xapi")

# A command refuses invalid settings with click's status for a usage error; `serve` refuses
# to start with it. A command that fails at its work ends with 1.
EXIT_SETTINGS_INVALID = 2
EXIT_FAILED = 1


def _refuse_to_serve(problems: list[str]) -> NoReturn:
    typer.echo("normdive serve: the settings are not valid, so the server did not start:", err=True)
    for line in problems:
        typer.echo(f"  {line}", err=True)
    raise typer.Exit(code=EXIT_SETTINGS_INVALID)


# Every setting's variable, from Settings itself, so a new setting is listed without a copy.
SETTINGS_VARIABLES = ", ".join(environment_variable(name) for name in Settings.model_fields)


@app.command(
    help="Serve the lesson page with uvicorn. Settings come from the environment "
    f"({SETTINGS_VARIABLES}); NORMDIVE_SECRET_KEY is required ({SECRET_KEY_MIN_LENGTH}+ "
    "characters, not guessable). README.md, 'Deploying it', says what each means."
)
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = DEFAULT_PORT,
    workers: Annotated[
        int, typer.Option(min=1, help="Worker processes (each opens its own connections).")
    ] = DEFAULT_WORKERS,
    reload: Annotated[
        bool, typer.Option(help="Restart on code changes (development only; one worker).")
    ] = False,
) -> None:
    from pydantic import ValidationError

    from normdive.config import Settings, settings_problems
    from normdive.web.infrastructure.serving import run
    from normdive.web.infrastructure.startup import APP_FACTORY, readiness_problems

    try:
        settings = Settings()  # secret_key comes from the environment
    except ValidationError as error:
        _refuse_to_serve(settings_problems(error))
    problems = readiness_problems(settings)
    if problems:
        _refuse_to_serve(problems)
    _store_environment_lrs(settings)
    run(APP_FACTORY, host=host, port=port, workers=workers, reload=reload)


def _fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    typer.secho(message, err=True, fg=typer.colors.RED)
    return typer.Exit(code=code)


def _database_url() -> str:
    """DATABASE_URL alone (these commands need no secret), refused when normdive cannot use it."""
    from pydantic import ValidationError

    from normdive.config import DatabaseSettings, settings_problems

    try:
        return DatabaseSettings().database_url
    except ValidationError as error:
        raise _fail("\n".join(settings_problems(error))) from None


def _settings(code: int = EXIT_FAILED) -> Settings:
    """The whole settings, refused with their problems and exit `code` when invalid."""
    from pydantic import ValidationError

    from normdive.config import settings_problems

    try:
        return Settings()
    except ValidationError as error:
        raise _fail("\n".join(settings_problems(error)), code) from None


# One course, by its context key (as lti_context_members stores it).
CONTEXT_OPTION = typer.Option(help="The course's context key (64 hex characters).")
# One course (--context), or the learners who came outside any LMS.
POOL_OPTION = typer.Option(
    "--context",
    help="The course's context key (64 hex characters, lti_context_members); "
    "without it, the anonymous pool.",
    show_default="the anonymous pool",
)


def _context_key(context: str) -> str:
    """`context` as the store keys it (lower case), refused unless it is 64 hex characters."""
    from normdive.web.infrastructure.instructor_access import is_context_key

    key = context.strip().lower()
    if not is_context_key(key):
        raise _fail(f"{context!r} is not a context key: 64 hex characters.")
    return key


@db_app.command(
    "upgrade",
    help="Create or update the progress store's tables (alembic upgrade head).\n\n"
    "Reads DATABASE_URL (default: a SQLite file under var/, whose folder is created). "
    "Safe to run again: it applies only the migrations the database does not have yet. "
    "Then keeps each learner's snapshot that is missing or behind (learner_snapshots), so "
    "the first instructor view after an upgrade does not fold every history.",
)
def db_upgrade() -> None:
    from sqlalchemy.exc import SQLAlchemyError

    from normdive.lesson.content import load_lesson
    from normdive.progress.history import History
    from normdive.store.db import (
        create_sqlite_folder,
        failure_reason,
        make_engine,
        shown_url,
        upgrade,
    )
    from normdive.store.snapshots import Snapshots

    url = _database_url()
    create_sqlite_folder(url)
    try:
        upgrade(url)
        engine = make_engine(url)
        try:
            kept = Snapshots(engine, History.start(load_lesson())).fill()
        finally:
            engine.dispose()
    except SQLAlchemyError as error:
        reason = failure_reason(error)
        raise _fail(f"Could not upgrade the database at {shown_url(url)}: {reason}") from None
    if kept:
        typer.echo(f"Kept the snapshots of {kept} learner(s) whose history had moved on.")
    typer.echo(f"The database at {shown_url(url)} is up to date.")


@prerequisite_app.command(
    "done",
    help="Record that a learner has finished lesson 8.5 The transformer block, which opens D9 "
    "to them.\n\n"
    "Reads DATABASE_URL. A learner who has written nothing yet (the locked page is all they "
    "could open) is stored by this; a learner already recorded as done is left as they are "
    "(exit 0).",
)
def prerequisite_done(
    learner: Annotated[
        str,
        typer.Option(
            "--learner",
            help="The learner's id: 32 hex characters, shown on their locked lesson page.",
        ),
    ],
) -> None:
    from normdive.store.db import shown_url
    from normdive.store.event_store import Store, UnknownLearner, is_learner_id
    from normdive.store.prerequisite import PrerequisiteSource, record_prerequisite_done

    learner_id = learner.strip().lower()
    if not is_learner_id(learner_id):
        raise _fail(f"{learner!r} is not a learner id: expected 32 hexadecimal characters.")
    url = _database_url()
    with opened_store(url) as engine:
        try:
            already_done = record_prerequisite_done(
                Store(engine), learner_id, PrerequisiteSource.OPERATOR
            )
        except UnknownLearner:
            raise _fail(f"No learner with id {learner_id} in {shown_url(url)}.") from None
    if already_done:
        typer.echo(f"Lesson 8.5 was already recorded as done for {learner_id}.")
    else:
        typer.echo(f"Lesson 8.5 is now recorded as done for {learner_id}; D9 is open to them.")


@contextmanager
def opened_store(url: str) -> Iterator[Engine]:
    """An engine for one command's work; a database error inside ends the command with one line
    saying where and why, never a traceback."""
    from sqlalchemy.exc import SQLAlchemyError

    from normdive.store.db import failure_reason, make_engine, shown_url

    engine = make_engine(url)
    try:
        yield engine
    except SQLAlchemyError as error:
        raise _fail(
            f"Could not use the store at {shown_url(url)}: {failure_reason(error)}. "
            "Has `normdive db upgrade` run on it?"
        ) from None
    finally:
        engine.dispose()


@lti_app.command(
    "register",
    help="Register a platform (an LMS) so that it can launch the lesson: the values its "
    "administrator shows for this tool.\n\nReads DATABASE_URL. Every URL must be https "
    "(plain http only for this machine).",
)
def lti_register(
    issuer: Annotated[
        str, typer.Option(help="The platform's issuer (iss), e.g. https://lms.example.edu.")
    ],
    client_id: Annotated[str, typer.Option(help="The client id the platform gave this tool.")],
    auth_login_url: Annotated[
        str, typer.Option(help="The platform's OIDC authorization endpoint.")
    ],
    token_url: Annotated[str, typer.Option(help="The platform's OAuth 2 token endpoint.")],
    jwks_url: Annotated[str, typer.Option(help="The platform's public key set (JWKS) URL.")],
    deployment_id: Annotated[
        list[str], typer.Option(help="A deployment id the platform launches from (repeatable).")
    ],
    prerequisite: Annotated[
        str,
        typer.Option(
            help="How lesson 8.5 is checked: platform (the LMS gates the lesson; a launch "
            "means done), report (wait for POST /api/prerequisite) or custom (the launch's "
            "custom parameter lesson_8_5_done)."
        ),
    ] = "platform",
    frame_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="An origin (https://host) whose pages frame the lesson, besides the issuer's "
            "and the login URL's: the course pages' host where it differs (repeatable).",
            show_default="the issuer's and the login URL's only",
        ),
    ] = None,
) -> None:
    from normdive.lti.registrations import RegistrationProblem, describe, register, validated

    try:
        given = validated(
            issuer=issuer,
            client_id=client_id,
            auth_login_url=auth_login_url,
            token_url=token_url,
            jwks_url=jwks_url,
            deployment_ids=tuple(deployment_id),
            prerequisite_mode=prerequisite,
            frame_origins=tuple(frame_origin or ()),
        )
    except RegistrationProblem as problem:
        raise _fail(f"Not registered: {problem}") from None
    with opened_store(_database_url()) as engine:
        try:
            registration = register(engine, given)
        except RegistrationProblem as problem:
            raise _fail(f"Not registered: {problem}") from None
    typer.echo("Registered:")
    for line in describe(registration):
        typer.echo(f"  {line}")


@lti_app.command("list", help="List the registered platforms. Reads DATABASE_URL.")
def lti_list() -> None:
    from normdive.lti.registrations import all_registrations, describe

    with opened_store(_database_url()) as engine:
        registrations = all_registrations(engine)
    if not registrations:
        typer.echo("No platform is registered.")
    for index, registration in enumerate(registrations):
        if index:
            typer.echo("")
        for line in describe(registration):
            typer.echo(line)


@lti_app.command(
    "remove",
    help="Remove a platform's registration, with its logins in flight and cached keys. "
    "Its learners keep their progress. Reads DATABASE_URL.",
)
def lti_remove(
    issuer: Annotated[str, typer.Option(help="The platform's issuer (iss).")],
    client_id: Annotated[str, typer.Option(help="The client id it gave this tool.")],
) -> None:
    from normdive.lti.registrations import UnknownRegistration, remove

    with opened_store(_database_url()) as engine:
        try:
            remove(engine, issuer.strip(), client_id.strip())
        except UnknownRegistration as missing:
            raise _fail(f"Nothing removed: {missing}.") from None
    typer.echo(f"Removed the registration of {issuer.strip()} with client id {client_id.strip()}.")


# The origin a printed URL starts with: --base-url, or else NORMDIVE_PUBLIC_ORIGIN.
BASE_URL_OPTION = typer.Option(
    help="The tool's own origin, as learners reach it: https://host (and :port if any).",
    show_default="NORMDIVE_PUBLIC_ORIGIN",
)


def _origin_and_settings(base_url: str | None) -> tuple[str, Settings]:
    """The origin of the URL to print, and the settings that sign it (NORMDIVE_SECRET_KEY)."""
    from normdive.config import ORIGIN_HOW_TO, exact_origin

    origin = exact_origin(base_url) if base_url is not None else None
    if base_url is not None and origin is None:
        raise _fail(f"{base_url!r} is not an origin: {ORIGIN_HOW_TO}.", EXIT_SETTINGS_INVALID)
    settings = _settings(EXIT_SETTINGS_INVALID)
    origin = origin or settings.public_origin
    if origin is None:
        raise _fail(
            "Give the tool's origin: --base-url https://host, or NORMDIVE_PUBLIC_ORIGIN.",
            EXIT_SETTINGS_INVALID,
        )
    return origin, settings


@lti_app.command(
    "invite",
    help="Print the URL an LMS administrator pastes into the platform's dynamic registration "
    "(good for a week and for one registration). Reads NORMDIVE_SECRET_KEY, which signs it.",
)
def lti_invite(
    base_url: Annotated[str | None, BASE_URL_OPTION] = None,
) -> None:
    from normdive.lti.dynamic_registration import invite_url

    origin, settings = _origin_and_settings(base_url)
    typer.echo(invite_url(origin, settings.secret_key))


@app.command(
    "instructor-link",
    help="Print a link that opens the instructor view of one course (--context) or of the "
    "learners who came outside any LMS, good for NORMDIVE_INSTRUCTOR_ACCESS_TTL_S seconds "
    "(default 8 hours). Reads NORMDIVE_SECRET_KEY, which signs it.",
)
def instructor_link(
    base_url: Annotated[str | None, BASE_URL_OPTION] = None,
    context: Annotated[str | None, POOL_OPTION] = None,
) -> None:
    from normdive.web.infrastructure.instructor_access import Pool, instructor_link

    key = _context_key(context) if context is not None else None
    origin, settings = _origin_and_settings(base_url)
    typer.echo(instructor_link(origin, Pool(key), settings.secret_key))


@app.command(
    "report",
    help="Write the instructor view's figures for one course (--context) or for the learners "
    "who came outside any LMS: one row per learner (--format csv or json) to --output, and "
    "the pool's aggregate as JSON beside it (NAME.aggregate.json). Columns: "
    "docs/instructor.md. Reads DATABASE_URL.",
)
def report(
    output: Annotated[Path, typer.Option(help="The per-learner file to write.")],
    context: Annotated[str | None, POOL_OPTION] = None,
    output_format: Annotated[
        str, typer.Option("--format", help="csv (one row per learner) or json (a list).")
    ] = "csv",
    recording: Annotated[
        Path, typer.Option(help="The recording whose rows the outcomes are read from.")
    ] = DEFAULT_RECORDING_PATH,
) -> None:
    from functools import partial

    from normdive.lesson.content import load_lesson
    from normdive.lti.roster import roster_of
    from normdive.progress.facts import recording_facts_at
    from normdive.progress.history import History
    from normdive.progress.report import PoolReportBuilder
    from normdive.progress.report_export import Chunks, json_chunks, write_export
    from normdive.store.snapshots import Snapshots
    from normdive.web.views.instructor_report import csv_chunks, learner_summaries
    from normdive.web.views.instructor_rerun import rerun_aggregate, rerun_report

    if output_format not in ("csv", "json"):
        raise _fail(f"--format {output_format!r}: give csv or json.")
    key = _context_key(context) if context is not None else None
    url = _database_url()
    lesson = load_lesson()
    facts = recording_facts_at(recording)
    with opened_store(url) as engine:
        summaries = learner_summaries(Snapshots(engine, History.start(lesson)), facts, key)
        chunks: Chunks = (
            partial(csv_chunks, lesson=lesson, roster=roster_of(engine, key))
            if output_format == "csv"
            else partial(json_chunks, lesson=lesson)
        )
        reruns = {"rerun": rerun_aggregate(rerun_report(engine, lesson, facts, key))}
        try:
            done = write_export(output, summaries, chunks, PoolReportBuilder(lesson, facts), reruns)
        except OSError as error:
            failed = error.filename or output
            raise _fail(f"Could not write {failed}: {error.strerror or error}.") from None
    typer.echo(
        f"{done.report.learners} learners: {output}; the pool's figures: {done.aggregate_path}"
    )


@lti_app.command(
    "rotate-key",
    help="Make a new signing key for the tool (grade passback's client assertions). The "
    "previous key stays published at /lti/jwks; older ones are retired. Reads DATABASE_URL.",
)
def lti_rotate_key() -> None:
    from normdive.lti.tool_keys import rotate

    with opened_store(_database_url()) as engine:
        kid = rotate(engine)
    typer.echo(f"The tool now signs with key {kid}; /lti/jwks publishes it and the previous one.")


@lti_app.command(
    "outbox",
    help="Show where the learners' scores go and how each grade target stands: its state, "
    "the platform's last answer, and what to do about it. Targets up to date are counted, "
    "not listed, unless --all. Reads DATABASE_URL.",
)
def lti_outbox(
    everything: Annotated[
        bool,
        typer.Option(
            "--all",
            help="List the targets up to date too.",
            show_default="the targets that wait or need action",
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Every target as a JSON list, for scripts.", show_default="plain text"
        ),
    ] = False,
    why: Annotated[
        bool,
        typer.Option(
            "--why",
            help="Say for each target what its last answer means and what to do, in plain "
            "words (a known answer of Moodle, Canvas or Open edX in its own sentence).",
            show_default="the state and the platform's last answer",
        ),
    ] = False,
) -> None:
    import json

    from normdive.lti.grade_doctor import TargetStatus, advice
    from normdive.lti.passback import targets

    with opened_store(_database_url()) as engine:
        found = targets(engine)
    if as_json:
        typer.echo(json.dumps([target.as_json() for target in found], indent=2))
        return
    attention = sum(target.needs_attention for target in found)
    waiting = sum(target.waiting and not target.needs_attention for target in found)
    typer.echo(
        f"{len(found)} grade target(s): {waiting} waiting to be sent, {attention} refused by "
        f"the platform or not sendable, {len(found) - waiting - attention} up to date."
    )
    # Terser than the instructor view's names (grade_doctor.STATE_NAMES): one line a target.
    states = {
        TargetStatus.DUE: "waiting to be sent",
        TargetStatus.SENT: "sent",
        TargetStatus.FAILING: "failing",
        TargetStatus.REFUSED: "refused",
        TargetStatus.GONE: "line item gone",
        TargetStatus.FOREIGN: "not sent (foreign URL)",
    }
    for target in found:
        if not (everything or target.waiting or target.needs_attention):
            continue
        due = f"next try {target.due_at:%Y-%m-%d %H:%M:%S} UTC" if target.due_at else "no try due"
        answered = (
            f"last answer {target.last_status or 'none'}" if target.updated_at else "not tried"
        )
        in_a_row = (
            f"; {target.attempts} failed tries in a row"
            if target.status is TargetStatus.FAILING
            else ""
        )
        typer.echo(
            f"  {target.learner_id}  user {target.user_id}  link {target.resource_link_id}  "
            f"{target.issuer}\n"
            f"    {states[target.status]}; {answered}{in_a_row}; {due}"
        )
        if why:
            said = advice(target.status, target.last_status, target.last_answer, target.reason)
            typer.echo(f"    what to do: {said}")
        elif target.reason:
            typer.echo(f"    {target.reason}")


@lti_app.command(
    "resend",
    help="Send one course's grades again where the platform's copy may be stale: each grade "
    "target whose learner's latest score is not what the platform last took, or whose last "
    "answer was not a success (after an enrolment was fixed, or the course published). "
    "Targets up to date are not sent. `normdive lti passback` sends them. Reads DATABASE_URL.",
)
def lti_resend(
    context: Annotated[str, CONTEXT_OPTION],
    recording: Annotated[
        Path, typer.Option(help="The recording the scores are read against (as the server's).")
    ] = DEFAULT_RECORDING_PATH,
) -> None:
    from normdive.lesson.content import load_lesson
    from normdive.lti.passback import resend_changed

    key = _context_key(context)
    with opened_store(_database_url()) as engine:
        done = resend_changed(engine, key, load_lesson(), recording)
    typer.echo(
        f"{done.queued} grade(s) queued to be sent again; {done.up_to_date} up to date, not "
        f"sent; {done.unsendable} with nowhere to go (a deleted line item or an unregistered "
        "host: `normdive lti outbox --why`)."
    )


# An outbox worker's one option.
ONCE = Annotated[
    bool,
    typer.Option(
        "--once", help="Send what is due now, then stop.", show_default="round after round"
    ),
]


def _until_stopped(work: Callable[[], None]) -> None:
    """An outbox worker's rounds, logged with their time, until Ctrl-C."""
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        work()
    except KeyboardInterrupt:
        typer.echo("Stopped.")


@lti_app.command(
    "passback",
    help="Send the scores in the outbox to the platforms, round after round (run it beside "
    "`normdive serve`, with the same settings; several may run). Failures wait and try again.",
)
def lti_passback(
    once: ONCE = False,
) -> None:

    from normdive.lesson.content import load_lesson
    from normdive.lti.passback import Sender, run

    settings = _settings()
    with opened_store(settings.database_url) as engine:
        _until_stopped(
            lambda: run(Sender(engine, load_lesson(), settings.recording_path), once=once)
        )


@lti_app.command(
    "roster",
    help="Fetch one course's roster from its platform (LTI Names and Role Provisioning "
    "Services) and keep it for the instructor view, unless it was fetched less than "
    "NORMDIVE_ROSTER_REFRESH_S seconds ago. The course must have been launched from with the "
    "service on. Reads DATABASE_URL and NORMDIVE_SECRET_KEY, as `normdive lti passback`.",
)
def lti_roster(
    context: Annotated[str, CONTEXT_OPTION],
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Fetch it even if it was fetched lately.",
            show_default="once per NORMDIVE_ROSTER_REFRESH_S",
        ),
    ] = False,
) -> None:
    from normdive.lti.roster import refresh

    key = _context_key(context)
    settings = _settings()
    with opened_store(settings.database_url) as engine:
        done = refresh(
            engine,
            key,
            keep_names=settings.roster_keep_names,
            interval_s=settings.roster_refresh_s,
            force=force,
        )
    if done.members is None:
        raise _fail(f"The roster was not refreshed: {done.problem}.")
    typer.echo(f"The roster lists {done.members} learner(s); the instructor view counts from it.")


def _store_environment_lrs(settings: Settings) -> None:
    """Store the environment's LRS (NORMDIVE_XAPI_ENDPOINT, _KEY, _SECRET), or forget the one
    stored from it when it names none: the outbox queues statements while an LRS is stored."""
    from normdive.xapi.lrs import LrsProblem, sync_environment

    with opened_store(settings.database_url) as engine:
        try:
            sync_environment(engine, settings)
        except LrsProblem as problem:
            raise _fail(str(problem), EXIT_SETTINGS_INVALID) from None


# An LRS's name, as `normdive xapi add` stored it.
LRS_NAME_OPTION = typer.Option("--name", help="The LRS's name here (how the commands name it).")


@xapi_app.command(
    "add",
    help="Store a Learning Record Store that the learners' statements go to: its statements "
    "resource and the key and secret it gave D9 (HTTP Basic). Without --context, the "
    "deployment's; with it, one course's, which takes that course's learners' statements "
    "instead. From now on every event of note is queued for it; `normdive xapi send` sends "
    "them. Reads DATABASE_URL.",
)
def xapi_add(
    endpoint: Annotated[
        str,
        typer.Option(
            help="The LRS's statements resource, e.g. https://lrs.example.edu/xAPI/statements."
        ),
    ],
    key: Annotated[str, typer.Option(help="The key (user name) the LRS gave D9.")],
    secret: Annotated[
        str,
        typer.Option(help="The secret (password) the LRS gave D9.", prompt=True, hide_input=True),
    ],
    name: Annotated[str, LRS_NAME_OPTION] = "lrs",
    context: Annotated[
        str | None,
        typer.Option(
            help="A course's context key (64 hex characters): this LRS takes its learners' "
            "statements.",
            show_default="the deployment's LRS",
        ),
    ] = None,
) -> None:
    from normdive.xapi.lrs import LrsProblem, add

    key_of_course = _context_key(context) if context is not None else None
    with opened_store(_database_url()) as engine:
        try:
            stored = add(engine, name, endpoint, key, secret, key_of_course)
        except LrsProblem as problem:
            raise _fail(f"Not stored: {problem}.") from None
    typer.echo(f"Stored the LRS {stored.name!r} for {stored.scope}: {stored.endpoint}")


@xapi_app.command("list", help="List the LRSs stored (their secrets left out). Reads DATABASE_URL.")
def xapi_list() -> None:
    from normdive.xapi.lrs import stored

    with opened_store(_database_url()) as engine:
        found = stored(engine)
    if not found:
        typer.echo("No LRS is stored: xAPI is off (`normdive xapi add`, or NORMDIVE_XAPI_*).")
    for lrs in found:
        typer.echo(f"{lrs.name}: {lrs.endpoint} (key {lrs.key}) for {lrs.scope}")


@xapi_app.command(
    "remove",
    help="Forget a stored LRS. Its statements not sent wait for the next LRS of their course or "
    "deployment. Reads DATABASE_URL.",
)
def xapi_remove(name: Annotated[str, LRS_NAME_OPTION]) -> None:
    from normdive.xapi.lrs import remove

    with opened_store(_database_url()) as engine:
        if not remove(engine, name):
            raise _fail(f"No LRS is named {name!r} (`normdive xapi list`).")
    typer.echo(f"Forgot the LRS {name!r}.")


@xapi_app.command(
    "send",
    help="Send the statements in the outbox to the LRSs, round after round (run it beside "
    "`normdive serve`, with the same settings; several may run). Failures wait and try "
    "again; a statement an LRS refuses is kept with its reason (`normdive xapi status`). "
    "Needs NORMDIVE_PUBLIC_ORIGIN, the origin the statements' IRIs are under.",
)
def xapi_send(
    once: ONCE = False,
) -> None:

    from normdive.lesson.content import load_lesson
    from normdive.lti.passback import run
    from normdive.xapi.outbox import NoPublicOrigin, Sender, deployment_tool

    settings = _settings()
    try:
        tool = deployment_tool(settings, load_lesson())
    except NoPublicOrigin as problem:
        raise _fail(str(problem), EXIT_SETTINGS_INVALID) from None
    _store_environment_lrs(settings)
    with opened_store(settings.database_url) as engine, Sender(engine, tool) as sender:
        _until_stopped(lambda: run(sender, once=once))


@xapi_app.command(
    "status",
    help="Say how the learners' statements stand: how many were sent, wait, or were refused, "
    "and for each refused or waiting event the LRS's last answer. Reads DATABASE_URL.",
)
def xapi_status(
    context: Annotated[
        str | None,
        typer.Option(help="Only one course's learners (its context key).", show_default="all"),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="As JSON, for scripts.", show_default="plain text"),
    ] = False,
) -> None:
    import json

    from normdive.xapi.lrs import stored
    from normdive.xapi.outbox import StatementStatus, attention, counts, refusal_sentence

    key = _context_key(context) if context is not None else None
    with opened_store(_database_url()) as engine:
        found, rows, lrss = counts(engine, key), attention(engine, key), stored(engine)
    if as_json:
        document = {
            "lrs": [
                {"name": lrs.name, "endpoint": lrs.endpoint, "scope": lrs.scope} for lrs in lrss
            ],
            "events": {status.value: n for status, n in found.items()},
            "attention": [row.as_json() for row in rows],
        }
        typer.echo(json.dumps(document, indent=2))
        return
    if not lrss:
        typer.echo("No LRS is stored: xAPI is off (`normdive xapi add`, or NORMDIVE_XAPI_*).")
    typer.echo(
        "Events of note: "
        + ", ".join(f"{n} {status.value.replace('_', ' ')}" for status, n in found.items())
        + "."
    )
    for row in rows:
        due = f"; next try {row.due_at:%Y-%m-%d %H:%M:%S} UTC" if row.due_at else ""
        typer.echo(
            f"  event {row.event_id} ({row.kind}) of learner {row.learner_id}: "
            f"{row.status.value}, LRS {row.lrs or '-'}, last answer {row.last_status or 'none'}"
            f"{due}"
        )
        if row.status is StatementStatus.REFUSED:
            typer.echo(f"    {refusal_sentence(row)}")
        elif row.reason:
            typer.echo(f"    {row.reason}")


LEARNER_OPTION = typer.Option(help="The learner's id (32 hex characters, as the page shows).")


@xapi_app.command(
    "resend",
    help="Queue a learner's statements again (all of them: the LRS keeps each once), those "
    "refused or stored before an LRS was set included; `normdive xapi send` sends them. "
    "Without --learner, every learner's refused ones. Reads DATABASE_URL.",
)
def xapi_resend(
    learner: Annotated[
        str | None,
        typer.Option(
            help="The learner's id (32 hex characters, as the page shows).",
            show_default="every learner's refused ones",
        ),
    ] = None,
) -> None:
    from normdive.xapi.outbox import resend, resend_refused

    with opened_store(_database_url()) as engine:
        queued = resend(engine, learner) if learner is not None else resend_refused(engine)
    typer.echo(f"{queued} event(s) queued to be sent again.")


@xapi_app.command(
    "forget",
    help="Remove a learner's statements from the LRS on their request: each one that may have "
    "reached it is voided (xAPI's way to withdraw a statement; the LRS leaves a voided "
    "statement out of every query), and those not sent are never sent. `normdive xapi send` "
    "sends the voiding statements. Reads DATABASE_URL.",
)
def xapi_forget(learner: Annotated[str, LEARNER_OPTION]) -> None:
    from normdive.xapi.outbox import forget

    with opened_store(_database_url()) as engine:
        done = forget(engine, learner)
    typer.echo(
        f"{done.voiding} event(s)' statements to be voided in the LRS, {done.withheld} never "
        "to be sent."
    )


@app.command("check-recording")
def check_recording(
    path: Annotated[
        Path, typer.Argument(help="The file to check: a recording, a depth sweep or a lab grid.")
    ],
) -> None:
    """Validate any file record-runs writes (the recording, its depth sweep or its lab grid)
    and print its summary (exit 1 when it cannot be used)."""
    from normdive.recording.kinds import check_file

    found = check_file(path)
    for line in found.lines:
        typer.echo(line)
    if found.problem is not None:
        typer.echo(found.problem.message, err=True)
        raise typer.Exit(EXIT_FAILED)


# The defaults of record-runs' options: the shipped recording's settings.
RUN_DEFAULTS = RunConfig()
# Where the depth sweep goes by default: beside the recording.
DEFAULT_SWEEP_PATH = sweep_path_for(DEFAULT_RECORDING_PATH)


def _described(field: str) -> str:
    """The help of a record-runs option: RunConfig's description of the field it sets."""
    return RunConfig.model_fields[field].description or field


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a comma-separated list of seeds") from None
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise typer.BadParameter(f"{text!r}: give distinct seeds >= 0, e.g. 0,1,2")
    return seeds


def parse_rows(text: str) -> list[RowKey]:
    wanted = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [w for w in wanted if w not in ROW_KEYS]
    if not wanted or unknown or len(set(wanted)) != len(wanted):
        raise typer.BadParameter(f"{text!r}: give distinct row keys from {', '.join(ROW_KEYS)}")
    return [key for key in ROW_KEYS if key in wanted]  # the page's order


def parse_depths(text: str) -> list[int]:
    try:
        depths = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a comma-separated list of depths") from None
    if not depths or any(not 1 <= d <= 64 for d in depths):
        raise typer.BadParameter(f"{text!r}: give depths from 1 to 64, e.g. 2,4,8,16")
    return depths


def parse_shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    try:
        shard = int(index), int(count)
    except ValueError:
        raise typer.BadParameter(f"{text!r}: write it as I/N, e.g. 2/4") from None
    if not 1 <= shard[0] <= shard[1]:
        raise typer.BadParameter(f"{text!r}: I must be from 1 to N, e.g. 2/4")
    return shard


def parse_eps(text: str) -> list[float]:
    try:
        values = sorted({float(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a comma-separated list of numbers") from None
    if not values or any(not (0 <= v < float("inf")) for v in values):
        raise typer.BadParameter(f"{text!r}: give finite eps values >= 0, e.g. 0,1e-5,1")
    return values


# The record-runs options that set a lab's shared settings when given with --lab (their
# defaults are the ablation's; the lab's own live in normdive.lab.config).
LAB_OVERRIDABLE = {
    "copy_length": "copy_length",
    "steps": "steps",
    "batch_size": "batch_size",
    "d_model": "d_model",
    "heads": "n_heads",
    "eval_every": "eval_every",
    "heldout_size": "heldout_size",
}


def _record_lab(ctx: typer.Context, rows: list[RowKey]) -> NoReturn:
    """record-runs --lab, its options read from `ctx`: the lab grid beside --out (docs/lab.md,
    "The grid file"), or the --shard I/N of it beside where the grid goes."""
    from pydantic import ValidationError

    options = ctx.params
    depths, eps, eps_seeds = options["lab_depths"], options["lab_eps"], options["lab_eps_seeds"]
    shard = parse_shard(options["shard"]) if options["shard"] is not None else None
    grid_out = lab_path_for(options["out"])

    from normdive.lab.config import LabBase
    from normdive.recording.runs import LabOffered

    def typed(option: str) -> bool:
        # By name: typer carries its own copy of click, whose ParameterSource is not click's.
        source = ctx.get_parameter_source(option)
        return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")

    given = {
        field: ctx.params[option] for option, field in LAB_OVERRIDABLE.items() if typed(option)
    }
    seed_list = parse_seeds(options["seeds"])
    extra: list[int] | None
    if eps_seeds is None:
        extra = None if LAB_EXTRA_EPS_SEEDS is None else list(LAB_EXTRA_EPS_SEEDS)
    elif eps_seeds == "all":
        extra = None
    else:
        extra = parse_seeds(eps_seeds)
    depth_list = parse_depths(depths) if depths is not None else list(OFFERED_DEPTHS)
    eps_list = parse_eps(eps) if eps is not None else list(OFFERED_EPS)
    # --lab-eps-seeds all asks for every eps everywhere; otherwise the deep depths are
    # recorded at the default eps only (when it is among those asked).
    narrow = [] if eps_seeds == "all" or LAB_EPS not in eps_list else LAB_EPS_ONLY_DEPTHS
    try:
        base = LabBase.model_validate(given)
        offered = LabOffered(
            depths=depth_list,
            eps=eps_list,
            inits=["gpt2", "pytorch"],
            seeds=seed_list,
            depth_eps={
                depth: [LAB_EPS]
                for depth in narrow
                if depth in depth_list and eps_list != [LAB_EPS]
            },
        )
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in error.errors()
        )
        typer.echo(f"Invalid settings: {problems}", err=True)
        raise typer.Exit(EXIT_SETTINGS_INVALID) from None

    from normdive.training.command import Asked, record_lab_runs  # torch: in the workers

    where = grid_out if shard is None else shard_path_for(grid_out, *shard)
    asked = Asked("cpu", options["jobs"], where, options["fresh"], shard)
    status = record_lab_runs(base, offered, rows, asked, extra_eps_seeds=extra)
    raise typer.Exit(status)


def _depths_option(plan: str, depths: tuple[int, ...], also: str = "") -> Any:
    """--sweep-depths or --lab-depths: the depths the plan `plan` trains, comma-separated;
    `depths` unless given (and `also`, said after them)."""
    shown = ",".join(map(str, depths)) + also
    return typer.Option(help=f"With {plan}: comma-separated depths.", show_default=shown)


@app.command("record-runs")
def record_runs(
    ctx: typer.Context,
    depth: Annotated[int, typer.Option(help=_described("depth"))] = RUN_DEFAULTS.depth,
    copy_length: Annotated[
        int, typer.Option(help=_described("copy_length"))
    ] = RUN_DEFAULTS.copy_length,
    steps: Annotated[int, typer.Option(help=_described("steps"))] = RUN_DEFAULTS.steps,
    batch_size: Annotated[
        int, typer.Option(help=_described("batch_size"))
    ] = RUN_DEFAULTS.batch_size,
    d_model: Annotated[int, typer.Option(help=_described("d_model"))] = RUN_DEFAULTS.d_model,
    heads: Annotated[int, typer.Option(help=_described("n_heads"))] = RUN_DEFAULTS.n_heads,
    init: Annotated[str, typer.Option(help=_described("init"))] = RUN_DEFAULTS.init,
    eval_every: Annotated[
        int, typer.Option(help=_described("eval_every"))
    ] = RUN_DEFAULTS.eval_every,
    heldout_size: Annotated[
        int, typer.Option(help=_described("heldout_size"))
    ] = RUN_DEFAULTS.heldout_size,
    seeds: Annotated[
        str,
        typer.Option(help="Comma-separated seeds; the first is the one the page plays."),
    ] = ",".join(map(str, DEFAULT_SEEDS)),
    rows: Annotated[str, typer.Option(help="Comma-separated rows to train.")] = ",".join(ROW_KEYS),
    device: Annotated[
        str, typer.Option(help="auto (CUDA when there is one), cpu or cuda.")
    ] = "auto",
    jobs: Annotated[
        int | None,
        typer.Option(help="Rows trained at once on the CPU.", show_default="the CPU count"),
    ] = None,
    out: Annotated[Path, typer.Option(help="Where the recording goes.")] = DEFAULT_RECORDING_PATH,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Discard finished rows of an interrupted run.",
            show_default="resume from them",
        ),
    ] = False,
    sweep: Annotated[
        bool,
        typer.Option(
            "--sweep",
            help="Record the depth sweep instead (docs/recording.md), into ...-sweep.json "
            "beside --out.",
            show_default="the ablation at --depth",
        ),
    ] = False,
    sweep_depths: Annotated[
        str | None, _depths_option("--sweep", SWEEP_DEPTHS, "; 32 too on cuda")
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            help="Train only the I-th of N disjoint slices (I/N) of the plan (the recording, "
            "--sweep or --lab), written beside its file as ...shard-I-of-N.json; join them "
            "with merge-recordings.",
            show_default="the whole plan",
        ),
    ] = None,
    lab: Annotated[
        bool,
        typer.Option(
            "--lab",
            help="Record the lab grid instead (docs/lab.md), into ...-lab.json beside --out, "
            "on the CPU, at the lab's settings (the options above change those typed).",
            show_default="the ablation",
        ),
    ] = False,
    lab_depths: Annotated[str | None, _depths_option("--lab", OFFERED_DEPTHS)] = None,
    lab_eps: Annotated[
        str | None,
        typer.Option(
            help="With --lab: the eps values recorded wherever layer norm is on.",
            show_default=",".join(f"{e:g}" for e in OFFERED_EPS),
        ),
    ] = None,
    lab_eps_seeds: Annotated[
        str | None,
        typer.Option(
            help="With --lab: the seeds at which eps values other than 1e-05 are recorded, "
            "or all (then depths "
            + " and ".join(map(str, LAB_EPS_ONLY_DEPTHS))
            + " too are recorded at every eps); the file says what was left out.",
            show_default="all"
            if LAB_EXTRA_EPS_SEEDS is None
            else ",".join(map(str, LAB_EXTRA_EPS_SEEDS)),
        ),
    ] = None,
) -> None:
    """Train the ablation rows and write the recording the page replays.

    Every row is the same stack and budget with layer norm and residuals switched on or off.
    Finished rows are kept beside the output, so an interrupted run resumes when the same
    command runs again; the previous recording is replaced only once the new one is whole.
    With --sweep, the same for the depth sweep; with --lab, for the lab grid.
    """
    from pydantic import ValidationError

    row_list = parse_rows(rows)
    if not lab and (lab_depths is not None or lab_eps is not None or lab_eps_seeds is not None):
        raise typer.BadParameter(
            "--lab-depths, --lab-eps and --lab-eps-seeds go with --lab", param_hint="--lab"
        )
    if lab:
        if sweep or depth != RUN_DEFAULTS.depth or init != RUN_DEFAULTS.init or device == "cuda":
            raise typer.BadParameter(
                "the lab grid trains every depth of --lab-depths with both inits, on the CPU; "
                "leave --sweep, --depth, --init and --device cuda out",
                param_hint="--lab",
            )
        if jobs is not None and jobs < 1:
            raise typer.BadParameter("give at least 1", param_hint="--jobs")
        _record_lab(ctx, row_list)
    seed_list = parse_seeds(seeds)
    if not sweep and sweep_depths is not None:
        raise typer.BadParameter("--sweep-depths goes with --sweep", param_hint="--sweep")
    if sweep and (depth != RUN_DEFAULTS.depth or init != RUN_DEFAULTS.init):
        raise typer.BadParameter(
            "the sweep trains every depth of --sweep-depths with both inits; "
            "leave --depth and --init out",
            param_hint="--sweep",
        )
    depth_list = parse_depths(sweep_depths) if sweep_depths is not None else None
    shard_part = parse_shard(shard) if shard is not None else None
    if device not in ("auto", "cpu", "cuda"):
        raise typer.BadParameter(f"{device!r}: choose auto, cpu or cuda", param_hint="--device")
    if jobs is not None and jobs < 1:
        raise typer.BadParameter("give at least 1", param_hint="--jobs")
    chosen = {
        "depth": depth,
        "copy_length": copy_length,
        "steps": steps,
        "batch_size": batch_size,
        "d_model": d_model,
        "n_heads": heads,
        "init": init,
        "eval_every": eval_every,
        "heldout_size": heldout_size,
    }
    try:
        config = RunConfig.model_validate(chosen)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in error.errors()
        )
        typer.echo(f"Invalid settings: {problems}", err=True)
        raise typer.Exit(EXIT_SETTINGS_INVALID) from None

    # torch from here on: normdive.training is the only code that imports it.
    from normdive.training.command import Asked, NoCudaDevice, record_sweep_runs
    from normdive.training.command import record_runs as train_and_record

    where = sweep_path_for(out) if sweep else out
    if shard_part is not None:
        where = shard_path_for(where, *shard_part)
    asked = Asked(device, jobs, where, fresh, shard_part)
    try:
        if sweep:
            status = record_sweep_runs(config, row_list, seed_list, asked, depths=depth_list)
        else:
            status = train_and_record(config, row_list, seed_list, asked)
    except NoCudaDevice as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(EXIT_SETTINGS_INVALID) from None
    raise typer.Exit(status)


@app.command("merge-recordings")
def merge_recordings(
    parts: Annotated[
        list[Path],
        typer.Argument(
            help="The shard files of one plan (all N of them), or whole lab grids that differ "
            "only in their depths."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            help="Where the merged file goes.",
            show_default="where record-runs writes that plan's file",
        ),
    ] = None,
) -> None:
    """Join the shards of one plan (record-runs [--sweep | --lab] --shard I/N) into one file,
    or whole lab grids of other depths into one grid (docs/lab.md, "Growing the grid by depths").

    Checks that they agree (same format, settings and plan), that none is missing or given
    twice, and that no run is in two of them; then writes the file whole or not at all.
    """
    from normdive.recording.files import UnfaithfulWrite, write_runs
    from normdive.recording.kinds import read_runs
    from normdive.recording.merge import MergeProblem, merge_runs
    from normdive.recording.reader import RecordingProblem

    try:
        read = [(str(path), read_runs(path)) for path in parts]
        joined_shards = any(runs.plan.shard is not None for _, runs in read)
        merged = merge_runs(read)
    except RecordingProblem as problem:
        raise _fail(problem.message) from None
    except MergeProblem as problem:
        raise _fail(f"Not merged: {problem}") from None
    target = (
        out
        or {
            "ablation": DEFAULT_RECORDING_PATH,
            "sweep": DEFAULT_SWEEP_PATH,
            "lab_grid": lab_path_for(DEFAULT_RECORDING_PATH),
        }[merged.plan.kind]
    )
    try:
        size = write_runs(target, merged)
    except (OSError, UnfaithfulWrite) as error:
        raise _fail(f"Could not write {target}: {error}") from None
    typer.echo(
        f"Merged {len(parts)} {'shard(s)' if joined_shards else 'lab grids'}, "
        f"{len(merged.runs)} runs, into {target} "
        f"({size / 1024:.1f} KiB)."
    )
