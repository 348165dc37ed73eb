"""The soak's source: Debezium-shaped changes of one table, produced continuously.

Creates, updates and deletes (each delete followed by Debezium's tombstone) of rows with
random ids, a poison message now and then, and, half-way, a schema change (a `note`
column appears). It keeps the table as the source database would hold it, and the
coordinates of every poison message: what the pipeline's output must equal.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Producer
from fastavro import parse_schema

from zync_assets.codec.avro import encode
from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka.clients import ensure_topic, producer
from zync_assets.kafka.registry import Registry

KEY = {"type": "record", "name": "Key", "namespace": "soak.public.items",
       "fields": [{"name": "id", "type": "long"}]}  # fmt: skip
_ROW_V1: list[dict] = [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
           {"name": "qty", "type": "int"}]  # fmt: skip
_ROW_V2: list[dict] = [*_ROW_V1, {"name": "note", "type": ["null", "string"], "default": None}]


def envelope_schema(row_fields: list[dict]) -> dict:
    row = {"type": "record", "name": "Value", "fields": row_fields}
    return {
        "type": "record", "name": "Envelope", "namespace": "soak.public.items",
        "fields": [
            {"name": "before", "type": ["null", row], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "op", "type": "string"},
        ],
    }  # fmt: skip


@dataclass
class SoakSource:
    kafka: KafkaSettings
    registry: Registry
    topic: str
    partitions: int = 2
    keys: int = 400
    rate: float = 300.0  # changes per second
    poison_every: int = 1000
    seed: int = 19
    table: dict[int, dict] = field(default_factory=dict)  # id -> row, as the source holds it
    poison: set[tuple[int, int]] = field(default_factory=set)  # (partition, offset)
    produced: int = 0  # messages, tombstones and poison included
    deletes: int = 0  # each brought a tombstone too
    evolved: bool = False

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._out: Producer | None = None
        self._evolve = False
        self.failures: list[str] = []

    # --- the changes ----------------------------------------------------------------

    def _row(self, key: int) -> dict:
        row = {
            "id": key,
            "name": f"item-{self.rng.randrange(10**6)}",
            "qty": self.rng.randrange(99),
        }
        if self.evolved:
            row["note"] = self.rng.choice([None, "fragile", "gift"])
        return row

    def _changes(self) -> list[tuple[dict, dict | None]]:
        """One source change as Kafka messages (key, value): a delete brings a tombstone."""
        key = self.rng.randrange(1, self.keys + 1)
        before = self.table.get(key)
        if before is None:
            after = self._row(key)
            self.table[key] = after
            return [({"id": key}, {"before": None, "after": after, "op": "c"})]
        if self.rng.random() < 0.25:
            del self.table[key]
            self.deletes += 1
            return [
                ({"id": key}, {"before": before, "after": None, "op": "d"}),
                ({"id": key}, None),
            ]
        after = self._row(key)
        self.table[key] = after
        return [({"id": key}, {"before": before, "after": after, "op": "u"})]

    # --- producing --------------------------------------------------------------------

    def _schemas(self) -> None:
        fields = _ROW_V2 if self.evolved else _ROW_V1
        value = envelope_schema(fields)
        self.key_id = self.registry.register(f"{self.topic}-key", KEY)
        self.value_id = self.registry.register(f"{self.topic}-value", value)
        self.key_schema, self.value_schema = parse_schema(KEY), parse_schema(value)

    def _delivered(self, poison: bool):
        def report(error, message) -> None:
            if error is not None:
                self.failures.append(str(error))
            elif poison:
                self.poison.add((message.partition(), message.offset()))

        return report

    def _send(self, key: dict, value: dict | None, poison: bool = False) -> None:
        assert self._out is not None, "start() first"
        encoded_key = encode(self.key_id, self.key_schema, key)
        encoded_value: bytes | None
        if poison:
            encoded_value = b"\x09not Confluent-framed Avro at all"
        else:
            encoded_value = (
                None if value is None else encode(self.value_id, self.value_schema, value)
            )
        while True:
            try:
                self._out.produce(self.topic, key=encoded_key, value=encoded_value,
                                  on_delivery=self._delivered(poison))  # fmt: skip
                break
            except BufferError:
                self._out.poll(0.05)
        self.produced += 1

    def start(self) -> None:
        ensure_topic(self.kafka, self.topic, self.partitions)
        self._schemas()
        self._out = producer(self.kafka, **{"linger.ms": 20})
        self._thread = threading.Thread(target=self._run, name="soak-source", daemon=True)
        self._thread.start()

    def evolve(self) -> None:
        """From now on rows carry a `note` (a new, compatible value schema)."""
        self._evolve = True

    def _run(self) -> None:
        assert self._out is not None, "start() first"
        tick = 0.05
        while not self._stop.is_set():
            started = time.monotonic()
            if self._evolve and not self.evolved:
                self.evolved = True
                self._schemas()
            for _ in range(max(1, int(self.rate * tick))):
                for key, value in self._changes():
                    self._send(key, value)
                if self.produced % self.poison_every == 0:
                    self._send({"id": 0}, None, poison=True)
            self._out.poll(0)
            time.sleep(max(0.0, tick - (time.monotonic() - started)))
        self._out.flush(60)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
        if self.failures:
            raise RuntimeError(f"the soak's producer lost messages: {self.failures[:3]}")
