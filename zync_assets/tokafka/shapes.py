"""Output record shapes: from variant type strings to Avro schemas.

Staging keys and values are VARIANTs, so each record carries its own shape. An
output topic usually holds a few shapes (full rows, partial updates). Records are
grouped by their top-level field names; each group gets one Avro record schema in
which every field is optional, and its own registry subject. A JDBC sink then
upserts only the columns a record has, so a partial update leaves the others alone.

Type strings come from zync's `zync_variant_type` (jvm/src), in the syntax of
Spark's `schema_of_variant`. Variant types are per value (a 1 may sit next to a
1.50), so types are normalised to stable ones: integers → long, floating point →
double, decimals → decimal(38, widest scale seen), and they only ever widen
against the version already registered. Pure functions: no Spark, no registry.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from zync_assets.core.errors import ZyncError

AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DECIMAL_PRECISION = 38
_INTEGERS = {"TINYINT", "SMALLINT", "INT", "BIGINT"}
_FLOATS = {"FLOAT", "DOUBLE"}
# Connect's and Debezium's semantic type names (the schema property `connect.name`):
# Avro converters turn them into Connect types, which a JDBC sink maps to the right
# column types. Without them a timestamp-micros reaches the sink as a bare int64 (a
# bigint column): Confluent-style converters know no timestamp-micros.
CONNECT_NAME = "connect.name"
ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"  # ISO-8601 string → timestamptz
MICRO_TIMESTAMP = "io.debezium.time.MicroTimestamp"  # epoch µs, no zone → timestamp
CONNECT_DATE = "org.apache.kafka.connect.data.Date"  # epoch days → date
_PRIMITIVE_AVRO: dict[str, Any] = {
    "BOOLEAN": "boolean",
    "BIGINT": "long",
    "DOUBLE": "double",
    "STRING": "string",
    "BINARY": "bytes",
    "DATE": {"type": "int", "logicalType": "date", CONNECT_NAME: CONNECT_DATE},
    "TIMESTAMP": {"type": "string", CONNECT_NAME: ZONED_TIMESTAMP},
    "TIMESTAMP_NTZ": {
        "type": "long",
        "logicalType": "local-timestamp-micros",
        CONNECT_NAME: MICRO_TIMESTAMP,
    },
}
_AVRO_PRIMITIVE = {
    "boolean": "BOOLEAN",
    "long": "BIGINT",
    "double": "DOUBLE",
    "string": "STRING",
    "bytes": "BINARY",
    "date": "DATE",
    "timestamp-micros": "TIMESTAMP",  # what zync wrote before ZonedTimestamp
    "local-timestamp-micros": "TIMESTAMP_NTZ",
    ZONED_TIMESTAMP: "TIMESTAMP",
}


@dataclass(frozen=True)
class Scalar:
    name: str  # a normalised Spark type name: BIGINT, DOUBLE, STRING, VOID, ...


@dataclass(frozen=True)
class Decimal:
    scale: int


@dataclass(frozen=True)
class Array:
    element: Type


@dataclass(frozen=True)
class Object:
    fields: tuple[tuple[str, Type], ...]


Type = Scalar | Decimal | Array | Object
VOID = Scalar("VOID")


# --- parsing type strings, e.g. OBJECT<ID: BIGINT, d: DECIMAL(38,2), a: ARRAY<STRING>> ---


class _Parser:
    TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:|])")

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = self._tokenize(text)
        self.at = 0

    def _tokenize(self, text: str) -> list[str]:
        tokens, position = [], 0
        while position < len(text.rstrip()):
            match = self.TOKEN.match(text, position)
            if not match:
                raise ValueError(f"cannot read type {text!r} at {position}")
            tokens.append(match.group(1))
            position = match.end()
        return tokens

    def take(self, expected: str | None = None) -> str:
        token = self.tokens[self.at]
        if expected is not None and token != expected:
            raise ValueError(
                f"cannot read type {self.text!r}: expected {expected!r}, got {token!r}"
            )
        self.at += 1
        return token

    def peek(self) -> str:
        return self.tokens[self.at]

    def parse(self, path: str = "") -> Type:
        name = self.take().upper()
        if name == "OBJECT":
            self.take("<")
            fields = []
            while self.peek() != ">":
                field = self.take()
                if field.startswith("`"):
                    field = field[1:-1].replace("``", "`")
                self.take(":")
                fields.append((field, self.parse(f"{path}.{field}")))
                if self.peek() == ",":
                    self.take()
            self.take(">")
            return Object(tuple(fields))
        if name == "ARRAY":  # zync_variant_type lists mixed elements as ARRAY<A | B>
            self.take("<")
            element = self.parse(f"{path}[]")
            while self.peek() == "|":
                self.take()
                element = merge(element, self.parse(f"{path}[]"), f"{path}[]")
            self.take(">")
            return Array(element)
        if name == "DECIMAL":
            self.take("(")
            self.take()
            self.take(",")
            scale = int(self.take())
            self.take(")")
            return Decimal(scale)
        if name in _INTEGERS:
            return Scalar("BIGINT")
        if name in _FLOATS:
            return Scalar("DOUBLE")
        return Scalar(name)


def parse_type(text: str) -> Type:
    """A type string (`zync_variant_type`, `schema_of_variant`) as a normalised type."""
    parser = _Parser(text)
    parsed = parser.parse()
    if parser.at != len(parser.tokens):
        raise ValueError(f"cannot read type {text!r}: trailing {parser.tokens[parser.at :]}")
    return parsed


# --- merging: types only widen ---


def merge(old: Type, new: Type, path: str = "") -> Type:
    if old == new or new == VOID:
        return old
    if old == VOID:
        return new
    if isinstance(old, Object) and isinstance(new, Object):
        merged = dict(old.fields)
        for name, kind in new.fields:
            merged[name] = merge(merged[name], kind, f"{path}.{name}") if name in merged else kind
        return Object(tuple(merged.items()))
    if isinstance(old, Array) and isinstance(new, Array):
        return Array(merge(old.element, new.element, f"{path}[]"))
    numeric = _numeric_merge(old, new)
    if numeric is not None:
        return numeric
    raise ZyncError(
        f"field {path.lstrip('.') or '(whole record)'} holds {describe(old)} and {describe(new)} "
        "values; cast it to one type in the spec's sql"
    )


def _numeric_merge(a: Type, b: Type) -> Type | None:
    rank = {"BIGINT": 0, "DECIMAL": 1, "DOUBLE": 2}
    kinds = [("DECIMAL" if isinstance(t, Decimal) else getattr(t, "name", None)) for t in (a, b)]
    if not all(k in rank for k in kinds):
        return None
    if "DOUBLE" in kinds:
        return Scalar("DOUBLE")
    scales = [t.scale for t in (a, b) if isinstance(t, Decimal)]
    return Decimal(max(scales)) if scales else Scalar("BIGINT")


def describe(kind: Type) -> str:
    if isinstance(kind, Decimal):
        return f"DECIMAL(38,{kind.scale})"
    if isinstance(kind, Array):
        return f"ARRAY<{describe(kind.element)}>"
    if isinstance(kind, Object):
        return "OBJECT"
    return kind.name


# --- to Avro ---


def to_avro(kind: Type, name: str, namespace: str, path: str = "") -> Any:
    """Avro schema of `kind`; records get `name`, nested ones `<name>_<field>`."""
    if isinstance(kind, Object):
        return {
            "type": "record",
            "name": name,
            "namespace": namespace,
            "fields": [
                {
                    "name": _avro_name(field, f"{path}.{field}"),
                    "type": ["null", to_avro(t, f"{name}_{field}", namespace, f"{path}.{field}")],
                    "default": None,
                }
                for field, t in kind.fields
            ],
        }
    if isinstance(kind, Array):
        return {"type": "array", "items": ["null", to_avro(kind.element, name, namespace, path)]}
    if isinstance(kind, Decimal):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": DECIMAL_PRECISION,
            "scale": kind.scale,
        }
    if kind == VOID:  # only nulls seen so far: string is the type a sink column can hold
        return "string"
    if kind.name not in _PRIMITIVE_AVRO:
        raise ZyncError(
            f"field {path.lstrip('.') or '(whole record)'} has type {kind.name}, which has no Avro "
            "form; cast it in the spec's sql (mixed types show as VARIANT)"
        )
    return _PRIMITIVE_AVRO[kind.name]


# Connect schema of each scalar type (Kafka Connect's JSON envelope), matching the Avro
# above: a sink reading either gets the same Connect value.
_CONNECT: dict[str, dict[str, Any]] = {
    "BOOLEAN": {"type": "boolean"},
    "BIGINT": {"type": "int64"},
    "DOUBLE": {"type": "double"},
    "STRING": {"type": "string"},
    "VOID": {"type": "string"},
    "BINARY": {"type": "bytes"},
    "DATE": {"type": "int32", "name": CONNECT_DATE, "version": 1},
    "TIMESTAMP": {"type": "string", "name": ZONED_TIMESTAMP, "version": 1},
    "TIMESTAMP_NTZ": {"type": "int64", "name": MICRO_TIMESTAMP, "version": 1},
}


def to_connect(kind: Type, name: str | None = None, path: str = "") -> dict[str, Any]:
    """Kafka Connect's JSON schema of `kind`: every field optional, as in `to_avro`."""
    if isinstance(kind, Object):
        fields = [{"field": f, **to_connect(t, None, f"{path}.{f}")} for f, t in kind.fields]
        return {"type": "struct", "fields": fields, "optional": True} | (
            {"name": name} if name else {}
        )
    if isinstance(kind, Array):
        return {"type": "array", "items": to_connect(kind.element, None, path), "optional": True}
    if isinstance(kind, Decimal):
        return {
            "type": "bytes",
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": str(kind.scale)},
            "optional": True,
        }
    if kind.name not in _CONNECT:
        to_avro(kind, "V", "zync", path)  # raises the same error, naming the field
    return {**_CONNECT[kind.name], "optional": True}


def from_avro(schema: Any) -> Type:
    """The type of an Avro schema this module wrote (to widen against what is registered)."""
    if isinstance(schema, list):
        (schema,) = [s for s in schema if s != "null"]
    if isinstance(schema, str):
        return Scalar(_AVRO_PRIMITIVE[schema])
    if schema["type"] == "record":
        return Object(tuple((f["name"], from_avro(f["type"])) for f in schema["fields"]))
    if schema["type"] == "array":
        return Array(from_avro(schema["items"]))
    logical = schema.get("logicalType")
    if logical == "decimal":
        return Decimal(int(schema.get("scale", 0)))
    if schema.get(CONNECT_NAME) == ZONED_TIMESTAMP:
        return Scalar("TIMESTAMP")
    return Scalar(_AVRO_PRIMITIVE[logical or schema["type"]])


def _avro_name(field: str, path: str) -> str:
    if not AVRO_NAME.match(field):
        raise ZyncError(
            f"field {path.lstrip('.')} is not a valid Avro name (letters, digits, '_'; not "
            "starting with a digit); rename it in the spec's sql"
        )
    return field


# --- naming: one subject per shape ---


def namespace_of(topic: str) -> str:
    return "zync." + re.sub(r"[^A-Za-z0-9_]", "_", topic)


def shape_of(kind: Type) -> str | None:
    """A record's shape: its sorted top-level field names, "a,b"; None for non-records."""
    return ",".join(sorted(n for n, _ in kind.fields)) if isinstance(kind, Object) else None


def value_record_name(kind: Type) -> str:
    """`Value_<hash of the top-level field names>`: stable for a shape across runs."""
    return shape_record_name(shape_of(kind) or "")


def shape_record_name(shape: str) -> str:
    return "Value_" + hashlib.sha1(shape.encode()).hexdigest()[:8]


def value_subject(topic: str, kind: Type) -> str:
    """Record-name strategy for record shapes (`<topic>-<record full name>`),
    topic-name strategy (`<topic>-value`) for plain values."""
    if isinstance(kind, Object):
        return f"{topic}-{namespace_of(topic)}.{value_record_name(kind)}"
    return f"{topic}-value"


def key_subject(topic: str) -> str:
    return f"{topic}-key"


def subject_kind(topic: str, subject: str) -> str | None:
    """ "key", "value" (plain values) or "record" for one of `topic`'s subjects; None for
    another topic's (topic "T-x" has subjects that start with "T-" too)."""
    if subject == key_subject(topic):
        return "key"
    if subject == f"{topic}-value":
        return "value"
    if subject.startswith(f"{topic}-{namespace_of(topic)}.Value_"):
        return "record"
    return None
