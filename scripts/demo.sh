#!/usr/bin/env bash
# Installs everything, then runs zync's invoice demo end to end through real software:
# starts Kafka, the schema registry, PostgreSQL (source and warehouse), Kafka Connect
# with Debezium's PostgreSQL source and JDBC sink, and `dagster dev`; makes the invoice
# story's changes with SQL and lets the stack's continuous pipeline (zync run --follow,
# reporting to Dagster) carry each one through zync (raw pool -> ETL -> staging pool ->
# output topic) into the warehouse table.
# Everything keeps running after (`zync stack down` stops it).
# Arguments go to the demo: --sensors lets Dagster's sensors run each stage instead;
# --synthetic runs the older demo on generated events.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
export PATH="$PWD/.venv/bin:$PATH"
python -m zync_assets.demo "$@"
