"""The browser's layer norm (static/layernorm.js) agrees with the server's, number for number.

Node runs tests/js/parity.mjs, which imports the very file the page serves. The steps are exact,
so rows cross over as decimals' text and their steps come back as the text the page shows,
compared character for character. Floats (the display's float formatting) cross over as the hex
of their IEEE 754 bits, so NaN, the infinities and -0 are compared exactly.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import struct
import subprocess
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from locale_rows import LOCALE_ROWS
from normdive.i18n.catalogues import activated, translations
from normdive.i18n.locales import LOCALES
from normdive.i18n.numbers import uses_decimal_comma
from normdive.numeric.display import (
    NOT_A_NUMBER,
    format_input_number,
    format_input_row,
    format_number,
    format_row,
    variance_too_small_to_show,
)
from normdive.numeric.layernorm import layer_norm_steps
from normdive.numeric.rows import (
    MAX_ROW_CHARS,
    MAX_ROW_LENGTH,
    ROW_MESSAGES,
    RowError,
    parse_row_exact,
)

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parent.parent
PARITY_SCRIPT = ROOT / "tests" / "js" / "parity.mjs"
NODE = shutil.which("node") or "/usr/bin/node"
NODE_TIMEOUT_S = 120
EPS_ON = "0.00001"  # the lesson's epsilon (content/d9.toml), as the page writes it
EPS_OFF = "0"
SWITCH = (EPS_ON, EPS_OFF)
RANDOM_ROWS = 1500  # at least 1,000, each at both eps values
EQUAL_ROWS = 300  # typed rows of one repeated decimal, each at both eps values
SEED = 9_2024


def _hex(x: float) -> str:
    return struct.pack(">d", x).hex()


def _float(text: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(text))[0]
    return value


def _run_node(request: dict[str, Any]) -> dict[str, Any]:
    completed = subprocess.run(
        [NODE, str(PARITY_SCRIPT)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=NODE_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == "", completed.stderr  # no warnings either
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def _random_value(rng: random.Random) -> float:
    """Mixed magnitudes, 1e-150 to 1e150, both signs; some exact integers and zeros."""
    kind = rng.random()
    if kind < 0.1:
        return float(rng.randint(-9, 9))
    if kind < 0.12:
        return rng.choice([0.0, -0.0])
    return rng.choice([-1.0, 1.0]) * rng.random() * 10.0 ** rng.randint(-150, 150)


def _random_rows(count: int, seed: int) -> list[list[float]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        length = rng.randint(1, MAX_ROW_LENGTH)
        if rng.random() < 0.5:
            # One magnitude per row, like a real activation vector.
            scale = 10.0 ** rng.randint(-150, 150)
            rows.append([rng.gauss(0.0, 1.0) * scale for _ in range(length)])
        else:
            rows.append([_random_value(rng) for _ in range(length)])
    return rows


EDGE_ROWS: list[list[float]] = [
    [1, 2, 3],
    [2, 2, 2, 6],
    [4, 4, 4, 4],  # zero variance
    [-3, -3, -3],
    [5, 5],
    [7.5],  # one element
    [0.0],
    [-0.0],  # negative zero
    [-0.0, 0.0],
    [-0.0, -0.0, -0.0],
    [-0.0, 1.0],
    [1e150],
    [1e150, 2e150, 3e150],  # huge
    [-1e150, 1e150, 5e149, -2.5e150],
    [1e-150, 2e-150, 3e-150],  # tiny
    [1e-150, -1e-150],
    [1e150, 1e-150],
    [float(i) for i in range(MAX_ROW_LENGTH)],  # 16 elements
    [(-1.0) ** i * 10.0 ** (i - 8) for i in range(MAX_ROW_LENGTH)],
    [1e-200, 0.0],  # squares underflow: nonzero over zero, +-infinity
    [1e200, -1e200],  # squares overflow
    [1.7e308, 1.7e308],  # the sum overflows: NaN deviations
    [5e-324, 0.0],  # subnormal
    [0.1, 0.2, 0.3],
]


def _tie_values(rng: random.Random, count: int) -> list[float]:
    """Exact binary ties at the sixth decimal: j + odd/128 (10**6 * x ends in exactly .5)."""
    values = []
    for _ in range(count):
        whole = rng.randint(0, 2**40)
        odd = 2 * rng.randint(0, 63) + 1
        values.append(rng.choice([-1, 1]) * (whole + odd / 128))
    return values


def _formatting_values(rng: random.Random) -> list[float]:
    specials = [
        0.0,
        -0.0,
        math.nan,
        math.inf,
        -math.inf,
        -1e-9,
        -4.9999999e-7,
        5e-7,
        -5e-7,
        1e21,
        -1e21,
        1.7976931348623157e308,
        5e-324,
        0.0078125,
        0.0234375,
        2 / 3,
        1.2247356859083902,
    ]
    return specials + _tie_values(rng, 300) + [_random_value(rng) for _ in range(500)]


def _row_texts(rng: random.Random) -> list[str]:
    table = [
        "",
        "   ",
        "1, 2, 3",
        "[1, 2, 3]",
        " [ 2 2 2 6 ] ",
        "1,2,3,",
        "0,5 1,5",
        "1,2, 3",
        "2 0,25",
        "1 ,2 3",
        "1 2,3,4",
        "1,2 3",
        "−0,5 1",
        "0,5",
        ", 0,5 1",
        ",1",
        "−1.5, +2",
        "1e-3 6.02E23 .5 3.",
        "-0",
        "1e-999",
        "1e400",
        "1,,2",
        ", ,",
        "[1, 2",
        "1, 2]",
        "[",
        "]",
        "[]",
        "[ ]",
        "1; 2",
        "1_000",
        "0x10",
        "٣",
        "１２",  # fullwidth digits
        "３ １",
        "－１．５，　２",  # full-width minus, point and comma, an ideographic space
        "[１ｅ－３]",
        "０，５ １，５",  # full-width decimal commas
        "１，，２",
        "ｉｎｆ",
        "３²",
        "1e⁻³",
        "x₁ 2",
        "2ᵉ5",
        "−３",
        "0.1 0.1 0.1",
        "0.10000000000000000001 0.1",
        "1.00000000000000000001e100",
        "0.99999999999999999999e-100",
        "1e99999999999999999999",
        "1e-99999999999999999999",
        "0e-99999999999999999999",
        "007.50e-2, .5, 3., -0",
        "1" + "0" * 100,
        "1" + "0" * 101,
        "0." + "0" * 99 + "1",
        "0." + "0" * 100 + "1",
        "1, NaN",
        "-inf",
        "+Infinity 2",
        "--inf",
        "İnf",
        "abcdefghijklmnopqrstuvwxyz",
        "😀" * 25,
        "1\u00a02\u202f3",
        "1\u20032",  # an em space is not a separator
        "1\t2\n3\r4",
        ",".join(["1"] * MAX_ROW_LENGTH),
        ",".join(["1"] * (MAX_ROW_LENGTH + 1)),
        "1" * MAX_ROW_CHARS,
        "1" * (MAX_ROW_CHARS + 1),
        "😀" * MAX_ROW_CHARS,  # 400 characters, 800 UTF-16 units
        "😀" * (MAX_ROW_CHARS + 1),
        "0.1 0.2 0.30000000000000004 1.7976931348623157e308 5e-324 2.4703282292062328e-324",
        # Fractions, by a typed answer's rules (numeric/numbers.py).
        "1/3, 2/3, 1",
        "[2 / 3 4/6]",
        "-1.5/4 3/8",
        "−2/3 +2/3",
        "２／３　１／３",
        "4/2, 1",
        "-0/5 0/1",
        "007.50/2.5",
        "1/0",
        "2/0.000",
        "2/-3",
        "1e2/3",
        "1/2/3",
        "2/",
        "/3",
        "--2/3",
        "+-2/3",
        "x/2",
        "∞/2",
        "2/3²",
        "1,5/2 3",
        "1" + "0" * 100 + "/1",
        "1" + "0" * 101 + "/1",
        "1/1" + "0" * 100,
        "1/1" + "0" * 101,
        "3/7 " * 16,
        "∞",
        "-Infinity",
        "+∞",
    ]
    pieces = [
        "1", "-2.5", "−3", "+4e2", ".5", "7.", "1E-3", "x", "1e999", "nan", "", "[", "]",
        "2/3", "-1/7", "1/0", "2 / 9", "1e1/2",
    ]  # fmt: skip
    separators = [", ", ",", " ", "  ,  ", "\t", ",,", ";"]
    for _ in range(400):
        count = rng.randint(1, 20)
        tokens = [
            rng.choice(pieces) if rng.random() < 0.15 else repr(_random_value(rng))
            for _ in range(count)
        ]
        text = tokens[0]
        for token in tokens[1:]:
            text += rng.choice(separators) + token
        if rng.random() < 0.3:
            text = f"[{text}]"
        table.append(text)
    return table


def _local_texts() -> list[tuple[str, str]]:
    """(locale, text): the rows of tests/locale_rows.py and a refusal of each kind, typed in
    each locale."""
    texts = [text for text, _, _ in LOCALE_ROWS] + [
        "1" * (MAX_ROW_CHARS + 1), "3²", "[1 2", "0,5 1,5", "1,,2", "", "∞", "x", "1/2/3",
        "1/0", "1e101", "1e-101", ",".join(["1"] * (MAX_ROW_LENGTH + 1)),
    ]  # fmt: skip
    return [(locale, text) for locale in LOCALES for text in texts]


def _python_parse(text: str, *, decimal_comma: bool = False) -> dict[str, Any]:
    result = parse_row_exact(text, decimal_comma=decimal_comma)
    if isinstance(result, RowError):
        return {"message": result.message}
    return {"values": [format_input_number(x) for x in result]}


def _exact(text: str) -> Decimal | Fraction:
    """A row's entry as the parsers write it: a fraction as "p/q", a decimal as its digits."""
    return Fraction(text) if "/" in text else Decimal(text)


def _python_shown(row: Sequence[str], eps: str) -> dict[str, Any]:
    """What the page writes for a row's steps, the server's way."""
    steps = layer_norm_steps([_exact(x) for x in row], Decimal(eps))
    return {
        "mean": format_number(steps.mean),
        "variance": format_number(steps.variance),
        "denominator": format_number(steps.denominator),
        "normalised": format_row(steps.normalised),
        "varianceHidden": variance_too_small_to_show(steps),
    }


def _python_own_row(text: str, eps: str) -> dict[str, Any]:
    parsed = _python_parse(text)
    if "message" in parsed:
        return parsed
    return {**parsed, "shown": _python_shown(parsed["values"], eps)}


# Typed rows, through the parser and the steps as the page runs them. Equal entries first: the
# mean of three 0.1s is not 0.1 in binary, and float steps gave outputs of +-1 without eps.
OWN_ROWS_EQUAL = [
    "0.1 0.1 0.1",
    " ".join(["0.1"] * 7),
    "1e-7 1e-7",
    "-2.5 -2.5 -2.5 -2.5",
    "1e100 1e100",
    "−1e-100, −1e-100",
    "３ ３",  # full-width digits
    "０．１　０．１　０．１",  # full-width points, ideographic spaces
    ", ".join(["0.3"] * MAX_ROW_LENGTH),
    "1/3 1/3 2/6",  # equal fractions
]
OWN_ROWS_MIXED = [
    "３ １",
    "－１．５，　２",
    "0.1 0.2 0.3",
    "0.1 0.1 0.10000001",
    "1e-7 2e-7",  # a variance too small for six decimals
    "1e100 -1e100 1e-100 -1e-100",
    "1 1.0000000000000000000001",  # a difference no float holds
    "1e100 1e-100",
    "3, 1, 4, 1, 5",
    "-123456.789 " * 16,
    "0.0000025 -0.0000025",
    "1e-7 1e-7 3e-7",
    "0,5 1,5",
    "3²",
    "1/3 2/3 1",  # fractions: denominators other than powers of ten
    "2/3 0.1 -5/7 1e-3",
    "1/7 " * 16,
    "1" + "0" * 100 + "/3 1/1" + "0" * 100,
]


def _equal_row_texts(rng: random.Random, count: int) -> list[str]:
    """Rows of one decimal repeated 1 to 16 times, in range and within MAX_ROW_CHARS."""
    texts = []
    while len(texts) < count:
        digits = str(rng.randint(1, 10 ** rng.randint(1, 17)))
        entry = rng.choice(["", "-", "−"]) + f"{digits}e{rng.randint(-100 - 1, 100 - len(digits))}"
        text = rng.choice([" ", ", ", ","]).join([entry] * rng.randint(1, MAX_ROW_LENGTH))
        if len(text) <= MAX_ROW_CHARS:
            texts.append(text)
    return texts


@pytest.fixture(scope="module")
def parity() -> tuple[dict[str, Any], dict[str, Any]]:
    """One Node run for the whole module: the request and Node's answer."""
    rng = random.Random(SEED)
    rows = EDGE_ROWS + _random_rows(RANDOM_ROWS, SEED)
    # A float row is read as the decimals String(x) writes for it, every one exact.
    cases = [([format_input_number(x) for x in row], eps) for row in rows for eps in SWITCH]
    typed = OWN_ROWS_EQUAL + OWN_ROWS_MIXED + _equal_row_texts(rng, EQUAL_ROWS)
    request: dict[str, Any] = {
        "steps": [{"row": row, "eps": eps} for row, eps in cases],
        "format": [_hex(x) for x in _formatting_values(rng)],
        "formatRows": [[_hex(x) for x in row] for row in rows[:200]],
        "inputRows": [[_hex(x) for x in row] for row in rows],
        "parse": _row_texts(rng),
        "ownRows": [{"text": text, "eps": eps} for text in typed for eps in SWITCH],
        "localParse": [
            {
                "text": text,
                "decimalComma": uses_decimal_comma(locale),
                "words": {
                    message: translations(locale).gettext(message) for message in ROW_MESSAGES
                },
            }
            for locale, text in _local_texts()
        ],
    }
    return request, _run_node(request)


def _floats(hexes: Sequence[str]) -> list[float]:
    return [_float(h) for h in hexes]


def test_layer_norm_agrees_on_random_and_edge_rows_at_both_eps(
    parity: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    request, answer = parity
    assert len(request["steps"]) >= 2 * 1000
    for case, javascript in zip(request["steps"], answer["steps"], strict=True):
        # Exact steps, one rounding to six decimals: the same text, character for character.
        assert _python_shown(case["row"], case["eps"]) == javascript, case


def test_the_edge_rows_were_sent(parity: tuple[dict[str, Any], dict[str, Any]]) -> None:
    request, _ = parity
    sent = [case["row"] for case in request["steps"]]
    for row in EDGE_ROWS:
        assert [format_input_number(float(x)) for x in row] in sent


def test_a_typed_row_gives_the_same_steps_in_both(
    parity: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    request, answer = parity
    for case, javascript in zip(request["ownRows"], answer["ownRows"], strict=True):
        assert _python_own_row(case["text"], case["eps"]) == javascript, case


def test_a_typed_row_of_equal_entries_is_not_a_number_without_eps_in_both(
    parity: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    request, answer = parity
    equal = set(OWN_ROWS_EQUAL)
    checked = 0
    for case, javascript in zip(request["ownRows"], answer["ownRows"], strict=True):
        values = javascript.get("values")
        if values is None or len(set(map(_exact, values))) != 1:
            assert case["text"] not in equal, case
            continue
        checked += 1
        shown = javascript["shown"]
        nothing = "[" + ", ".join([NOT_A_NUMBER] * len(values)) + "]"
        zeros = "[" + ", ".join(["0.000000"] * len(values)) + "]"
        assert shown["variance"] == "0.000000"
        assert shown["normalised"] == (nothing if case["eps"] == EPS_OFF else zeros), case
    assert checked >= 2 * (len(OWN_ROWS_EQUAL) + EQUAL_ROWS)


def test_format_number_gives_the_same_text(
    parity: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    request, answer = parity
    python = [format_number(_float(h)) for h in request["format"]]
    assert python == answer["format"]


def test_format_row_and_format_input_row_give_the_same_text(
    parity: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    request, answer = parity
    assert [format_row(_floats(row)) for row in request["formatRows"]] == answer["formatRows"]
    assert [format_input_row(_floats(row)) for row in request["inputRows"]] == answer["inputRows"]


def test_parse_row_gives_the_same_rows_and_messages(
    parity: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    request, answer = parity
    python = [_python_parse(text) for text in request["parse"]]
    for text, ours, theirs in zip(request["parse"], python, answer["parse"], strict=True):
        assert ours == theirs, text
    accepted = sum("values" in result for result in python)
    assert 0 < accepted < len(python)  # the table exercises both outcomes


def test_parse_row_reads_each_locales_writing_and_speaks_its_language_in_both(
    parity: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    _, answer = parity
    said = answer["localParse"]
    for (locale, text), theirs in zip(_local_texts(), said, strict=True):
        with activated(locale):
            ours = _python_parse(text, decimal_comma=uses_decimal_comma(locale))
        assert ours == theirs, (locale, text)
    # The German messages are German in both.
    german = [
        result["message"]
        for (locale, _), result in zip(_local_texts(), said, strict=True)
        if locale == "de" and "message" in result
    ]
    assert german and all("Write" not in message for message in german)
