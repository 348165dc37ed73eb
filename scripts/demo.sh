#!/usr/bin/env bash
# Installs everything, starts the local stack (Kafka + schema registry) and runs zync's
# invoice demo end to end: Debezium events -> Kafka -> raw pool -> ETL -> staging pool.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
export PATH="$PWD/.venv/bin:$PATH"

echo "== starting the local stack (.zync/)"
zync stack up

echo "== the invoice demo: four Debezium batches through Kafka -> raw pool -> ETL -> staging"
python -m zync_assets.demo

echo
echo "The stack keeps running: 'zync stack status' shows it, 'zync stack down' stops it."
