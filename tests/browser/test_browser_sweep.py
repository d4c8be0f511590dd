"""The panel "Does it hold at other depths?" in Chromium, on a server whose recording has a
sample sweep beside it: nothing of it loads until the panel opens, a picked cell plays in the
player, the page does not scroll sideways at 375 px, axe-core finds no violations, and without
JavaScript the panel's link opens the same figures as a table whose cells play too."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page, Request, Route, expect

from helpers import ablation_recording, build_settings, migrated_sqlite_url, write_recording
from lesson_answers import LESSON, RIGHT_NUMBERS, RIGHT_READING_ID
from live_server import LiveServer
from normdive.recording.format import ROW_KEYS
from normdive.recording.sweep import sweep_path_for
from normdive.web.app import create_app
from normdive.web.security.csrf import HEADER
from sample_sweeps import sample_sweep

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
PHONE = {"width": 375, "height": 812}
AXE = "node_modules/axe-core/axe.min.js"
PREDICTIONS = {"both": "learns", "residual_only": "partial"}
PREDICTIONS |= {"layernorm_only": "chance", "neither": "chance"}
TEXT = LESSON.sweep
# The cell's link: its figure, then (for a screen reader) what it plays.
CELL = re.compile(r"^87\.9 %\s?, play Layer norm only at depth 4, GPT-2 initialisation$")
CELL_HEADING = "Layer norm only, depth 4, GPT-2 initialisation, seed 0"
OTHER_CELL = re.compile(r", play Residuals only at depth 4, GPT-2 initialisation$")
OTHER_HEADING = "Residuals only, depth 4, GPT-2 initialisation, seed 0"


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """This module's server: the sample recording with a sample sweep beside it."""
    folder = tmp_path_factory.mktemp("sweep-live")
    recording = write_recording(folder, ablation_recording())
    sweep_path_for(recording).write_text(sample_sweep().model_dump_json(), encoding="utf-8")
    server = LiveServer(
        create_app(build_settings(migrated_sqlite_url(folder), folder, recording_path=recording))
    )
    server.start()
    yield server
    server.stop()


def close_the_gate(page: Page) -> None:
    """The learner's work, posted as the page's forms post it (with the form token), so the
    test starts at a closed gate; the walk itself is tested in test_browser_ablation."""
    page.goto("/")
    token = page.request.get("/api/state").json()["csrf_token"]
    steps = [
        ("/predict", {"choice": "layer_norm"}),
        ("/numbers", RIGHT_NUMBERS),
        ("/reading", {"choice": RIGHT_READING_ID}),
        *((f"/rows/{key}/predict", {"outcome": o}) for key, o in PREDICTIONS.items()),
        *((f"/rows/{key}/play", {}) for key in ROW_KEYS),
    ]
    for path, form in steps:
        answer = page.request.post(
            path, form=form, headers={HEADER: token, "Accept": "application/json"}
        )
        assert answer.ok, (path, answer.text())
    page.reload()
    expect(page.locator("#gate-status")).to_contain_text("met")


def no_horizontal_scroll(page: Page) -> None:
    # After a link's navigation the URL and the first elements can be there before the
    # stylesheets are: measured then, the unstyled tables are wider than the phone.
    page.wait_for_load_state("load")
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= PHONE["width"], f"the page scrolls sideways: {width}px"


def axe_violations(page: Page) -> list[dict[str, object]]:
    page.add_script_tag(path=AXE)
    found = page.evaluate("async () => (await axe.run(document)).violations")
    return [{"id": v["id"], "nodes": [n["html"] for n in v["nodes"]]} for v in found]


def test_the_panel_loads_when_opened_and_plays_any_cell(new_page: NewPage) -> None:
    # bypass_csp lets the audit script in; the page itself runs no inline script.
    page = new_page(bypass_csp=True, viewport=PHONE, reduced_motion="reduce")
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    close_the_gate(page)
    page.wait_for_load_state("networkidle")
    assert not [url for url in asked if "/depths" in url or url.endswith("sweep.js")], asked

    expect(page.get_by_role("heading", name=TEXT.heading)).to_be_visible()
    page.get_by_text(TEXT.open_label, exact=True).first.click()  # the panel's summary
    gpt2 = page.get_by_role("table", name="Final held-out accuracy with GPT-2 initialisation")
    expect(gpt2).to_be_visible()
    expect(page.get_by_role("table", name=re.compile("PyTorch's default"))).to_be_visible()
    assert any(url.endswith("/depths/panel") for url in asked)
    assert any(url.endswith("/sweep.js") for url in asked)
    expect(page.locator("#sweep-sentences li").first).to_have_text(
        "With GPT-2 initialisation, putting back layer norm alone recovers more at depths 2 and 4."
    )
    expect(gpt2.get_by_role("row")).to_have_count(5)
    no_horizontal_scroll(page)

    # Whether the chart sentences were still hidden when the player took the focus.
    page.evaluate(
        """() => document.addEventListener("focusin", (event) => {
          if (event.target.id !== "sweep-player") return;
          const notes = [...event.target.querySelectorAll("[data-chart-note]")];
          window.chartNotesHiddenAtFocus = notes.length === 0 || notes.some((n) => n.hidden);
        })"""
    )
    page.get_by_role("link", name=CELL).click()
    expect(page.get_by_role("heading", name=CELL_HEADING)).to_be_visible()
    page.wait_for_function("() => window.chartNotesHiddenAtFocus !== undefined")
    assert page.evaluate("window.chartNotesHiddenAtFocus") is False
    expect(page.locator("#sweep-player")).to_be_focused()
    expect(page.locator("#sweep-chart-accuracy svg.curve-svg")).to_have_count(1)
    expect(page.locator("#sweep-chart-loss svg.curve-svg")).to_have_count(1)
    # A picked cell's curves grow as a played row's do.
    expect(page.locator("#sweep-player .charts")).to_have_class(re.compile(r"\bgrowing\b"))
    expect(page.locator("#sweep-final-accuracy")).to_have_text("87.9 %")
    # A screen reader hears what now plays, and where it ended.
    expect(page.get_by_role("status")).to_have_text(
        re.compile(rf"^{re.escape(CELL_HEADING)}\. Where the row ended: .*87\.9\s%")
    )
    expect(page.locator("#sweep-player-note [data-chart-note]")).to_be_visible()
    # The lesson page (its player naming the row shown), not another one.
    expect(page).to_have_url(re.compile(r"/(\?play=\w+)?(#.*)?$"))
    no_horizontal_scroll(page)
    # The compare section's line: "layer norm" is what happens at depths 2 and 4.
    expect(page.locator("#compare-depths")).to_contain_text("at depths 2 and 4")

    violations = axe_violations(page)
    assert violations == [], json.dumps(violations, indent=1)

    # Replaying a row draws the gate again: the open panel stays open with its figures.
    page.evaluate("document.getElementById('gate').dataset.before = 'replay'")
    page.get_by_role("button", name=re.compile(r"^Play it again \(Both\)$")).click()
    page.wait_for_function("() => !document.getElementById('gate').dataset.before")
    expect(page.get_by_role("heading", name=CELL_HEADING)).to_be_visible()
    expect(page.locator("#sweep-panel")).to_have_attribute("open", "")


def test_without_javascript_the_panel_is_a_table_whose_cells_play(new_page: NewPage) -> None:
    page = new_page(java_script_enabled=False, viewport=PHONE)
    close_the_gate(page)
    page.get_by_text(TEXT.open_label, exact=True).first.click()  # <details> opens natively
    # The link inside says something the summary did not: where it goes.
    expect(page.get_by_role("link", name=TEXT.open_label)).to_have_count(0)
    # Alone on its line, it is a touch target like the buttons: 44 px tall.
    link = page.get_by_role("link", name=TEXT.page_label)
    box = link.bounding_box()
    assert box is not None and box["height"] >= 44, box
    link.click()
    expect(page).to_have_url(re.compile(r"/depths#sweep$"))
    expect(page.get_by_role("heading", name=TEXT.heading, level=2)).to_be_visible()
    table = page.get_by_role("table", name="Final held-out accuracy with GPT-2 initialisation")
    expect(table.get_by_role("row", name=re.compile(r"^16 seed 0"))).to_be_visible()
    # The depth and initialisation the learner played is marked, in words.
    expect(table.get_by_role("rowheader", name=re.compile(TEXT.here_label))).to_have_text(
        re.compile(r"^8 ")
    )
    no_horizontal_scroll(page)

    page.get_by_role("link", name=CELL).click()
    expect(page).to_have_url(re.compile(r"/depths\?cell=4-gpt2-layernorm_only#sweep-player$"))
    expect(page.get_by_role("heading", name=CELL_HEADING, level=3)).to_be_visible()
    # The server draws the charts without JavaScript; the note names the other seeds and
    # says what the charts show.
    expect(page.locator("#sweep-player-note")).to_contain_text(
        "The other seeds of this cell ended at 87.9 % (seed 1) and 87.9 % (seed 2)."
    )
    expect(page.locator("#sweep-player-note [data-chart-note]")).to_be_visible()
    accuracy = page.get_by_role("img", name=re.compile(r"^Held-out per-token accuracy against"))
    expect(accuracy.locator("svg.curve-svg path.line")).to_have_count(3)
    box = accuracy.locator("svg").bounding_box()
    assert box is not None and box["height"] > 150, box
    page.get_by_text("Show the curve as a table").click()
    expect(
        page.get_by_role("region", name=re.compile("^The curve of Layer norm only"))
    ).to_be_visible()
    no_horizontal_scroll(page)


def test_the_page_of_its_own_draws_the_cell_and_passes_axe(new_page: NewPage) -> None:
    page = new_page(bypass_csp=True, viewport=PHONE, reduced_motion="reduce")
    seen: list[Request] = []
    page.on("request", lambda request: seen.append(request))
    close_the_gate(page)
    page.goto("/depths?cell=16-pytorch-residual_only#sweep-player")
    expect(page.locator("#sweep-chart-accuracy svg.curve-svg")).to_have_count(1)
    page.get_by_text("Show the curve as a table").click()
    no_horizontal_scroll(page)
    violations = axe_violations(page)
    assert violations == [], json.dumps(violations, indent=1)
    # Drawn by the server: no curves fetched, no chart library.
    assert not [r.url for r in seen if r.url.endswith(".json") or "uPlot" in r.url]

    # A pick here names its cell in the address, so a reload plays it again.
    page.get_by_role("link", name=CELL).click()
    expect(page.get_by_role("heading", name=CELL_HEADING)).to_be_visible()
    expect(page).to_have_url(re.compile(r"/depths\?cell=4-gpt2-layernorm_only#sweep-player$"))
    page.reload()
    expect(page.get_by_role("heading", name=CELL_HEADING)).to_be_visible()


def test_of_two_quick_picks_the_later_plays_and_keeps_the_focus(new_page: NewPage) -> None:
    page = new_page(viewport=PHONE, reduced_motion="reduce")
    close_the_gate(page)
    page.goto("/depths?cell=16-pytorch-residual_only#sweep-player")
    expect(page.locator("#sweep-chart-accuracy svg.curve-svg")).to_have_count(1)
    # The first pick's answer is held back until the second pick has played.
    held: list[Route] = []
    page.route(
        re.compile(r"/depths/panel\?cell=4-gpt2-layernorm_only$"), lambda route: held.append(route)
    )
    page.get_by_role("link", name=CELL).click()
    page.wait_for_function("() => document.getElementById('sweep-body').ariaBusy === 'true'")
    page.get_by_role("link", name=OTHER_CELL).click()
    expect(page.get_by_role("heading", name=OTHER_HEADING)).to_be_visible()
    expect(page.locator("#sweep-player")).to_be_focused()
    assert len(held) == 1
    held[0].continue_()
    # The late answer changes nothing: the later pick stays in the player, with the focus.
    page.wait_for_load_state("networkidle")
    expect(page.get_by_role("heading", name=OTHER_HEADING)).to_be_visible()
    expect(page.get_by_role("heading", name=CELL_HEADING)).to_have_count(0)
    expect(page.locator("#sweep-player")).to_be_focused()
    expect(page).to_have_url(re.compile(r"/depths\?cell=4-gpt2-residual_only#sweep-player$"))


@pytest.mark.parametrize("javascript", [True, False])
def test_at_320_px_no_figure_of_the_sweep_is_clipped(new_page: NewPage, javascript: bool) -> None:
    page = new_page(viewport={"width": 320, "height": 700}, java_script_enabled=javascript)
    close_the_gate(page)
    page.goto("/depths?cell=4-gpt2-both#sweep-player")
    for init, label in TEXT.init_labels.items():
        caption = TEXT.grid_caption.format(init=label)
        table = page.get_by_role("table", name=caption)
        expect(table).to_be_visible()
        # No cell's content runs past its cell ("100.0 %" keeps its "%").
        clipped = table.evaluate(
            """(table) => [...table.querySelectorAll("th, td")]
              .filter((cell) => cell.scrollWidth > cell.clientWidth)
              .map((cell) => cell.textContent.trim())"""
        )
        assert clipped == [], (init, clipped)
        # Wider than the column, the table scrolls in its own region, named by its caption.
        region = page.get_by_role("region", name=caption)
        expect(region).to_be_visible()
        sizes = region.evaluate(
            "(r) => [r.scrollWidth, r.clientWidth, getComputedStyle(r).overflowX]"
        )
        assert sizes[0] <= sizes[1] or sizes[2] == "auto", sizes
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= 320, f"the page scrolls sideways: {width}px"


def test_an_opened_panel_and_table_are_open_again_after_a_reload(new_page: NewPage) -> None:
    page = new_page()
    close_the_gate(page)
    page.get_by_text(TEXT.open_label, exact=True).first.click()
    gpt2 = page.get_by_role("table", name="Final held-out accuracy with GPT-2 initialisation")
    expect(gpt2).to_be_visible()
    table = page.locator("#hand-steps-table")
    table.locator("summary").click()
    expect(table).to_have_attribute("open", "")

    page.reload()
    expect(page.locator("#sweep-panel")).to_have_attribute("open", "")
    expect(gpt2).to_be_visible()  # its body loaded again, as opening it by hand does
    expect(table).to_have_attribute("open", "")

    table.locator("summary").click()  # closed by the learner: it stays closed
    expect(table).not_to_have_attribute("open", "")
    page.reload()
    expect(page.locator("#sweep-panel")).to_have_attribute("open", "")
    expect(gpt2).to_be_visible()
    expect(table).not_to_have_attribute("open", "")
