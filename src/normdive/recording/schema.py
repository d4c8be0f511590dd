"""The JSON Schemas of the recording and of the depth sweep, generated from the pydantic
models (never hand-written).

Regenerate after changing recording/format.py or recording/sweep.py:

    .venv/bin/python -m normdive.recording.schema docs/recording.schema.json docs/sweep.schema.json

tests/test_recording_schema.py fails while a committed file differs from what this makes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from normdive.recording.format import FORMAT_VERSION, Recording
from normdive.recording.sweep import SWEEP_FORMAT_VERSION, Sweep

SCHEMA_ID = "https://normdive.invalid/recording.schema.json"  # names the schema, fetches nothing
SWEEP_SCHEMA_ID = "https://normdive.invalid/sweep.schema.json"


def schema_text() -> str:
    """The schema as the committed file holds it: sorted keys, two-space indent, final newline."""
    schema = Recording.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["description"] = (
        f"normdive recording, format_version {FORMAT_VERSION}. Generated from "
        "normdive.recording.format by normdive.recording.schema; do not edit by hand."
    )
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def sweep_schema_text() -> str:
    """The depth sweep's schema, in the same form as schema_text()."""
    schema = Sweep.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SWEEP_SCHEMA_ID
    schema["description"] = (
        f"normdive depth sweep, format_version {SWEEP_FORMAT_VERSION}. Generated from "
        "normdive.recording.sweep by normdive.recording.schema; do not edit by hand."
    )
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(
            "usage: python -m normdive.recording.schema RECORDING_SCHEMA [SWEEP_SCHEMA]",
            file=sys.stderr,
        )
        return 2
    for path, text in zip(argv, (schema_text(), sweep_schema_text()), strict=False):
        Path(path).write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
