"""web.views.rendering's compiled templates: every Environment make_environment builds shares the
code compiled once in the process, renders exactly as a freshly compiled one, and compiles a
template again once its source has changed; and the filter that lets a setting's long name
break at its underscores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jinja2 import Environment

from normdive.web.views.rendering import COMPILED_TEMPLATES, Renderer, breakable, make_environment


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
