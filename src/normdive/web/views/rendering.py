"""The one renderer: a Jinja2 environment whose macros draw both the full page and the
fragments the page's JavaScript swaps in, so a region always looks the same however it came.

Templates give structure only; every sentence of the lesson comes from the Lesson. The few
interface words that are not lesson content (counters, status lines) live in the templates.

Most of the page is the same for every learner: the lesson's own text, the hand rows at either
state of the switch, the recording's charts, and each region as it stands at each stage of the
lesson. The templates draw such a part with kept("macro", ...): the macro of fragments.html is
drawn once per distinct arguments and the Markup reused (KEPT_REGIONS), so a page costs what
differs between learners. A kept macro reads only its arguments (never the view); the lesson,
the rows and the recording's views are kept as one object each, so they are keyed by identity
(web.views.kept), a learner's state as value(...) by its value, text and flags by value. The
one thing on every form that differs between learners, the carried fields with their form
token, is filled in after drawing (CARRIED).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path
from types import CodeType
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from jinja2.bccache import Bucket, BytecodeCache
from markupsafe import Markup, escape

from normdive import __version__
from normdive.i18n.catalogues import N_, current_locale, gettext, ngettext, pgettext
from normdive.i18n.locales import LOCALES, direction
from normdive.i18n.numbers import (
    VALUE_WORDS,
    decimal_symbol,
    list_separator,
    minus_sign,
    shown,
    shown_in,
    shown_row,
)
from normdive.lesson.content import Lesson
from normdive.numeric.display import format_number
from normdive.numeric.rows import ROW_MESSAGES
from normdive.recording.format import ROW_KEYS
from normdive.web.infrastructure.language import language_switch
from normdive.web.views.kept import by_value, kept
from normdive.web.views.page import PageView
from normdive.web.views.sweep import SweepPanelView

TEMPLATES_DIR = Path(str(resources.files("normdive.web").joinpath("templates")))
STATIC_DIR = Path(str(resources.files("normdive.web").joinpath("static")))
FRAGMENTS_TEMPLATE = "fragments.html"
# Where the static files are served (web.infrastructure.assets), each under the release's version.
STATIC_MOUNT = "/static"

# Regions of the page that actions re-render, by the id of their outermost element. Each is
# a macro of fragments.html with the same name (dashes become underscores).
FRAGMENT_IDS = (
    "predict-body",
    "try-lock",
    "eps-control",
    "own-row",
    "numbers",
    "reading",
    "hints-body",
    "gate",
    "takeaway-status",
    # The ablation's regions.
    "ablation-rows",
    "player",
    "gradients",
    "compare-body",
)
# The region that shows how all learners predicted (view.PageView.aggregate).
AGGREGATE_FRAGMENT = "compare-body"

# Where each form's carried fields go (fragments.html writes {{ carried }}): the renderer puts
# the fields (the macro carry) in its place once a page or region is drawn, so a region holding
# forms is the same for every learner and can be kept. Nothing else on a page can spell it:
# every text reaches the page escaped (no "<" left), and no template writes "<!--" but this.
CARRIED = Markup("<!--carried-->")

# The macros of fragments.html that templates draw with kept(), and how many drawings of each
# are kept (the most recently used): what each is keyed by, and so how many there are.
KEPT_REGIONS = {
    # The lesson's own text: one each per lesson (and per section).
    "masthead": 4,  # and whether a setting stands in for 8.5
    "section_head": 16,
    "hand_intro": 4,
    "ablation_intro": 4,
    "bands": 8,  # and the recording's outcomes in words
    # The hand rows at a state of the switch: two each; a learner's own row at either state.
    "hand_panel_head": 8,
    "hand_summary": 8,
    "row_steps": 64,
    # The regions a learner's state draws, keyed by the state's part each shows: a few dozen
    # states each at the lesson's common stages.
    "predict_region": 32,
    "numbers_form": 128,
    "reading_form": 64,
    "hints_region": 64,
    "ablation_region": 128,
    "compare_region": 128,
    "gate_region": 64,
    "takeaway_form": 64,
    "takeaway_status_line": 64,
    # The recording's views (web.views.player keeps one per recording, row and rows played).
    "player_body": 128,
    "provenance_card": 16,
    "gradient_plots": 4,
    "gradients_waiting": 32,  # and which rows have played
    # Once the gate has closed: per recording.
    "sweep_panel": 8,
}


def static_version(static_dir: Path = STATIC_DIR) -> str:
    """A short hash of the static files, part of their URLs so a new release is fetched."""
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(static_dir.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def static_url(name: str, version: str) -> str:
    """The URL of one static file in this release: a new release gives every file a new URL,
    so browsers may keep each one for good (web.infrastructure.assets)."""
    return f"{STATIC_MOUNT}/{version}/{name}"


class CompiledTemplates(BytecodeCache):
    """Each template's compiled code, kept in memory for the life of the process and shared
    by every Environment that make_environment builds. A server builds one app per worker, but
    the test suite builds hundreds, and compiling the templates is nearly all of an app's
    start-up (about 0.2 s of CPU each time). Jinja keys a bucket by the template's name and
    file; the checksum of its source is kept beside the code, so an edited template is
    compiled again. The code depends on the Environment's options as well, which is why only
    make_environment's Environments, all built alike, use one of these."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[str, CodeType]] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        kept = self._kept.get(bucket.key)
        if kept is not None and kept[0] == bucket.checksum:
            bucket.code = kept[1]

    def dump_bytecode(self, bucket: Bucket) -> None:
        if bucket.code is not None:
            self._kept[bucket.key] = (bucket.checksum, bucket.code)

    def clear(self) -> None:
        self._kept.clear()


COMPILED_TEMPLATES = CompiledTemplates()


# The sentences the page's scripts say themselves (static/page/announce.js, pageWord, which the
# sweep's and the lab's panels use too; a typed row's problems, static/layernorm.js parseRow,
# as numeric/rows.py words them), written on <html data-words> in the page's language.
PAGE_SCRIPT_WORDS = (
    N_("The server could not be reached, so nothing was saved. Try again."),
    # The depth sweep's and the lab's panels (static/sweep.js, static/lab-panel.js).
    N_("The runs at other depths could not be loaded just now. Try again."),
    N_("The lab could not be reached just now. Try again."),
    # The re-run of the ablation (static/rerun.js).
    N_(
        "The server could not be reached, so this row's figures are not saved yet. "
        "Continue sends them again."
    ),
    *ROW_MESSAGES,
)


# A setting's name in a message (NORMDIVE_OPEN_LTI_LOGINS_PER_ADDRESS) is longer than a
# phone's line: it may break after each underscore instead of anywhere within a word.
LONG_NAME = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+){2,}\b")


def breakable(text: str) -> Markup:
    """`text`, escaped, with a line-break opportunity (<wbr>) after each underscore of a long
    upper-case name."""
    escaped = str(escape(text))
    return Markup(LONG_NAME.sub(lambda name: name.group().replace("_", "_<wbr>"), escaped))


def make_environment(templates_dir: Path = TEMPLATES_DIR) -> Environment:
    env = Environment(
        loader=FileSystemLoader(templates_dir),
        autoescape=select_autoescape(["html"], default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        # The templates ship with the package and never change under a running server, so
        # they are compiled once, not checked on disk at every render.
        auto_reload=False,
        bytecode_cache=COMPILED_TEMPLATES,
        # {% trans %} and _(): the interface's words from the current locale's catalogue.
        extensions=["jinja2.ext.i18n"],
        finalize=unbroken_percent,
    )
    env.install_gettext_callables(  # type: ignore[attr-defined]
        gettext, ngettext, newstyle=True, pgettext=pgettext
    )
    # A label within a sentence: lower case where the language writes it so (German keeps
    # its nouns capitalised; Arabic has no case).
    env.filters["in_sentence"] = lambda text: text if current_locale() == "de" else text.lower()
    # The count a script updates as the learner types, inside a translated sentence.
    env.globals["counted_span"] = lambda count: Markup("<span data-count>{}</span>").format(count)
    env.globals["page_locale"] = current_locale
    env.globals["page_direction"] = lambda: direction(current_locale())
    env.globals["language_switch"] = language_switch
    # Numbers in the current locale's writing (i18n.numbers: its decimal symbol).
    env.filters["num"] = lambda x: shown(format_number(x))
    env.filters["numrow"] = lambda xs: shown_row([format_number(x) for x in xs])
    env.filters["figures"] = lambda value: shown_in(str(value))
    env.globals["decimal_symbol"] = lambda: decimal_symbol(current_locale())
    env.globals["minus_sign"] = lambda: minus_sign(current_locale())
    env.globals["list_separator"] = list_separator
    env.globals["page_words"] = lambda: json.dumps(
        {sentence: gettext(sentence) for sentence in PAGE_SCRIPT_WORDS}
    )
    env.globals["value_words"] = lambda: json.dumps({word: gettext(word) for word in VALUE_WORDS})
    env.filters["breakable"] = breakable
    return env


# A number and its percent sign, parted by a space ("90 %", "21,3 %": progress.figures).
_NUMBER_THEN_PERCENT = re.compile(r"(?<=\d) %")


def unbroken_percent(value: Any) -> Any:
    """Every text a template draws with its numbers' "%" held to them by a no-break space, so
    that a narrow line never parts "90" from "%" (the sentences are composed with a plain
    space: only how they are drawn changes)."""
    if isinstance(value, Markup):  # HTML already safe: only a space changes
        return Markup(_NUMBER_THEN_PERCENT.sub("\u00a0%", str(value)))
    if isinstance(value, str):
        return _NUMBER_THEN_PERCENT.sub("\u00a0%", value)
    return value


def _in_locale(macro: Callable[..., Markup]) -> Callable[..., Markup]:
    """`macro` taking the locale it is drawn in as its first argument, so that kept() keys
    each drawing by its locale too (the macro itself reads the locale from the context)."""

    def drawn(locale: str, *args: Any) -> Markup:
        return macro(*args)

    return drawn


class Renderer:
    def __init__(self, env: Environment | None = None, version: str | None = None) -> None:
        self.env = env or make_environment()
        self.version = version or static_version()
        self.env.globals["static_version"] = self.version
        self.env.globals["static_url"] = lambda name: static_url(name, self.version)
        # Until a recording is readable, the gate still says how many row predictions it wants.
        self.env.globals["ablation_row_count"] = len(ROW_KEYS)
        self.env.globals["kept"] = self.kept
        self.env.globals["value"] = by_value
        self.env.globals["carried"] = CARRIED
        # Compiled now, once: otherwise the first requests, arriving together on several
        # threads, would each compile the same templates (a fifth of a second apiece).
        for name in self.env.list_templates(extensions=["html"]):
            self.env.get_template(name)
        module: Any = self.env.get_template(FRAGMENTS_TEMPLATE).module  # builds the macros
        self._module = module
        self._page = self.env.get_template("page.html")
        # Per Renderer: a drawing holds this renderer's static URLs. Each locale's drawings
        # are kept apart (the locale is the first part of the key), as many for each.
        self._kept: dict[str, Callable[..., Markup]] = {
            name: kept(size * len(LOCALES))(_in_locale(getattr(module, name)))
            for name, size in KEPT_REGIONS.items()
        }

    def kept(self, name: str, *args: Any) -> Markup:
        """The macro `name` of fragments.html drawn with `args` in the current locale: drawn
        the first time, then the same Markup (KEPT_REGIONS)."""
        return self._kept[name](current_locale(), *args)

    def carried(self, view: PageView) -> str:
        """The fields every form of `view`'s page carries (fragments.html: carry)."""
        return str(self._module.carry(view.csrf_token, view.carry))

    def page(self, view: PageView) -> str:
        drawn = self._page.render(view=view)
        return drawn.replace(CARRIED, self.carried(view))

    def locked(self, view: PageView, message: str | None = None) -> str:
        return self.env.get_template("locked.html").render(view=view, message=message)

    def error(self, status: int, title: str, message: str) -> str:
        return self.env.get_template("error.html").render(
            status=status, title=title, message=message
        )

    def sweep_page(self, lesson: Lesson, panel: SweepPanelView) -> str:
        """The panel "Does it hold at other depths?" as a page of its own."""
        return self.env.get_template("depths.html").render(lesson=lesson, panel=panel)

    def sweep_fragment(self, lesson: Lesson, panel: SweepPanelView) -> str:
        """The panel's figures, as the lesson page swaps them in."""
        module: Any = self.env.get_template(FRAGMENTS_TEMPLATE).module
        return str(Markup(module.sweep_body(lesson, panel)).strip())

    def fragment(self, fragment_id: str, view: PageView) -> str:
        return self.fragments([fragment_id], view)[fragment_id]

    def fragments(self, fragment_ids: Iterable[str], view: PageView) -> dict[str, str]:
        drawn = {}
        for fragment_id in fragment_ids:
            if fragment_id not in FRAGMENT_IDS:
                raise KeyError(f"no fragment {fragment_id!r}; known: {FRAGMENT_IDS}")
            macro = getattr(self._module, fragment_id.replace("-", "_"))
            drawn[fragment_id] = str(Markup(macro(view)).strip())
        if any(CARRIED in html for html in drawn.values()):
            fields = self.carried(view)
            drawn = {fragment: html.replace(CARRIED, fields) for fragment, html in drawn.items()}
        return drawn
