"""The JSON Schema of the lab grid, generated from the pydantic models (never hand-written).

Regenerate after changing lab/grid.py:

    .venv/bin/python -m normdive.lab.schema docs/lab.schema.json

tests/test_lab_grid.py fails while the committed file differs from what this makes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from normdive.lab.grid import LAB_FORMAT_VERSION, LabGrid

LAB_SCHEMA_ID = "https://normdive.invalid/lab.schema.json"  # names the schema, fetches nothing


def lab_schema_text() -> str:
    """The schema as the committed file holds it: sorted keys, two-space indent, final newline."""
    schema = LabGrid.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = LAB_SCHEMA_ID
    schema["description"] = (
        f"normdive lab grid, format_version {LAB_FORMAT_VERSION}. Generated from "
        "normdive.lab.grid by normdive.lab.schema; do not edit by hand."
    )
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m normdive.lab.schema LAB_SCHEMA", file=sys.stderr)
        return 2
    Path(argv[0]).write_text(lab_schema_text(), encoding="utf-8")
    print(f"wrote {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
