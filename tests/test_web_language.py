"""The language a page is drawn in, over HTTP: lang and dir on <html>, the switch as links
(no JavaScript needed), the choice kept in a cookie and put before Accept-Language."""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup
from starlette.testclient import TestClient

from normdive.web.infrastructure.language import CHOICE_COOKIE, LAUNCH_COOKIE, switch_address


def html_of(client: TestClient, path: str = "/", **headers: str) -> BeautifulSoup:
    response = client.get(path, headers=headers)
    assert response.status_code == 200, response.text
    return BeautifulSoup(response.text, "html.parser")


def lang_and_dir(soup: BeautifulSoup) -> tuple[str, str]:
    html = soup.find("html")
    assert html is not None
    return str(html.get("lang")), str(html.get("dir"))


def test_english_by_default(client: TestClient) -> None:
    soup = html_of(client)
    assert lang_and_dir(soup) == ("en", "ltr")
    assert soup.select_one(".skip-link") is not None
    assert soup.select_one(".skip-link").get_text() == "Skip to the lesson"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("header", "expected"),
    [("de-DE,de;q=0.9,en;q=0.5", ("de", "ltr")), ("ar", ("ar", "rtl")), ("fr", ("en", "ltr"))],
)
def test_accept_language_picks_the_page_language(
    client: TestClient, header: str, expected: tuple[str, str]
) -> None:
    assert lang_and_dir(html_of(client, **{"Accept-Language": header})) == expected


def test_the_switch_is_links_that_keep_the_choice(client: TestClient) -> None:
    soup = html_of(client, "/?eps=off")
    links = {a["hreflang"]: a for a in soup.select("nav.language-switch a")}
    assert set(links) == {"en", "de", "ar"}
    assert links["en"].get("aria-current") == "true"
    assert links["de"]["href"] == "?eps=off&lang=de"
    assert links["ar"].get_text() == "العربية" and links["ar"]["lang"] == "ar"

    answer = client.get("/?eps=off&lang=de", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/?eps=off"
    kept = next(c for c in answer.headers.get_list("set-cookie") if c.startswith(CHOICE_COOKIE))
    assert "HttpOnly" in kept and "SameSite=lax" in kept
    # The choice comes before the browser's language.
    soup = html_of(client, "/?eps=off", **{"Accept-Language": "ar"})
    assert lang_and_dir(soup) == ("de", "ltr")
    assert soup.select_one(".skip-link").get_text() == "Zur Lektion springen"  # type: ignore[union-attr]
    assert soup.select_one('nav.language-switch a[aria-current="true"]')["hreflang"] == "de"  # type: ignore[index]


def test_a_language_the_lesson_does_not_speak_changes_nothing(client: TestClient) -> None:
    answer = client.get("/?lang=fr", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/"
    assert "set-cookie" not in answer.headers or CHOICE_COOKIE not in answer.headers["set-cookie"]
    assert lang_and_dir(html_of(client)) == ("en", "ltr")


def test_a_launch_locale_comes_after_the_choice_and_before_the_browser(
    client: TestClient,
) -> None:
    client.cookies.set(LAUNCH_COOKIE, "de-DE")
    assert lang_and_dir(html_of(client, **{"Accept-Language": "ar"})) == ("de", "ltr")
    client.cookies.set(CHOICE_COOKIE, "ar")
    assert lang_and_dir(html_of(client)) == ("ar", "rtl")


def test_the_switch_never_sends_to_another_host() -> None:
    assert switch_address("//evil.example/x", [("lang", "de")]) == "/evil.example/x"
    assert switch_address("/", [("lang", "de"), ("eps", "on")]) == "/?eps=on"


def test_error_pages_speak_the_language_too(client: TestClient) -> None:
    response = client.get("/no-such-page", headers={"Accept-Language": "ar"})
    assert response.status_code == 404
    assert lang_and_dir(BeautifulSoup(response.text, "html.parser")) == ("ar", "rtl")


def test_the_page_carries_its_scripts_words_in_its_language(client: TestClient) -> None:
    html = html_of(client, **{"Accept-Language": "de"}).find("html")
    assert html is not None
    assert html["data-decimal"] == "," and html["data-list-separator"] == "; "
    words = json.loads(str(html["data-words"]))
    assert words["The server could not be reached, so nothing was saved. Try again."] == (
        "Der Server war nicht erreichbar, daher wurde nichts gespeichert. Versuchen Sie es erneut."
    )
    assert json.loads(str(html["data-value-words"]))["not a number"] == "keine Zahl"


def test_static_files_are_the_same_in_every_language(client: TestClient) -> None:
    page = html_of(client)
    stylesheet = page.find("link", rel="stylesheet")
    assert stylesheet is not None
    answer = client.get(str(stylesheet["href"]), headers={"Accept-Language": "de"})
    assert answer.status_code == 200
    assert "accept-language" not in answer.headers.get("vary", "").lower()
    assert "accept-language" in client.get("/").headers["vary"].lower()


@pytest.mark.parametrize(
    ("language", "typed", "mean", "problem"),
    [
        ("de", "1,5; 2; 2,5", "2,000000", None),
        ("de", "1,5;;2", None, "Zwischen zwei Semikolons steht keine Zahl."),
        ("ar", "١٫٥، ٢، ٢٫٥", "2.000000", None),
        ("ar", "1,,2", None, "هناك فاصلتان لا عدد بينهما."),
        ("en", "١٫٥ 2 2.5", "2.000000", None),
    ],
)
def test_your_own_row_in_the_languages_writing_without_javascript(
    client: TestClient, language: str, typed: str, mean: str | None, problem: str | None
) -> None:
    client.post("/predict", data={"choice": "residual"})
    response = client.get("/", params={"row": typed}, headers={"Accept-Language": language})
    soup = BeautifulSoup(response.text, "html.parser")
    own = soup.select_one("#own-row")
    assert own is not None
    message = own.select_one("#own-row-message")
    assert message is not None and message.get_text(strip=True) == (problem or "")
    shown = own.select_one("[data-ln=mean]")
    assert (shown.get_text(strip=True) if shown is not None else None) == mean


def test_the_page_carries_the_row_parsers_words_in_its_language(client: TestClient) -> None:
    html = html_of(client, **{"Accept-Language": "ar"}).find("html")
    assert html is not None
    words = json.loads(str(html["data-words"]))
    assert words["There are two commas with no number between them."] == (
        "هناك فاصلتان لا عدد بينهما."
    )


@pytest.mark.parametrize(
    ("language", "title"), [("en", "Not found"), ("de", "Nicht gefunden"), ("ar", "غير موجود")]
)
def test_an_error_pages_title_is_in_the_language(
    client: TestClient, language: str, title: str
) -> None:
    response = client.get("/no-such-page", headers={"Accept-Language": language})
    assert response.status_code == 404
    heading = BeautifulSoup(response.text, "html.parser").find("h1")
    assert heading is not None and heading.get_text(strip=True) == title


@pytest.mark.parametrize(
    ("language", "title"),
    [("en", "This LTI launch was refused"), ("de", "Dieser LTI-Start wurde abgelehnt")],
)
def test_a_refused_launchs_page_is_in_the_language(
    client: TestClient, language: str, title: str
) -> None:
    response = client.post(
        "/lti/launch", data={"state": "x", "id_token": "y"}, headers={"Accept-Language": language}
    )
    assert 400 <= response.status_code < 500, response.text
    heading = BeautifulSoup(response.text, "html.parser").find("h1")
    assert heading is not None and heading.get_text(strip=True) == title


@pytest.mark.parametrize(
    ("language", "said"),
    [
        ("en", "You have run it 1 time."),
        ("de", "Sie haben 1 Durchlauf."),
        ("ar", "شغّلته مرة واحدة."),
    ],
)
def test_the_run_count_on_the_page_is_in_the_languages_plural_form(
    client: TestClient, language: str, said: str
) -> None:
    client.post("/predict", data={"choice": "residual"})
    client.post("/numbers", data={"row1_mean": "7"})
    soup = html_of(client, **{"Accept-Language": language})
    count = soup.select_one("#hints-run-count")
    assert count is not None and count.get_text(strip=True) == said


@pytest.mark.parametrize(
    ("language", "typed", "label"),
    [
        ("de", "1,5; 2; 2/3", "[1,5; 2; 2/3]"),
        ("ar", "١٫٥، ٢", "[1.5, 2]"),
        ("en", "1.5, 2, 2/3", "[1.5, 2, 2/3]"),
    ],
)
def test_your_own_row_is_named_in_the_languages_writing(
    client: TestClient, language: str, typed: str, label: str
) -> None:
    client.post("/predict", data={"choice": "residual"})
    response = client.get("/", params={"row": typed}, headers={"Accept-Language": language})
    named = BeautifulSoup(response.text, "html.parser").select_one("#own-row [data-ln=input]")
    assert named is not None and named.get_text(strip=True) == label


def test_an_answer_is_drawn_in_the_language_of_the_page_that_asked(client: TestClient) -> None:
    # The learner picked Arabic in another tab (the cookie says so); the German page's check is
    # answered in German: its regions and what it says.
    client.cookies.set(CHOICE_COOKIE, "ar")
    client.post("/predict", data={"choice": "residual"}, headers={"X-Page-Locale": "de"})
    answer = client.post(
        "/numbers",
        data={"row1_mean": "zwei"},
        headers={"Accept": "application/json", "X-Page-Locale": "de"},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["message"].startswith("Mittelwert von [1, 2, 3]: Nicht geprüft")
    assert "Das ist keine Zahl." in body["message"]
    assert "Das ist keine Zahl." in body["fragments"]["numbers"]
    assert "x-page-locale" in answer.headers["vary"].lower()
    # Without the page's word, the cookie decides, as for a page drawn anew.
    assert lang_and_dir(html_of(client)) == ("ar", "rtl")
    assert lang_and_dir(html_of(client, **{"X-Page-Locale": "fr"})) == ("ar", "rtl")
