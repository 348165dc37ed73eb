#!/usr/bin/env bash
# Installs everything (idempotent, fast when cached) and runs the whole test suite
# against a private stack: real Kafka, schema registry, Spark + Delta.
# Extra arguments go to pytest (e.g. scripts/test.sh -k produce).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
set +e
.venv/bin/pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
