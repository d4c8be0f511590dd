"""One table of rows typed in each locale's writing, read by both row parsers: numeric/rows.py
(tests/test_numeric_rows.py) and static/layernorm.js parseRow (tests/test_js_parity.py).

Each entry: the text typed, the row it is where a point marks the decimals (English, Arabic),
and where a comma does (German, its entries then separated by semicolons); None where the
row is refused. Where a point marks the decimals, a lone group with a comma is a list ("1,5"
is [1, 5], as ever): only groups parted by spaces are named as decimal commas. A row is
written as the parsers write its entries (format_input_number)."""

from __future__ import annotations

LOCALE_ROWS: tuple[tuple[str, list[str] | None, list[str] | None], ...] = (
    ("1,5; 2; 2/3", None, ["1.5", "2", "2/3"]),
    ("1,5 2,5", None, ["1.5", "2.5"]),
    ("[1,5; -2]", None, ["1.5", "-2"]),
    ("1.5; 2", None, ["1.5", "2"]),
    ("1.5 2", ["1.5", "2"], ["1.5", "2"]),
    ("1,5", ["1", "5"], ["1.5"]),
    ("1, 2, 3", ["1", "2", "3"], ["1", "2", "3"]),
    ("1,2,3", ["1", "2", "3"], None),
    ("1;;2", None, None),
    ("1; ;2", None, None),
    ("-1,5/4", ["-1", "5/4"], ["-3/8"]),
    ("−0,25", ["0", "25"], ["-0.25"]),
    ("1.000,5", ["1", "5"], None),
    ("1,5e-3; 2", None, ["0.0015", "2"]),
    ("١٫٥ ٢", ["1.5", "2"], ["1.5", "2"]),
    ("٣، ٤", ["3", "4"], ["3", "4"]),
    ("٢/٣ ١", ["2/3", "1"], ["2/3", "1"]),
    ("۱۲ ۰٫۵", ["12", "0.5"], ["12", "0.5"]),
    ("-٠٫٠٠١", ["-0.001"], ["-0.001"]),
    ("١x", None, None),
    ("2/0", None, None),
    ("1e999", None, None),
    ("nan", None, None),
    (";".join(["1"] * 17), None, None),
)
