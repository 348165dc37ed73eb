#!/usr/bin/env bash
# Installs everything, starts the local stack (Kafka + schema registry) and runs the
# Quick Start: Debezium-shaped change events produced as Avro, consumed back as JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
export PATH="$PWD/.venv/bin:$PATH"

echo "== starting the local stack (.zync/)"
zync stack up

topic=QuickStart
echo "== producing three change events to $topic"
zync produce --topic "$topic" <<'JSON'
{"key": {"ID": 100}, "value": {"op": "c", "before": null, "after": {"ID": 100, "customer": "Alice", "item": "taco"}, "ts_ms": 1700000000000}}
{"key": {"ID": 100}, "value": {"op": "u", "before": {"ID": 100, "customer": "Alice", "item": "taco"}, "after": {"ID": 100, "customer": "Alice", "item": "burrito"}, "ts_ms": 1700000001000}}
{"key": {"ID": 100}, "value": null}
JSON

echo "== offsets"
zync info --topic "$topic"
echo "== consuming $topic from the beginning (stops after 3s without messages)"
zync consume --topic "$topic" --from-beginning --exit-after 3s --metadata

echo
echo "The stack keeps running: 'zync stack status' shows it, 'zync stack down' stops it."
