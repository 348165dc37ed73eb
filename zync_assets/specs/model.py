"""ETL spec files (`etl_specs/*.yaml`): routes of topics to pools, and transform rules.

This module parses and validates the file's structure; the ETL stage checks the
SQL of each rule against Spark. Every error names the file (and rule and field).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from zync_assets.codec.formats import AVRO, WireFormat, wire_format
from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import CHECKOUT_ROOT
from zync_assets.core.names import POOL_NAME
from zync_assets.core.timeparse import parse_duration
from zync_assets.specs.patterns import TopicPattern, excluded_of, pattern_problem
from zync_assets.specs.reading import SpecYamlError, read_spec_yaml
from zync_assets.specs.rules import Rule, parse_rules
from zync_assets.specs.tables import TableDef, TablePattern, parse_tables


@dataclass(frozen=True)
class Freshness:
    """How fresh the spec's assets must be (its `freshness:` section): Dagster shows an
    asset FAIL once `fail_s` seconds pass without a new materialization, WARN after
    `warn_s`. A quiet source counts as late too: set it to the longest quiet you accept."""

    fail_s: float
    warn_s: float | None = None


@dataclass(frozen=True)
class Route:
    topic: str
    pool: str
    format: WireFormat = AVRO


@dataclass(frozen=True)
class Spec:
    path: Path
    inputs: list[Route]
    outputs: list[Route]
    transforms: list[Rule] = field(default_factory=list)
    shaper: Path | None = None
    tables: list[TableDef] = field(default_factory=list)
    freshness: Freshness | None = None
    patterns: list[TopicPattern] = field(default_factory=list)  # inputs named by pattern
    table_patterns: list[TablePattern] = field(default_factory=list)  # a table per topic

    @property
    def name(self) -> str:
        return self.path.stem

    def keeps_tables(self) -> bool:
        """Whether it keeps lake tables: named ones, or one per topic of a pattern."""
        return bool(self.tables or self.table_patterns)

    def raw_pools(self) -> dict[str, list[str]]:
        """pool -> its input topics named in the file, in file order (a pool of patterns
        alone: none; pattern_pools gives its patterns)."""
        pools: dict[str, list[str]] = {}
        for route in self.inputs:
            pools.setdefault(route.pool, []).append(route.topic)
        for pattern in self.patterns:
            pools.setdefault(pattern.pool, [])
        return pools

    def staging_pools(self) -> dict[str, list[str]]:
        """staging pool -> the rules' output topics in it, in file order (a mirror rule's
        pool: those of the topics it has mirrored so far, specs/mirror.py)."""
        pools: dict[str, list[str]] = {}
        for route in self.outputs:
            pools.setdefault(route.pool, []).append(route.topic)
        for rule in self.transforms:
            if rule.pool is not None:
                pools.setdefault(rule.pool, [])
        return pools

    def rules_of(self, pool: str) -> list[Rule]:
        """The rules whose outputs go to staging pool `pool`: the ETL runs them there."""
        topics = self.staging_pools().get(pool, [])
        return [
            r for r in self.transforms if r.pool == pool or (r.pool is None and r.out in topics)
        ]

    def etl_topics(self, pool: str) -> list[str]:
        """The input topics the ETL of staging pool `pool` reads: its rules' topics and the
        transaction topics its gated rules wait on. The events of another input topic (one
        only a lake table reads) are not the ETL's: they get no done records and are no
        part of the pool's lag."""
        rules = self.rules_of(pool)
        topics = (t for r in rules for t in (*r.topics, r.transaction_topic) if t)
        return list(dict.fromkeys(topics))

    def require_views(self, topics: Iterable[str]) -> None:
        """Fail unless a view rule writes each of `topics`."""
        views = [r.out for r in self.transforms if r.type == "view"]
        unknown = sorted(set(topics) - set(views))
        if unknown:
            raise SpecError(
                f"{self.path}: no view writes {', '.join(unknown)}; its views write: "
                f"{', '.join(views) or 'nothing (it has no view rule)'}"
            )

    def formats(self, discovered: Iterable[str] = ()) -> dict[str, WireFormat]:
        """topic -> its wire format: inputs and outputs, and `discovered` topics by the
        first pattern that takes them."""
        named = {route.topic: route.format for route in self.inputs + self.outputs}
        for topic in discovered:
            taken = next((p for p in self.patterns if p.matches(topic)), None)
            if taken is not None and topic not in named:
                named[topic] = taken.format
        return named


class SpecError(ZyncError):
    pass


def _fail(path: Path, where: str, problem: str) -> SpecError:
    return SpecError(f"{path}: {where}: {problem}" if where else f"{path}: {problem}")


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    try:
        data = read_spec_yaml(path)
    except OSError as exc:
        raise SpecError(f"cannot read spec {path}: {exc.strerror}") from exc
    except SpecYamlError as exc:
        raise SpecError(f"{path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict):
        raise _fail(path, "", "expected a mapping with inputs, outputs and transforms")
    unknown = set(data) - {"inputs", "outputs", "transforms", "shaper", "tables", "freshness"}
    if unknown:
        names = sorted(str(name) for name in unknown)  # YAML keys may be null or numbers
        raise _fail(path, "", f"unknown section(s) {', '.join(names)}")
    inputs, patterns = _inputs(path, data)
    outputs = _routes(path, data, "outputs", required=False)
    seen: dict[str, str] = {}
    for route in inputs + outputs:
        if route.topic in seen and seen[route.topic] != route.pool:
            raise _fail(
                path, "", f"topic {route.topic!r} is routed to two pools "
                f"({seen[route.topic]!r} and {route.pool!r})",
            )  # fmt: skip
        if route.topic in seen:
            raise _fail(path, "", f"topic {route.topic!r} is listed twice")
        seen[route.topic] = route.pool
    shaper = data.get("shaper")
    shaper_path = (path.parent / shaper) if isinstance(shaper, str) else None
    if shaper is not None and shaper_path is None:
        raise _fail(path, "shaper", "expected the path of a .sql file")
    transforms = (
        parse_rules(path, data["transforms"], inputs, outputs) if "transforms" in data else []
    )
    tables, table_patterns = (
        parse_tables(path, data["tables"], inputs, outputs, patterns)
        if "tables" in data
        else ([], [])
    )
    for table in tables:
        if table.from_staging and not transforms:
            raise _fail(
                path, f"tables[{table.name}] source",
                f"output topic {table.source!r} gets records from transforms: the spec has none",
            )  # fmt: skip
    freshness = _freshness(path, data["freshness"]) if "freshness" in data else None
    return Spec(
        path, inputs, outputs, transforms, shaper_path, tables, freshness, patterns,
        table_patterns,
    )  # fmt: skip


def _freshness(path: Path, item: object) -> Freshness:
    """`freshness: 10m`, or `freshness: {fail: 10m, warn: 5m}`."""
    given = {"fail": item} if isinstance(item, str | int | float) else item
    if not isinstance(given, dict) or "fail" not in given or set(given) - {"fail", "warn"}:
        raise _fail(path, "freshness", "expected a duration (10m) or {fail: 10m, warn: 5m}")
    seconds = {name: _seconds(path, f"freshness.{name}", value) for name, value in given.items()}
    warn = seconds.get("warn")
    if warn is not None and warn >= seconds["fail"]:
        raise _fail(path, "freshness.warn", "must be shorter than freshness.fail")
    return Freshness(seconds["fail"], warn)


def _seconds(path: Path, where: str, value: object) -> float:
    try:
        seconds = parse_duration(str(value))
    except ZyncError as exc:
        raise _fail(path, where, str(exc)) from exc
    if seconds <= 0:
        raise _fail(path, where, "give a duration longer than 0, e.g. 10m")
    return seconds


ROUTE_KEYS = {"topic", "pool", "format", "key-format"}
PATTERN_KEYS = {"topics", "exclude", "pool", "format", "key-format"}
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def _inputs(path: Path, data: dict) -> tuple[list[Route], list[TopicPattern]]:
    """The input routes, and the inputs named by pattern (`topics:` instead of `topic:`)."""
    items = _entries(path, data, "inputs", required=True)
    routes: list[Route] = []
    patterns: list[TopicPattern] = []
    for index, item in enumerate(items, start=1):
        where = f"inputs[{index}]"
        if isinstance(item, dict) and "topics" in item:
            patterns.append(_pattern(path, where, item))
        else:
            routes.append(_route(path, where, item, "inputs"))
    return routes, patterns


def _entries(path: Path, data: dict, section: str, required: bool) -> list:
    items = data.get(section)
    if items is None:
        if required:
            raise _fail(path, section, "missing: list {topic, pool} entries")
        return []
    if not isinstance(items, list) or not items:
        raise _fail(path, section, "expected a non-empty list of {topic, pool}")
    return items


def _pattern(path: Path, where: str, item: dict) -> TopicPattern:
    if not {"topics", "pool"} <= set(item) <= PATTERN_KEYS:
        raise _fail(path, where, "expected {topics: <regular expression>, pool: ...} and "
                    "optionally exclude, format, key-format")  # fmt: skip
    if (found := pattern_problem(item)) is not None:
        raise _fail(path, f"{where} {found[0]}", found[1])
    pool, formats = _pool_and_formats(path, where, item)
    return TopicPattern(item["topics"], pool, formats, excluded_of(item))


def _routes(path: Path, data: dict, section: str, required: bool) -> list[Route]:
    items = _entries(path, data, section, required)
    return [_route(path, f"{section}[{i}]", item, section) for i, item in enumerate(items, 1)]


def _route(path: Path, where: str, item: object, section: str) -> Route:
    if not isinstance(item, dict) or not {"topic", "pool"} <= set(item) <= ROUTE_KEYS:
        raise _fail(
            path, where, "expected {topic: ..., pool: ...} and optionally format, key-format"
        )
    topic = item["topic"]
    if not isinstance(topic, str) or not TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
        raise _fail(
            path, where,
            f"invalid topic name {topic!r}: Kafka allows 1-249 letters, digits, '.', '_', '-'",
        )  # fmt: skip
    pool, formats = _pool_and_formats(path, where, item)
    if section == "outputs" and formats.key != formats.value:
        raise _fail(path, where, "to-kafka writes keys in the value's format: drop key-format")
    return Route(topic, pool, formats)


def _pool_and_formats(path: Path, where: str, item: dict) -> tuple[str, WireFormat]:
    pool = item["pool"]
    if not isinstance(pool, str) or not POOL_NAME.match(pool):
        raise _fail(path, where, f"invalid pool name {pool!r} (letters, digits, _ and -)")
    try:
        return pool, wire_format(item.get("format"), item.get("key-format"))
    except ZyncError as e:
        raise _fail(path, where, str(e)) from e


def all_raw_pools(specs: list[Spec]) -> dict[str, list[str]]:
    """Every raw pool of the specs with its topics (a topic may feed one pool only)."""
    pools: dict[str, list[str]] = {}
    for spec in specs:
        for pool, topics in spec.raw_pools().items():
            pools.setdefault(pool, [])
            pools[pool] += [t for t in topics if t not in pools[pool]]
    return pools


def spec_folder() -> Path:
    """`$ZYNC_SPECS`, else ./etl_specs, else the checkout's etl_specs/."""
    return project_spec_folder() or CHECKOUT_ROOT / "etl_specs"


def project_spec_folder() -> Path | None:
    """The working directory's project's spec folder: `$ZYNC_SPECS`, else ./etl_specs;
    None when there is neither."""
    if os.environ.get("ZYNC_SPECS"):
        return Path(os.environ["ZYNC_SPECS"])
    local = Path("etl_specs")
    return local if local.is_dir() else None


def find_specs(folder: str | Path = "etl_specs") -> list[Path]:
    return sorted(Path(folder).glob("*.yaml")) + sorted(Path(folder).glob("*.yml"))


def load_specs(folder: str | Path) -> list[Spec]:
    """Every spec file (`*.yaml`, `*.yml`) in `folder`, read and checked."""
    if not Path(folder).is_dir():
        raise ZyncError(f"specs folder {folder} does not exist: give a folder of zync spec files")
    return [load_spec(path) for path in find_specs(folder)]
