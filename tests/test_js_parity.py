"""The browser's layer norm (static/layernorm.js) agrees with the server's, number for number.

Node runs tests/js/parity.mjs, which imports the very file the page serves. Floats cross over as
the hex of their IEEE 754 bits, so NaN, the infinities and -0 are compared exactly.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import struct
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from normdive.numeric.display import format_input_row, format_number, format_row
from normdive.numeric.layernorm import layer_norm_steps
from normdive.numeric.rows import MAX_ROW_CHARS, MAX_ROW_LENGTH, parse_row

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parent.parent
PARITY_SCRIPT = ROOT / "tests" / "js" / "parity.mjs"
NODE = shutil.which("node") or "/usr/bin/node"
NODE_TIMEOUT_S = 120
EPS_ON = 1e-5
EPS_OFF = 0.0
SWITCH = (EPS_ON, EPS_OFF)
RANDOM_ROWS = 1500  # at least 1,000, each at both eps values
SEED = 9_2024
# The agreement the twins promise: within 1e-12, relative for large magnitudes.
TOLERANCE = 1e-12


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


@dataclass
class Differences:
    """The largest gaps seen between the two languages, and how many values were compared."""

    largest_absolute: float = 0.0
    largest_relative: float = 0.0
    compared: int = 0
    bit_different: int = 0

    def add(self, python: float, javascript: float) -> None:
        self.compared += 1
        if math.isnan(python) or math.isnan(javascript):
            # NaN payloads and sign bits carry no meaning (x86 makes 0/0 a negative NaN,
            # Python's math.nan is positive): any NaN matches any NaN.
            assert math.isnan(python) and math.isnan(javascript), (python, javascript)
            return
        if _hex(python) != _hex(javascript):
            self.bit_different += 1
        if python == javascript:  # also equal infinities
            return
        absolute = abs(python - javascript)
        relative = absolute / max(abs(python), abs(javascript))
        self.largest_absolute = max(self.largest_absolute, absolute)
        self.largest_relative = max(self.largest_relative, relative)
        # Within 1e-12, relative for large magnitudes (absolute below 1).
        assert absolute <= TOLERANCE or relative <= TOLERANCE, (python, javascript)


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
    ]
    pieces = ["1", "-2.5", "−3", "+4e2", ".5", "7.", "1E-3", "x", "1e999", "nan", "", "[", "]"]
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


def _python_parse(text: str) -> dict[str, Any]:
    result = parse_row(text)
    if isinstance(result, tuple):
        return {"values": [_hex(x) for x in result]}
    return {"message": result.message}


@pytest.fixture(scope="module")
def parity() -> tuple[dict[str, Any], dict[str, Any]]:
    """One Node run for the whole module: the request and Node's answer."""
    rng = random.Random(SEED)
    rows = EDGE_ROWS + _random_rows(RANDOM_ROWS, SEED)
    cases = [(row, eps) for row in rows for eps in SWITCH]
    request: dict[str, Any] = {
        "steps": [{"row": [_hex(x) for x in row], "eps": _hex(eps)} for row, eps in cases],
        "format": [_hex(x) for x in _formatting_values(rng)],
        "formatRows": [[_hex(x) for x in row] for row in rows[:200]],
        "inputRows": [[_hex(x) for x in row] for row in rows],
        "parse": _row_texts(rng),
    }
    return request, _run_node(request)


def _floats(hexes: Sequence[str]) -> list[float]:
    return [_float(h) for h in hexes]


def test_layer_norm_agrees_on_random_and_edge_rows_at_both_eps(
    parity: tuple[dict[str, Any], dict[str, Any]], record_property: Any
) -> None:
    request, answer = parity
    assert len(request["steps"]) >= 2 * 1000
    differences = Differences()
    for case, result in zip(request["steps"], answer["steps"], strict=True):
        steps = layer_norm_steps(_floats(case["row"]), _float(case["eps"]))
        differences.add(steps.mean, _float(result["mean"]))
        differences.add(steps.variance, _float(result["variance"]))
        differences.add(steps.denominator, _float(result["denominator"]))
        normalised = _floats(result["normalised"])
        assert len(normalised) == len(steps.normalised)
        for python, javascript in zip(steps.normalised, normalised, strict=True):
            differences.add(python, javascript)
    record_property("largest_absolute_difference", differences.largest_absolute)
    record_property("largest_relative_difference", differences.largest_relative)
    print(
        f"\nJS vs Python on {len(request['steps'])} (row, eps) cases, "
        f"{differences.compared} numbers: largest absolute difference "
        f"{differences.largest_absolute!r}, largest relative difference "
        f"{differences.largest_relative!r}, bit-different values {differences.bit_different}"
    )
    # Same operations in the same order: not just close, identical to the bit.
    assert differences.bit_different == 0
    assert differences.largest_absolute == 0.0


def test_the_edge_rows_were_sent(parity: tuple[dict[str, Any], dict[str, Any]]) -> None:
    request, _ = parity
    sent = [_floats(case["row"]) for case in request["steps"]]
    for row in EDGE_ROWS:
        assert [_hex(float(x)) for x in row] in [[_hex(x) for x in r] for r in sent]


def test_format_number_gives_the_same_text(
    parity: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    request, answer = parity
    python = [format_number(_float(h)) for h in request["format"]]
    assert python == answer["format"]


def test_format_number_agrees_on_every_computed_value(
    parity: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    # Every mean, variance, denominator and normalised entry Node computed, formatted by both.
    _, answer = parity
    values = [
        h
        for result in answer["steps"]
        for h in [result["mean"], result["variance"], result["denominator"], *result["normalised"]]
    ]
    node = _run_node(
        {"steps": [], "format": values, "formatRows": [], "inputRows": [], "parse": []}
    )
    assert [format_number(_float(h)) for h in values] == node["format"]


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
