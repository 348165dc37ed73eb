"""Output schemas a source declares: a mirror's records in the source's own column types.

A mirror forwards each row image as it is (`in.key AS key, in.after AS value`), so its
output records have its source topic's row schema. Types inferred from the VARIANT values
(shapes.py) would lose what a JDBC sink needs to make the source's columns: int32 vs
int64, a decimal's precision, a uuid, and a json column, which would become a nested
record no sink can write (the warehouse's sink task stops on it). So an output topic with
a declared source takes the source's schemas instead: Debezium's `after` record of each
version of `<source>-value`, its fields as the source's converter registered them
(`connect.name`, `connect.parameters`, `connect.type`), and the source's key record.
zync's Avro writer (jvm/src/zync/spark/DeclaredAvroWriters.java) writes each value ingest
stored back in its declared type, exactly, or fails naming the field.

Each version is one shape (its field names), registered like an inferred shape, under
`<topic>-<namespace>.Value_<hash>`, so a sink reads both kinds alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from zync_assets.codec.row_schema import row_record
from zync_assets.kafka.registry import Registry
from zync_assets.tokafka import shapes

# The record's own Connect name says which source table it was: the output's is zync's.
_RECORD_PROPERTIES = ("connect.name", "connect.version", "connect.doc")


@dataclass(frozen=True)
class DeclaredSchemas:
    """One output topic's schemas, registered: the key's, and one per value shape."""

    key: list[Any] | None  # [schema id, Avro JSON]; None: the source has no key schema
    values: dict[str, list[Any]]  # shape ("a,b": sorted field names) -> [schema id, Avro JSON]
    subjects: dict[str, int]

    def covering(self, shape: str) -> list[Any] | None:
        """The schema of the newest version that has every field of `shape` (a record
        that leaves out some of its fields writes them as null)."""
        fields = set(shape.split(","))
        for declared in reversed(list(self.values)):
            if fields <= set(declared.split(",")):
                return self.values[declared]
        return None


def declared_schemas(registry: Registry, topic: str, source: str) -> DeclaredSchemas | None:
    """`topic`'s schemas from `source`'s registered ones, registered for `topic`; None when
    the source has no row schema in the registry (Connect JSON, or nothing ingested)."""
    namespace = shapes.namespace_of(topic)
    rows = [row_record(schema, envelope=True) for schema in registry.versions(f"{source}-value")]
    by_shape: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row is not None:
            shape = ",".join(sorted(f["name"] for f in row["fields"]))
            by_shape.pop(shape, None)  # newest last: `covering` looks from the end
            by_shape[shape] = _renamed(row, shapes.shape_record_name(shape), namespace)
    if not by_shape:
        return None
    subjects: dict[str, int] = {}
    values: dict[str, list[Any]] = {}
    for shape, record in by_shape.items():
        subject = f"{topic}-{namespace}.{record['name']}"
        subjects[subject] = schema_id = registry.register(subject, record)
        values[shape] = [schema_id, _text(record)]
    key = None
    source_key = registry.latest_schema(f"{source}-key")
    if isinstance(source_key, dict) and source_key.get("type") == "record":
        record = _renamed(source_key, "Key", namespace)
        subjects[shapes.key_subject(topic)] = schema_id = registry.register(
            shapes.key_subject(topic), record
        )
        key = [schema_id, _text(record)]
    return DeclaredSchemas(key, values, subjects)


def _renamed(record: dict[str, Any], name: str, namespace: str) -> dict[str, Any]:
    kept = {k: v for k, v in record.items() if k not in _RECORD_PROPERTIES}
    return {**kept, "name": name, "namespace": namespace}


def _text(record: dict[str, Any]) -> str:
    return json.dumps(record)
