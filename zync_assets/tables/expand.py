"""A spec's lake tables now: those it names, and one per topic of each table pattern.

A table pattern (`tables: [{topics: ..., name: '{table}'}]`) makes a table for every
input topic of the spec that its raw pool has ingested and the pattern takes: the
pool's progress lists them (lake/progress.py), so finding them costs no Spark job and
no call to Kafka, and a topic that appears in Kafka gets its table with the first pass
after its first events are ingested. A topic a named table reads is that table's; a
topic two patterns take is the first one's.

A name two topics would both get is refused for the later topic (its table is not
made, and says why), so that no table ever mixes two sources' rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zync_assets.core.errors import ZyncError
from zync_assets.specs.ingested import ingested_topics
from zync_assets.specs.model import Spec
from zync_assets.specs.tables import TableDef


@dataclass(frozen=True)
class LakeTables:
    tables: list[TableDef]
    refused: dict[str, str] = field(default_factory=dict)  # topic → why it has no table
    made_by: dict[str, int] = field(default_factory=dict)  # table → its pattern's number

    def named(self, name: str) -> TableDef | None:
        return next((t for t in self.tables if t.name == name), None)

    def of_pattern(self, number: int) -> list[TableDef]:
        """The tables pattern `number` (1: the spec's first) makes."""
        return [t for t in self.tables if self.made_by.get(t.name) == number]


def lake_tables(spec: Spec) -> LakeTables:
    """The spec's tables: the named ones, then those of its patterns, topic by topic."""
    if not spec.table_patterns:
        return LakeTables(list(spec.tables))
    tables = list(spec.tables)
    sources = {t.source for t in tables}
    refused: dict[str, str] = {}
    made_by: dict[str, int] = {}
    ingested = ingested_topics(spec)
    for number, pattern in enumerate(spec.table_patterns, start=1):
        for topic, pool in ingested.items():
            if topic in sources or not pattern.topics.matches(topic):
                continue
            sources.add(topic)
            try:
                table = pattern.table_for(topic, pool)
            except ZyncError as exc:
                refused[topic] = str(exc)
                continue
            other = next((t for t in tables if t.name == table.name), None)
            if other is not None:
                refused[topic] = (
                    f"topic {topic} would make table {table.name}, which {other.source} makes: "
                    f"change the spec's name template {pattern.template.name!r} (e.g. "
                    "'{schema}_{table}'), or exclude one of them"
                )
                continue
            tables.append(table)
            made_by[table.name] = number
    return LakeTables(tables, refused, made_by)
