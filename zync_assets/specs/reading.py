"""Reading a spec file's YAML strictly: what a spec never needs is refused with one line.

A spec is a small hand-written file. So: at most MAX_SPEC_BYTES, UTF-8, no anchors or
aliases (an alias "bomb" expands to billions of nodes), no key given twice in a mapping
(YAML keeps the last one silently), and no nesting deeper than MAX_DEPTH.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MAX_SPEC_BYTES = 1 << 20
MAX_DEPTH = 64


class SpecYamlError(ValueError):
    """What is wrong with the file, in one line (without the file's name)."""


class _StrictLoader(yaml.SafeLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise SpecYamlError(
                f"line {mark.line + 1}: YAML aliases (*name) are not allowed in a spec; "
                "write the value out"
            )
        event = self.peek_event()
        if getattr(event, "anchor", None):
            raise SpecYamlError(
                f"line {event.start_mark.line + 1}: YAML anchors (&{event.anchor}) are not "
                "allowed in a spec"
            )
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise SpecYamlError(
                    f"line {event.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise SpecYamlError(
                    f"line {key_node.start_mark.line + 1}: key {key!r} is given twice"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_spec_yaml(path: Path) -> Any:
    """The parsed YAML of a spec file; SpecYamlError or OSError when it cannot be."""
    size = path.stat().st_size
    if size > MAX_SPEC_BYTES:
        raise SpecYamlError(
            f"{size / 2**20:.1f} MiB is too large for a spec (at most {MAX_SPEC_BYTES >> 10} KiB)"
        )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecYamlError(
            f"line {line}: not UTF-8 (byte 0x{raw[exc.start]:02x}); save the file as UTF-8"
        ) from exc
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader, made stricter
