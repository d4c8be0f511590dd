"""What a learner reads and hears in Chromium, for the browser tests of the page's languages:
every text a live region says (as a screen reader hears it: each text set in an element with
aria-live, role="status" or role="alert"), every text and accessible name on the page, and
the English found in a text that should be German or Arabic. It imports no test module."""

from __future__ import annotations

import re

from playwright.sync_api import Page

# Kept on the page by listen(): each text a live region came to say, in order.
_LISTENER = """
(() => {
  window.__heard = [];
  const live = (node) => node instanceof Element &&
    node.closest('[aria-live]:not([aria-live="off"]), [role="status"], [role="alert"]');
  const said = new Map();
  const hear = (region) => {
    const text = (region.textContent || "").replace(/\\s+/g, " ").trim();
    if (text && said.get(region) !== text) window.__heard.push(text);
    said.set(region, text);
  };
  new MutationObserver((changes) => {
    for (const change of changes) {
      const target = change.target instanceof Element ? change.target : change.target.parentElement;
      const region = live(target);
      if (region) hear(region);
      for (const added of change.addedNodes) {
        if (!(added instanceof Element)) continue;
        for (const inner of [added, ...added.querySelectorAll('[role="alert"]')]) {
          if (inner.matches?.('[role="alert"]')) hear(inner);
        }
      }
    }
  }).observe(document, { subtree: true, childList: true, characterData: true });
})();
"""

# Every text of the page a learner may read or hear: its text nodes (those hidden until a
# control shows them too, not scripts, styles, templates or what shows only without scripts)
# and the names and descriptions given in attributes, the title included. Left out: what is
# marked in another language (lang: the switch's names of the languages) or as no language's
# (translate="no": names a recording gives, such as its command and versions).
_PAGE_TEXTS = """
() => {
  const texts = [document.title];
  const own = document.documentElement.lang;
  const skipped = (element) => !element || element.closest(
    `script, style, template, noscript, [translate="no"], [lang]:not([lang="${own}"])`);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (skipped(node.parentElement)) continue;
    const text = node.textContent.replace(/\\s+/g, " ").trim();
    if (text) texts.push(text);
  }
  const named = "[aria-label], [title], [alt], [placeholder]";
  for (const element of document.body.querySelectorAll(named)) {
    if (skipped(element)) continue;
    for (const name of ["aria-label", "title", "alt", "placeholder"]) {
      const value = element.getAttribute(name);
      if (value) texts.push(value);
    }
  }
  return texts;
}
"""

# Names a page in any language writes as they are: file names, versions and digests, the
# course's and the lesson's ids, the model (and its MLP), the library and the language the
# course names, the formulas' symbols (a single letter, eps, sqrt) and numbers written with an
# exponent.
NAMES = re.compile(
    r"[\w.-]+\.(?:json|toml|csv|sqlite3)\b|\bv?\d+(?:\.\d+)+\b|\b[0-9a-f]{12,64}\b|\bD9\b"
    r"|GPT-2|PyTorch|JavaScript|MLP|\b(?:eps|sqrt)\b|\b[A-Za-z]\b|\d[eE][-+]?\d+"
)
# Words of English that German does not share (so a German sentence holds none of them).
ENGLISH_WORDS = frozenset(
    {
        "the",
        "and",
        "your",
        "you",
        "of",
        "is",
        "are",
        "this",
        "that",
        "with",
        "which",
        "not",
        "has",
        "have",
        "to",
        "for",
        "row",
        "rows",
        "its",
        "be",
        "been",
        "from",
        "or",
        "at",
        "on",
        "it",
        "by",
        "than",
        "when",
        "would",
        "there",
        "here",
        "what",
        "about",
        "were",
        "yet",
        "each",
        "once",
        "only",
        "played",
        "predicted",
        "recorded",
        "device",
        "learns",
    }
)
LATIN_WORD = re.compile(r"[A-Za-z]+")


def listen(page: Page) -> None:
    """Keep every text a live region says on each page `page` loads from now on."""
    page.add_init_script(_LISTENER)


def heard(page: Page) -> list[str]:
    """What the live regions said on the page now open, in order."""
    said: list[str] = page.evaluate("window.__heard || []")
    return said


def page_texts(page: Page) -> list[str]:
    texts: list[str] = page.evaluate(_PAGE_TEXTS)
    return texts


def english_in(text: str, locale: str) -> list[str]:
    """The English words in `text`, which should be in `locale` ("de" or "ar"), names left
    out: in German the words of English German does not share, in Arabic any Latin word."""
    words = LATIN_WORD.findall(NAMES.sub(" ", text))
    if locale == "ar":
        return words
    return [word for word in words if word.lower() in ENGLISH_WORDS]


def english_texts(texts: list[str], locale: str) -> list[str]:
    """The texts of `texts` with English in them (each once)."""
    return list(dict.fromkeys(text for text in texts if english_in(text, locale)))
