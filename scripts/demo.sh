#!/usr/bin/env bash
# Installs everything, then runs zync's invoice demo end to end through Dagster:
# starts Kafka, the schema registry and `dagster dev` (webserver + daemon), produces the
# four Debezium batches one after another and lets the sensors carry each one
# Kafka -> raw pool -> ETL -> staging pool -> output topic. Dagster keeps running after.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
export PATH="$PWD/.venv/bin:$PATH"
python -m zync_assets.demo "$@"
