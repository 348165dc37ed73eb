"""How zync's topics, pools and lake tables are named in Dagster: keys, groups, owners, tags.

By default a topic is `kafka/<topic>`, a raw pool `raw/<pool>`, a staging pool
`staging/<pool>` with its done records `done/<pool>`, a lake table `table/<name>`, each in
the group of its kind. A host project renames them the way dagster-dbt's translator does:
subclass `ZyncTranslator`, override what it names differently, and pass it to
`build_zync_definitions(..., translator=...)`; `key_prefix` puts every key (and every
sensor, job and op name) under a prefix of its own, for two zync lakes in one project or
keys that would meet a host's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from dagster import AssetKey

AssetKind = Literal["topic", "raw", "staging", "done", "table"]

_KEY_ROOT: dict[AssetKind, str] = {
    "topic": "kafka", "raw": "raw", "staging": "staging", "done": "done", "table": "table",
}  # fmt: skip
# Input and output topics share a kind; their groups tell them apart.
_GROUP: dict[AssetKind, str] = {
    "raw": "raw", "staging": "staging", "done": "done", "table": "tables",
}  # fmt: skip


@dataclass(frozen=True)
class ZyncAsset:
    """One of zync's assets, before Dagster names it. `output`: a topic zync writes."""

    kind: AssetKind
    name: str  # the topic's, pool's or table's own name
    output: bool = False


class ZyncTranslator:
    """Names zync's assets in Dagster. Override any method; each gets the asset it names."""

    def asset_key(self, asset: ZyncAsset) -> AssetKey:
        return AssetKey([_KEY_ROOT[asset.kind], asset.name])

    def group_name(self, asset: ZyncAsset) -> str:
        if asset.kind == "topic":
            return "kafka_out" if asset.output else "kafka"
        return _GROUP[asset.kind]

    def owners(self, asset: ZyncAsset) -> Sequence[str]:
        return ()

    def tags(self, asset: ZyncAsset) -> Mapping[str, str]:
        return {}


@dataclass(frozen=True)
class Naming:
    """A translator and a key prefix: what every asset factory names by."""

    translator: ZyncTranslator = field(default_factory=ZyncTranslator)
    key_prefix: tuple[str, ...] = ()

    def key(self, kind: AssetKind, name: str, *, output: bool = False) -> AssetKey:
        key = self.translator.asset_key(ZyncAsset(kind, name, output))
        return AssetKey([*self.key_prefix, *key.path])

    def attributes(
        self, kind: AssetKind, name: str, *, output: bool = False,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """The key, group, owners and tags of an asset (AssetSpec's and @asset's names);
        `tags`: zync's own, beside the translator's."""
        asset = ZyncAsset(kind, name, output)
        return {
            "key": self.key(kind, name, output=output),
            "group_name": self.translator.group_name(asset),
            "owners": list(self.translator.owners(asset)),
            "tags": {**self.translator.tags(asset), **(tags or {})},
        }

    def definition_name(self, name: str) -> str:
        """A sensor's, job's or op's name, under the key prefix: names must be unique in a
        host's Definitions as keys must."""
        return re.sub(r"[^A-Za-z0-9_]", "_", "_".join([*self.key_prefix, name]))


DEFAULT_NAMING = Naming()
