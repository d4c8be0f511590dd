"""The recording format's JSON Schema, generated from the pydantic models; regenerate with
`.venv/bin/python -m normdive.recording.schema docs/recording.schema.json` (a test checks)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from normdive.recording.runs import RUNS_FORMAT_VERSION, Runs

SCHEMA_ID = "https://normdive.invalid/recording.schema.json"  # names the schema, fetches nothing


def schema_text() -> str:
    schema = Runs.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["description"] = (
        f"normdive recording: a file of runs and its plan (ablation, sweep or lab_grid), "
        f"format_version {RUNS_FORMAT_VERSION}. Generated from normdive.recording.runs by "
        "normdive.recording.schema; do not edit by hand."
    )
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m normdive.recording.schema SCHEMA", file=sys.stderr)
        return 2
    Path(argv[0]).write_text(schema_text(), encoding="utf-8")
    print(f"wrote {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
