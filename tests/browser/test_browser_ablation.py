"""The ablation in Chromium, found by role and label, on one server per module that reads a
sample recording from a tmp file and starts every learner locked (8.5 not done):
- a learner on a 375 px phone walks from the locked page to a closed gate, reloading in the
  middle of each section, and the hint rungs open at exactly 3 and 5 runs (the walk is timed
  and the seconds printed: run with -s to read them);
- a second learner in another browser context sees none of the first's state but, once
  committed, the aggregate of all learners;
- a row predicted from the keyboard keeps the focus on that row;
- axe-core finds no violations with the player's charts and the gradient bars on screen."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page, expect
from starlette.applications import Starlette

from helpers import (
    HOST_TOKEN,
    ablation_recording,
    build_settings,
    migrated_sqlite_url,
    write_recording,
)
from lesson_answers import LESSON
from lesson_answers import RIGHT_READING_CHOICE as RIGHT_READING
from lesson_answers import WRONG_READING_CHOICE as WRONG_READING
from live_server import LiveServer
from normdive.progress.events import EventKind
from normdive.web.app import create_app

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
PHONE = {"width": 375, "height": 812}
ROW_LABELS = {row.key: row.label for row in LESSON.rows}
OUTCOME_LABELS = {outcome.id: outcome.label for outcome in LESSON.outcomes}
PREDICTIONS = {
    "both": "learns",
    "residual_only": "partial",
    "layernorm_only": "chance",
    "neither": "chance",
}
NUMBERS = {
    "Mean of [1, 2, 3]": "2",
    "Variance of [1, 2, 3]": "2/3",
    "Denominator of [1, 2, 3]": "0.8165",
    "Mean of [2, 2, 2, 6]": "3",
    "Variance of [2, 2, 2, 6]": "3",
    "Denominator of [2, 2, 2, 6]": "1.732",
}
# A play animates over about three seconds; give a shared, busy machine room.
ANIMATION_TIMEOUT_MS = 20_000
AXE = "node_modules/axe-core/axe.min.js"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Starlette]]:
    folder = tmp_path_factory.mktemp("ablation-live")
    settings = build_settings(
        migrated_sqlite_url(folder),
        folder,
        dev_prerequisite_done=False,
        recording_path=write_recording(folder, ablation_recording()),
    )
    app = create_app(settings)
    server = LiveServer(app)
    server.start()
    yield server, app
    server.stop()


@pytest.fixture(scope="module")
def live_server(served: tuple[LiveServer, Starlette]) -> LiveServer:
    """This module's server (overrides the session's, which has no recording)."""
    return served[0]


# --- steps ------------------------------------------------------------------------------------


def unlock(page: Page) -> str:
    """The locked page, then the host platform reports 8.5 done for this learner (whose id
    is returned)."""
    page.goto("/")
    expect(
        page.get_by_role("heading", name=f"Waiting for {LESSON.prerequisite.id} ")
    ).to_be_visible()
    learner_id = page.locator("#learner-id").inner_text()
    answer = page.request.post(
        "/api/prerequisite",
        data=json.dumps({"learner_id": learner_id}),
        headers={"Authorization": f"Bearer {HOST_TOKEN}", "Content-Type": "application/json"},
    )
    assert answer.ok, answer.text()
    page.reload()
    expect(page.get_by_role("heading", name=LESSON.title)).to_be_visible()
    return learner_id


def commit(page: Page, choice: str) -> None:
    page.get_by_role("radio", name=choice, exact=True).check()
    page.get_by_role("button", name=LESSON.predict.commit_label).click()
    expect(page.locator("#committed-prediction")).to_have_text(choice)


def predict_row(page: Page, key: str) -> None:
    label = ROW_LABELS[key]
    group = page.get_by_role("group", name=f"{label}: your prediction")
    group.get_by_role("radio", name=OUTCOME_LABELS[PREDICTIONS[key]], exact=True).check()
    page.get_by_role("button", name=f"{LESSON.ablation.predict_label} ({label})").click()
    expect(page.locator(f"#row-{key}-prediction")).to_have_text(OUTCOME_LABELS[PREDICTIONS[key]])


def play_button(page: Page, key: str):  # type: ignore[no-untyped-def]
    label = ROW_LABELS[key]
    return page.get_by_role("button", name=re.compile(rf"^Play (this row|it again) \({label}\)$"))


def runs(page: Page, count: int) -> None:
    expect(page.locator("#hints-run-count")).to_have_text(f"You have run it {count} times.")


def rung(page: Page, number: int):  # type: ignore[no-untyped-def]
    label = LESSON.hints.rungs[number - 1].label
    return page.get_by_role("button", name=f"{LESSON.hints.open_label} ({label})")


def no_horizontal_scroll(page: Page) -> None:
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= PHONE["width"], f"the page scrolls sideways: {width}px"


def gradient_plots(page: Page):  # type: ignore[no-untyped-def]
    return page.get_by_role("img", name=re.compile(r"^Gradient norm of each block at update \d+,"))


def charts_drawn(page: Page) -> None:
    expect(page.locator("#chart-accuracy svg.curve-svg")).to_have_count(1)
    expect(page.locator("#chart-loss svg.curve-svg")).to_have_count(1)


def plot_clip(page: Page) -> str:
    """How the accuracy chart's curves are clipped now: an inset while they grow, else none."""
    return str(
        page.evaluate(
            "() => getComputedStyle(document.querySelector('#chart-accuracy .plot')).clipPath"
        )
    )


# --- the walk ---------------------------------------------------------------------------------


def test_a_learner_walks_from_the_locked_page_to_a_closed_gate(new_page: NewPage) -> None:
    page = new_page(viewport=PHONE, has_touch=True)
    started = time.monotonic()
    unlock(page)
    no_horizontal_scroll(page)

    # 02 Predict: commit, reload, still committed; the rows' predictions open.
    both_learns = page.get_by_role("group", name="Both: your prediction").get_by_role(
        "radio", name="Learns the copy"
    )
    expect(both_learns).to_be_disabled()
    commit(page, "Residual connections")
    page.reload()
    expect(page.locator("#committed-prediction")).to_have_text("Residual connections")
    expect(both_learns).to_be_enabled()

    # 03 Try it: three numbers, reload, the other three (two runs).
    for label in list(NUMBERS)[:3]:
        page.get_by_label(label, exact=True).fill(NUMBERS[label])
    page.get_by_role("button", name=LESSON.numbers.check_label).click()
    expect(page.locator("#gate-numbers")).to_have_text("3 of 6 numbers landed.")
    page.reload()
    for label in list(NUMBERS)[3:]:
        page.get_by_label(label, exact=True).fill(NUMBERS[label])
    page.get_by_role("button", name=LESSON.numbers.check_label).click()
    expect(page.locator("#gate-numbers")).to_have_text("6 of 6 numbers landed.")

    # Hints: rung 1 waits at 2 runs and opens at exactly 3 (a wrong reading).
    runs(page, 2)
    expect(rung(page, 1)).to_be_disabled()
    expect(page.locator("#hint-1-status")).to_contain_text("Runs still needed: 1.")
    page.get_by_role("radio", name=WRONG_READING.label).check()
    page.get_by_role("button", name=LESSON.reading.lock_label).click()
    runs(page, 3)
    expect(rung(page, 1)).to_be_enabled()
    expect(rung(page, 2)).to_be_disabled()
    rung(page, 1).click()
    expect(page.locator("#hint-1-text")).to_contain_text("residuals only and layer norm only")
    page.reload()
    expect(page.locator("#hint-1-text")).to_be_visible()
    page.get_by_role("radio", name=RIGHT_READING.label).check()
    page.get_by_role("button", name=LESSON.reading.lock_label).click()
    expect(page.locator("#gate-reading")).to_have_text("The right reading is locked.")
    runs(page, 4)
    expect(rung(page, 2)).to_be_disabled()

    # The ablation: two predictions, reload, two more; plays wait until then, with the reason.
    expect(play_button(page, "both")).to_be_disabled()
    expect(page.locator("#play-locked")).to_contain_text("4 of 4")
    predict_row(page, "both")
    predict_row(page, "residual_only")
    page.reload()
    expect(page.locator("#row-both-prediction")).to_have_text("Learns the copy")
    expect(page.locator("#play-locked")).to_contain_text("2 of 4")
    predict_row(page, "layernorm_only")
    predict_row(page, "neither")
    expect(page.locator("#play-locked")).to_have_count(0)
    expect(page.locator("#gate-predictions")).to_have_text("4 of 4 predictions recorded.")

    # The first play animates: the charts grow, on screen, the final figures wait for the end.
    play_button(page, "residual_only").click()
    expect(page.locator("#player-title")).to_have_text("Residuals only, seed 0")
    expect(page.locator("#player-title")).to_be_in_viewport()
    # Brought on screen from below the button, the player takes the focus with it.
    expect(page.locator("#player")).to_be_focused()
    expect(page.locator("#final-figures")).to_be_hidden()
    charts_drawn(page)
    # The server's curves grow with CSS: clipped from the right while the figures wait.
    expect(page.locator("#player .charts")).to_have_class(re.compile(r"\bgrowing\b"))
    assert plot_clip(page).startswith("inset(")
    expect(page.locator("#final-figures")).to_be_visible(timeout=ANIMATION_TIMEOUT_MS)
    assert plot_clip(page) == "none"
    expect(page.locator("#final-accuracy")).to_have_text("20.0 %")
    expect(page.locator("#announcer")).to_contain_text(LESSON.ablation.final_heading)
    runs(page, 5)
    no_horizontal_scroll(page)

    # Reload: the same row is in the player, drawn at once.
    page.reload()
    expect(page).to_have_url(re.compile(r"[?&]play=residual_only"))
    expect(page.locator("#player-title")).to_have_text("Residuals only, seed 0")
    charts_drawn(page)
    expect(page.locator("#final-figures")).to_be_visible()

    # Rung 2 opened at exactly 5 runs: the answer, composed from the recording.
    rung(page, 2).click()
    expect(page.locator("#hint-2-text")).to_contain_text("the residual connections")

    # Under prefers-reduced-motion a play shows everything at once, the curves unclipped.
    page.emulate_media(reduced_motion="reduce")
    for key in ("layernorm_only", "neither"):
        play_button(page, key).click()
        expect(page.locator("#player-title")).to_have_text(f"{ROW_LABELS[key]}, seed 0")
        expect(page.locator(f"#row-{key}-result")).to_be_visible()
        assert plot_clip(page) == "none"
    # The rows played so far share one chart, named with where each ended.
    together = page.get_by_role("img", name=re.compile(r"against training step: Residuals only"))
    expect(together).to_be_visible()
    expect(page.locator("#together-legend li")).to_have_text(
        ["Residuals only", "Layer norm only", "Neither"]
    )
    # Until the best row plays, a sentence holds the gradients' place and says what opens them.
    expect(page.locator("#gradients-placeholder")).to_have_text(
        " ".join(LESSON.ablation.gradients_placeholder.format(missing=1, total=4).split())
    )
    expect(page.locator(".compare-rows li")).to_have_count(4)
    page.reload()  # in the middle of Compare
    expect(page.locator("#compare-opening")).to_contain_text("the recording agrees")
    expect(page.locator("#gate-best-row")).to_have_text("The best row has not been played.")

    # 05: the best row (read from the recording) closes the gate.
    play_button(page, "both").click()
    expect(page.locator("#final-accuracy")).to_have_text("100.0 %")
    gate = page.locator("#gate")
    expect(gate.locator(".badge")).to_have_text("met")
    expect(gate.locator("#gate-verdict")).to_contain_text(LESSON.gate.met)
    # The closing is recorded with the recording it was earned on, shown in the same answer.
    expect(gate.locator("#gate-closed-on")).to_contain_text("the-transformer-block.json")
    expect(gradient_plots(page)).to_have_count(2)
    # The takeaway's line now says what the recording showed; keep it and save it.
    box = page.get_by_label(LESSON.takeaway.label, exact=True)
    expect(box).to_have_value(re.compile("putting back the residual connections recovered more"))
    page.get_by_role("button", name=LESSON.takeaway.save_label).click()
    expect(page.locator("#takeaway-status")).to_have_text("Saved")
    page.reload()
    expect(gate.locator(".badge")).to_have_text("met")
    expect(page.locator("#gate-numbers")).to_have_text("6 of 6 numbers landed.")
    page.get_by_text("Show the curve as a table").click()
    page.get_by_text("Show every recorded gradient norm as a table").click()
    no_horizontal_scroll(page)
    for target in page.locator("#ablation button:visible, #hints button:visible").all():
        box_size = target.bounding_box()
        assert box_size is not None and box_size["height"] >= 44, target
    print(f"\nwalk-through, locked page to closed gate: {time.monotonic() - started:.1f} s")


# --- two learners ------------------------------------------------------------------------------


def test_a_second_learner_sees_none_of_the_first_but_the_aggregate(
    new_page: NewPage, served: tuple[LiveServer, Starlette]
) -> None:
    first = new_page()
    first_id = unlock(first)
    commit(first, "Layer norm")
    predict_row(first, "both")
    # Five more learners have predicted on this server (through the store, as the routes do).
    store = served[1].state.services.store
    for _ in range(5):
        other = store.create_learner()
        store.append(other, EventKind.PREDICTION_COMMITTED, {"choice": "residual"})
        store.append(other, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})

    second = new_page()
    unlock(second)
    expect(second.locator("#committed-prediction")).to_have_count(0)
    expect(second.get_by_role("radio", name="Layer norm", exact=True)).not_to_be_checked()
    expect(second.locator("#row-both-prediction")).to_have_count(0)
    expect(second.locator("#aggregate")).to_have_count(0)  # not before committing
    commit(second, "Residual connections")
    opening = second.locator("#aggregate-opening li")
    expect(opening).to_have_count(2)
    expect(opening.first).to_have_text(re.compile(r"^Layer norm: \d+ of \d+ \(\d+\s%\)$"))
    expect(second.locator("#aggregate-both")).to_contain_text("Shown once you have committed")
    predict_row(second, "both")
    expect(second.locator("#aggregate-both li")).to_have_count(3)
    assert first_id not in second.content()
    # The first learner's page is unchanged by the second's actions.
    first.reload()
    expect(first.locator("#committed-prediction")).to_have_text("Layer norm")
    expect(first.locator("#row-residual_only-prediction")).to_have_count(0)


# --- axe-core ----------------------------------------------------------------------------------


def test_axe_core_finds_no_violations_with_the_player_and_charts_on_screen(
    new_page: NewPage,
) -> None:
    # bypass_csp lets the audit script in; the page itself runs no inline script.
    page = new_page(bypass_csp=True, viewport=PHONE, reduced_motion="reduce")
    unlock(page)
    commit(page, "Layer norm")
    for key in PREDICTIONS:
        predict_row(page, key)
    for key in ("both", "residual_only", "layernorm_only", "neither"):
        play_button(page, key).click()
        expect(page.locator(f"#row-{key}-result")).to_be_visible()
    charts_drawn(page)
    expect(gradient_plots(page)).to_have_count(2)
    page.get_by_text("Show the curve as a table").click()
    page.get_by_text("Show every recorded gradient norm as a table").click()
    page.add_script_tag(path=AXE)
    violations = page.evaluate("async () => (await axe.run(document)).violations")
    assert violations == [], json.dumps(
        [{"id": v["id"], "nodes": [n["html"] for n in v["nodes"]]} for v in violations], indent=1
    )


def test_a_row_predicted_from_the_keyboard_keeps_the_focus_on_its_row(new_page: NewPage) -> None:
    # The row's form gives way to its prediction; focus goes to that row, not to the whole
    # list of rows (which a screen reader would read from its top).
    page = new_page()
    unlock(page)
    commit(page, "Residual connections")
    row = page.locator("#row-residual_only")
    row.get_by_role("radio", name=OUTCOME_LABELS["partial"], exact=True).focus()
    page.keyboard.press("Space")
    page.keyboard.press("Enter")
    expect(page.locator("#row-residual_only-prediction")).to_be_visible()
    expect(row).to_be_focused()


def test_without_javascript_the_curves_and_gradients_are_drawn(new_page: NewPage) -> None:
    page = new_page(viewport=PHONE, java_script_enabled=False)
    unlock(page)
    commit(page, "Layer norm")
    for key in PREDICTIONS:
        predict_row(page, key)
    expect(page.locator("#gradients-placeholder")).to_contain_text("4 of 4 rows still to play")
    play_button(page, "both").click()
    expect(page.locator("#player-title")).to_have_text("Both, seed 0")
    # The played row's curves, drawn by the server: the seed played over the two others.
    for name in ("accuracy", "loss"):
        label = getattr(LESSON.ablation, f"{name}_label")
        chart = page.get_by_role(
            "img", name=re.compile(rf"^{label} against training step for Both")
        )
        expect(chart.locator("svg.curve-svg path.line")).to_have_count(3)
        box = chart.bounding_box()
        assert box is not None and box["height"] > 150, box
    expect(page.get_by_text("needs JavaScript")).to_have_count(0)
    expect(page.locator("#gradients-placeholder")).to_contain_text("3 of 4 rows still to play")

    play_button(page, "neither").click()
    together = page.get_by_role(
        "img",
        name=re.compile(r"against training step: Both ends at 100\.0 % and Neither ends at 6\.1 %"),
    )
    expect(together.locator("svg path.marker")).to_have_count(2)
    expect(page.locator("#together-legend li")).to_have_text(["Both", "Neither"])

    for key in ("residual_only", "layernorm_only"):
        play_button(page, key).click()
        expect(page.locator(f"#row-{key}-result")).to_be_visible()
    expect(page.locator("#gradients-placeholder")).to_have_count(0)
    expect(gradient_plots(page)).to_have_count(2)
    expect(page.locator("#gradients-legend li")).to_have_text(list(ROW_LABELS.values()))
    no_horizontal_scroll(page)
