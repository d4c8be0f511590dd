"""web.views.rendering's compiled templates: every Environment make_environment builds shares the
code compiled once in the process, renders exactly as a freshly compiled one, and compiles a
template again once its source has changed; the parts of the page drawn once and reused
(kept regions), which draw every learner's page byte for byte as a page drawn afresh; and the
filter that lets a setting's long name break at its underscores."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jinja2 import Environment

from helpers import SettingsFactory, ablation_recording, write_recording
from lesson_answers import LESSON, RIGHT_NUMBERS, RIGHT_READING_ID, WRONG_READING_ID
from normdive.progress.events import Event, EventKind
from normdive.progress.facts import recording_facts
from normdive.progress.state import derive
from normdive.web.app import create_app
from normdive.web.views import player, sweep
from normdive.web.views.page import build_page_view
from normdive.web.views.rendering import COMPILED_TEMPLATES, Renderer, breakable, make_environment
from page_client import PageClient


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the templates Jinja compiles from source while the test runs."""
    names: list[str] = []
    compile_source = Environment.compile

    def counted(self: Environment, source: str, name: str | None = None, *more: Any) -> Any:
        names.append(str(name))
        return compile_source(self, source, name, *more)

    monkeypatch.setattr(Environment, "compile", counted)
    return names


def test_a_second_renderer_compiles_nothing_and_renders_the_same(compiled: list[str]) -> None:
    first = Renderer()
    compiled.clear()
    second = Renderer()
    assert compiled == []
    assert second.env is not first.env
    page = first.error(404, "Not found", "No such <page>.")
    assert second.error(404, "Not found", "No such <page>.") == page
    assert "No such &lt;page&gt;." in page  # still autoescaped: the options are the same


def test_an_edited_template_is_compiled_again(tmp_path: Path, compiled: list[str]) -> None:
    template = tmp_path / "note.html"
    template.write_text("<p>{{ word }}</p>")
    assert make_environment(tmp_path).get_template("note.html").render(word="<a>") == (
        "<p>&lt;a&gt;</p>"
    )
    assert make_environment(tmp_path).get_template("note.html").render(word="b") == "<p>b</p>"
    assert compiled == ["note.html"]  # the second environment took the kept code

    template.write_text("<em>{{ word }}</em>")
    assert make_environment(tmp_path).get_template("note.html").render(word="c") == "<em>c</em>"
    assert compiled == ["note.html", "note.html"]


def test_a_cleared_cache_compiles_again(compiled: list[str]) -> None:
    Renderer()
    COMPILED_TEMPLATES.clear()
    compiled.clear()
    Renderer()
    assert "page.html" in compiled and "fragments.html" in compiled


def test_templates_of_the_same_name_in_two_folders_are_kept_apart(tmp_path: Path) -> None:
    for folder, text in (("one", "first"), ("two", "second")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "same.html").write_text(text)
    one = make_environment(tmp_path / "one").get_template("same.html").render()
    two = make_environment(tmp_path / "two").get_template("same.html").render()
    assert (one, two) == ("first", "second")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "The limit is NORMDIVE_OPEN_LTI_LOGINS.",
            "The limit is NORMDIVE_<wbr>OPEN_<wbr>LTI_<wbr>LOGINS.",
        ),
        # Short names, lower-case words and one underscore are left whole.
        ("row1_mean and MAX_SIZE", "row1_mean and MAX_SIZE"),
        ("snake_case_words", "snake_case_words"),
        # The text is escaped first: only the filter's own <wbr> is markup.
        ("<b>A_B_C</b>", "&lt;b&gt;A_<wbr>B_<wbr>C&lt;/b&gt;"),
    ],
)
def test_breakable_lets_long_names_break_after_their_underscores(text: str, expected: str) -> None:
    assert str(breakable(text)) == expected


# --- kept regions -----------------------------------------------------------------------------

JSON = {"Accept": "application/json"}
COMMIT = [("/predict", {"choice": "residual"})]
ROW_PREDICTIONS = [
    ("/rows/both/predict", {"outcome": "learns"}),
    ("/rows/residual_only/predict", {"outcome": "partial"}),
    ("/rows/layernorm_only/predict", {"outcome": "chance"}),
    ("/rows/neither/predict", {"outcome": "chance"}),
]
PLAY_ALL = [(f"/rows/{key}/play", {}) for key in ("residual_only", "layernorm_only", "neither")]
# Learners at the lesson's stages: what each posted (as the page's script does).
STAGES: dict[str, list[tuple[str, dict[str, str]]]] = {
    "no event yet": [],
    "committed": COMMIT,
    "checked and read wrong": [
        *COMMIT,
        ("/numbers", {"row1_mean": "2.5", "row1_variance": "one", "row2_mean": "3"}),
        ("/reading", {"choice": WRONG_READING_ID}),
    ],
    "one row played": [*COMMIT, *ROW_PREDICTIONS, ("/rows/both/play", {})],
    "two rows played": [*COMMIT, *ROW_PREDICTIONS, ("/rows/both/play", {}), PLAY_ALL[-1]],
    "gate closed": [
        *COMMIT,
        ("/numbers", RIGHT_NUMBERS),
        ("/reading", {"choice": RIGHT_READING_ID}),
        *ROW_PREDICTIONS,
        ("/rows/both/play", {}),
        *PLAY_ALL,
        ("/takeaway", {"text": "Mine <b>&</b> nobody else's"}),
    ],
}
# The switch, a learner's own row and the row in the player, as a page without JavaScript
# carries them in its address.
ADDRESSES = ("/", "/?eps=off", "/?row=1,%202,%203", "/?eps=off&row=7,7,7.5&play=neither")


def forget_the_recordings_views() -> None:
    for kept_view in (
        player.player_view,
        player.together_view,
        player.gradients_view,
        player.provenance_view,
        sweep.played_intro,
    ):
        kept_view.cache_clear()  # type: ignore[attr-defined]


def test_kept_regions_draw_every_page_as_a_fresh_renderer_does(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    """Every learner's page, at every stage and address, drawn by one server that has drawn
    all the others (its regions kept) is byte for byte the page a new server draws (nothing
    kept): a kept region keyed by less than it reads would show one learner's part to another."""
    settings = make_settings(recording_path=write_recording(tmp_path, ablation_recording()))
    warm = create_app(settings)
    cookies = {}
    with PageClient(warm, follow_redirects=False) as client:
        for stage, posts in STAGES.items():
            client.cookies.clear()
            assert client.get("/").status_code == 200
            for path, data in posts:
                assert client.post(path, data=data, headers=JSON).status_code == 200, path
            cookies[stage] = dict(client.cookies.items())
    pages = [(stage, address) for stage in STAGES for address in ADDRESSES]

    def drawn(app: Any, stage: str, address: str) -> str:
        with PageClient(app, follow_redirects=False, cookies=cookies[stage]) as client:
            answer = client.get(address)
        assert answer.status_code == 200
        return answer.text

    for stage, address in pages:  # every region drawn once, in this order
        drawn(warm, stage, address)
    for stage, address in reversed(pages):
        forget_the_recordings_views()
        fresh = drawn(create_app(settings), stage, address)
        assert drawn(warm, stage, address) == fresh, (stage, address)


def test_a_second_learner_at_the_same_stage_gets_every_part_drawn_for_the_first() -> None:
    """The lesson's text, the hand rows, the charts and every region a learner's state draws
    are the same for two learners at the same stage (their states derived apart, equal): the
    second page runs no filter at all, yet carries its own form token in every form."""
    calls: list[str] = []
    env = make_environment()
    for name, function in list(env.filters.items()):
        env.filters[name] = counted(name, function, calls)
    renderer = Renderer(env)
    facts = recording_facts(ablation_recording())
    per_page = []
    for learner_id, token in (("a" * 32, "1" * 64), ("b" * 32, "2" * 64)):
        state = derive(
            [event(EventKind.PREDICTION_COMMITTED, choice="residual")],
            LESSON,
            recording=facts,
            dev_prerequisite_done=True,
        )
        page = renderer.page(build_page_view(LESSON, state, learner_id, csrf_token=token))
        forms = page.count("<form")
        assert page.count(f'name="csrf_token" value="{token}"') == forms - OWN_GET_FORMS
        per_page.append(list(calls))
        calls.clear()
    first, second = per_page
    assert "num" in first
    assert second == []


# The switch and the learner's own row are GET forms: they carry no form token.
OWN_GET_FORMS = 2


def counted(name: str, function: Any, calls: list[str]) -> Any:
    """`function`, a Jinja filter, noting its name in `calls` at each call."""

    @functools.wraps(function)
    def filter_counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return function(*args, **kwargs)

    return filter_counted


def event(kind: EventKind, **payload: object) -> Event:
    return Event(0, "0" * 32, kind, dict(payload), datetime(2025, 1, 1, tzinfo=UTC))
