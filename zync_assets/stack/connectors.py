"""Connector configurations: the files under `resources/connect/`.

A configuration file is JSON with `{{name}}` placeholders; keys starting with `//` are
comments. A converter file (`converter-avro.json`, `converter-json.json`) is applied to
a connector's key and value alike, as `key.converter.*` and `value.converter.*`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import connect_configs_dir

FORMATS = ("avro", "json")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


def _load(path: Path, values: dict[str, str]) -> dict[str, str]:
    def fill(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise ZyncError(f"{path}: no value for the placeholder {match.group(0)}")
        return values[match.group(1)]

    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ZyncError(f"cannot read the connector configuration {path}: {e}") from e
    return {k: _PLACEHOLDER.sub(fill, str(v)) for k, v in raw.items() if not k.startswith("//")}


def connector_config(
    name: str, wire_format: str, folder: Path | None = None, **values: str
) -> dict[str, str]:
    """`<name>.json` with its placeholders filled, and the converters of `wire_format`."""
    if wire_format not in FORMATS:
        raise ZyncError(f"unknown wire format {wire_format!r}: use one of {', '.join(FORMATS)}")
    folder = folder or connect_configs_dir()
    config = _load(folder / f"{name}.json", values)
    converter = _load(folder / f"converter-{wire_format}.json", values)
    for side in ("key", "value"):
        config[f"{side}.converter"] = converter["converter"]
        for key, value in converter.items():
            if key != "converter":
                config[f"{side}.converter.{key}"] = value
    return config
