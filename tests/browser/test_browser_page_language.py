"""What a new learner tripped on in German and Arabic, each in Chromium as they met it:
- every action's answer is said (the live region, as a screen reader hears it) in the page's
  language, the row played included, and the six numbers' summary with its German labels;
- a format error typed on a German page reads in English once the learner switches to
  English (the history keeps a code, worded when drawn);
- an answer is drawn in the language of the page that asked, whatever another tab chose;
- the lab's result and committed run in German are whole German sentences, and its
  initialisation choice a name, not a fragment of a sentence;
- in Arabic a negative number's minus is drawn before its digits (CLDR's left-to-right mark),
  and "every 25 steps" counts its steps with the singular Arabic takes after 25;
- at 320 px a "%" never starts a line apart from its number, in any of the three languages,
  and the German title breaks its long word only at a hyphen."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from hearing import english_texts, heard, listen
from lab_page import post_the_work, serve_with_grid
from playwright.sync_api import Browser, Locator, Page, expect

from live_server import LiveServer
from normdive.lesson.content import Lesson
from normdive.lesson.translations import load_translation
from normdive.recording.format import ROW_KEYS
from sample_lab import TINY_BASE, sample_lab_grid

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
SMALL_PHONE = {"width": 320, "height": 640}
GERMAN, _ = load_translation("de")
ARABIC, _ = load_translation("ar")
LESSONS = {"de": GERMAN, "ar": ARABIC}
BROWSER_LOCALES = {"de": "de-DE", "ar": "ar", "en": "en"}
PREDICTIONS = {"both": "learns", "residual_only": "partial"}
PREDICTIONS |= {"layernorm_only": "chance", "neither": "chance"}
TRAINED_MS = 120_000

# Each minus sign of an element's text that is not drawn right before (to the left of) the
# digit that follows it.
MINUS_AFTER_DIGITS = """(element) => {
  const bad = [];
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  const rect = (node, at) => {
    const range = document.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + 1);
    return range.getBoundingClientRect();
  };
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let at = 0; at < node.length - 1; at++) {
      if (node.data[at] !== "-" || !/[0-9]/.test(node.data[at + 1])) continue;
      const minus = rect(node, at), digit = rect(node, at + 1);
      if (!(minus.right <= digit.left + 0.5)) bad.push(node.data);
    }
  }
  return bad;
}"""

# Where the element's text breaks into lines: each break as (the text before it, the text
# after it), for breaks inside a word not at a hyphen (soft or not), and before a "%".
BAD_BREAKS = """(element) => {
  const chars = [];
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let at = 0; at < node.length; at++) chars.push([node, at]);
  }
  const bad = [];
  let top = null;
  let before = "";
  for (const [node, at] of chars) {
    const range = document.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + 1);
    const drawn = [...range.getClientRects()].filter((r) => r.width > 0).at(-1);
    const char = node.data[at];
    if (drawn) {
      const broken = top !== null && drawn.top > top + 2;
      const letter = /[\\p{L}\\p{N}]/u;
      const wordGoesOn = letter.test(char) && letter.test(before.at(-1) ?? "");
      const after = node.data.slice(at, at + 12);
      if (broken && (char === "%" || wordGoesOn)) bad.push([before.slice(-12), after]);
      top = drawn.top;
    }
    before += char;
  }
  return bad;
}"""


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """This module's server: the sample recording with a tiny lab grid beside it."""
    yield from serve_with_grid(tmp_path_factory, "page-language-live")


def number_field(page: Page, lesson: Lesson, field_id: str) -> Locator:
    label = next(f.label for f in lesson.number_fields if f.id == field_id)
    return page.get_by_label(label, exact=True)


def commit(page: Page, lesson: Lesson) -> None:
    page.goto("/")
    page.get_by_role("radio", name=lesson.predict.choices[1].label).check()
    page.get_by_role("button", name=lesson.predict.commit_label).click()
    expect(page.locator("#committed-prediction")).to_have_text(lesson.predict.choices[1].label)


def check(page: Page, lesson: Lesson) -> None:
    page.get_by_role("button", name=lesson.numbers.check_label).click()


@pytest.mark.parametrize("language", ["de", "ar"])
def test_every_answer_is_said_in_the_pages_language(new_page: NewPage, language: str) -> None:
    lesson = LESSONS[language]
    page = new_page(locale=BROWSER_LOCALES[language])
    listen(page)
    commit(page, lesson)
    mean = number_field(page, lesson, "row1_mean")
    mean.fill("6")
    check(page, lesson)
    expect(page.locator("#field-row1_mean-attempts")).not_to_have_text("")
    wrong = next(choice for choice in lesson.reading.choices if not choice.correct)
    page.get_by_role("radio", name=wrong.label).check()
    page.get_by_role("button", name=lesson.reading.lock_label, exact=True).click()
    expect(page.locator("#reading-feedback")).not_to_be_empty()
    for key, outcome in PREDICTIONS.items():
        page.locator(f"#row-{key}-{outcome}").check()
        page.locator(f"#row-{key}-commit").click()
        expect(page.locator(f"#row-{key}-prediction")).not_to_be_empty()
    page.emulate_media(reduced_motion="reduce")
    page.locator("#row-both-play").click()
    expect(page.locator("#row-both-result")).to_be_visible()
    page.locator("#hint-1-open").click()
    expect(page.locator("#hint-1-text")).to_be_visible()

    said = heard(page)
    assert english_texts(said, language) == [], said
    label = next(f.label for f in lesson.number_fields if f.id == "row1_mean")
    slip = lesson.slip_feedback["mean_not_divided"]
    both = lesson.rows[0].label
    expected = [
        f"{lesson.predict.committed_text} {lesson.predict.choices[1].label}",
        f"{label}: {slip}",
        lesson.ablation.playing_text.format(row=both),
        f"{both}: {lesson.ablation.committed_text}",
    ]
    for sentence in expected:
        assert any(sentence in text for text in said), (sentence, said)


@pytest.mark.parametrize("language", ["de", "ar"])
def test_a_format_error_reads_in_the_language_the_page_is_drawn_in(
    new_page: NewPage, language: str
) -> None:
    lesson = LESSONS[language]
    page = new_page(locale=BROWSER_LOCALES[language])
    commit(page, lesson)
    number_field(page, lesson, "row1_mean").fill("zwei")
    check(page, lesson)
    feedback = page.locator("#field-row1_mean-feedback")
    expect(feedback).to_contain_text(lesson.numbers.not_checked_text)
    page.locator("nav.language-switch").get_by_role("link", name="English").click()
    expect(page.locator("html")).to_have_attribute("lang", "en")
    english, _ = load_translation("en")
    expect(feedback).to_have_text(
        f"{english.numbers.not_checked_text} That is not a number. Write a number such as "
        "0.667, -1.5, 2/3 or 1e-3."
    )


def test_an_answer_speaks_the_language_of_the_page_that_asked(new_page: NewPage) -> None:
    page = new_page(locale="de-DE")
    commit(page, GERMAN)
    listen(page)
    page.reload()
    # Another tab of the same learner picks Arabic (the choice is kept in a cookie).
    other = page.context.new_page()
    other.goto("/")
    other.locator("nav.language-switch").get_by_role("link", name="العربية").click()
    expect(other.locator("html")).to_have_attribute("lang", "ar")
    # The German page's next check is answered in German: its regions and what is said.
    number_field(page, GERMAN, "row1_mean").fill("6")
    check(page, GERMAN)
    feedback = page.locator("#field-row1_mean-feedback")
    expect(feedback).to_have_text(GERMAN.slip_feedback["mean_not_divided"])
    expect(page.get_by_role("button", name=GERMAN.numbers.check_label)).to_be_visible()
    expect(page.locator("#gate-numbers")).to_contain_text("Zahlen")
    label = next(f.label for f in GERMAN.number_fields if f.id == "row1_mean")
    expect(page.locator("#announcer")).to_contain_text(f"{label}: ")
    assert heard(page)[-1].startswith(f"{label}: "), heard(page)
    arabic_letters = [
        t
        for t in [page.locator("#numbers").inner_text(), *heard(page)]
        if any("\u0600" <= c <= "\u06ff" for c in t)
    ]
    assert arabic_letters == []


def test_the_german_lab_says_whole_sentences(new_page: NewPage) -> None:
    page = new_page(locale="de-DE", reduced_motion="reduce")
    post_the_work(page)
    text = GERMAN.lab
    page.get_by_text(text.open_label, exact=True).click()
    expect(page.locator("#lab-commit")).to_be_visible()
    # The initialisation is offered by its name, not as a fragment of a sentence.
    offered = page.get_by_label(text.init_label).locator("option").all_inner_texts()
    assert offered == [GERMAN.sweep.init_labels["gpt2"], GERMAN.sweep.init_labels["pytorch"]]
    assert not any(name.startswith(("der ", "die ", "dem ", "den ")) for name in offered)
    page.get_by_label(text.depth_label).select_option("1")
    page.get_by_label(text.rows_label).select_option("both")
    page.get_by_label(text.eps_label).select_option("0.00001")
    page.locator("#lab-commit input[name=outcome][value=learns]").check()
    page.get_by_role("button", name=text.commit_label).click()
    pending = page.locator("#lab-pending")
    config = "Beide, Tiefe 1, eps 0,00001, GPT-2-Initialisierung, Seed 0"
    expect(pending).to_have_text(text.committed_sentence("learns", config))
    page.get_by_role("button", name=text.train_label, exact=True).click()
    result = page.locator("#lab-result")
    expect(result).to_be_visible(timeout=TRAINED_MS)
    # The prediction beside whatever the run reached, in one whole sentence.
    said = [text.verdict("learns", actual) for actual in ("learns", "partial", "chance")]
    expect(result.locator("p").filter(has_text="vorhergesagt")).to_have_text(
        re.compile("|".join(re.escape(sentence) for sentence in said))
    )
    expect(result).not_to_contain_text("Sie haben sie")


def test_arabic_draws_a_minus_before_its_digits(new_page: NewPage) -> None:
    page = new_page(locale="ar", viewport=SMALL_PHONE)
    commit(page, ARABIC)
    # The rows worked by hand: [1, 2, 3] normalises to [-1.224736, 0.000000, 1.224736].
    first = page.locator("#hand .row-steps").first.locator("[data-ln=normalised]")
    expect(first).to_contain_text("\u200e-1.224736")
    assert first.evaluate(MINUS_AFTER_DIGITS) == []
    # And a row of the learner's own, drawn by the page's script.
    page.get_by_label(ARABIC.own_row.label).fill("-2، 0، 2")
    own = page.locator("#own-row-steps [data-ln=normalised]")
    expect(own).to_contain_text("\u200e-1.22474")
    assert own.evaluate(MINUS_AFTER_DIGITS) == []
    assert page.locator("#own-row-steps [data-ln=input]").evaluate(MINUS_AFTER_DIGITS) == []


@pytest.mark.parametrize("language", ["en", "de", "ar"])
def test_at_320_px_a_percent_stays_with_its_number(new_page: NewPage, language: str) -> None:
    page = new_page(locale=BROWSER_LOCALES[language], viewport=SMALL_PHONE, reduced_motion="reduce")
    post_the_work(page)
    for key in ROW_KEYS:
        expect(page.locator(f"#row-{key}-result")).to_be_visible()
    broken = [
        found
        for selector in ("main",)
        for element in page.locator(selector).all()
        for found in element.evaluate(BAD_BREAKS)
        if found[1].startswith("%")
    ]
    assert broken == []


@pytest.fixture(scope="module")
def every_25_steps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server whose lab grid evaluates every 25 steps (Arabic counts 25 with a singular)."""
    base = TINY_BASE.model_copy(update={"steps": 50, "eval_every": 25})
    yield from serve_with_grid(tmp_path_factory, "every-25-live", sample_lab_grid(base))


def test_arabic_counts_the_grids_evaluation_steps(
    browser: Browser, every_25_steps: LiveServer
) -> None:
    context = browser.new_context(base_url=every_25_steps.url, locale="ar")
    try:
        page = context.new_page()
        post_the_work(page)
        page.get_by_text(ARABIC.lab.open_label, exact=True).click()
        config = page.locator("#lab-config")
        expect(config).to_contain_text("كل 25 خطوة")
        expect(config).not_to_contain_text("25 خطوات")
    finally:
        context.close()


def test_the_german_title_breaks_only_at_a_hyphen(new_page: NewPage) -> None:
    page = new_page(locale="de-DE", viewport=SMALL_PHONE)
    page.goto("/")
    title = page.locator("h1")
    expect(title).to_have_text(GERMAN.title)
    assert title.evaluate(BAD_BREAKS) == []
