#!/usr/bin/env bash
# Installs everything (idempotent, fast when cached) and runs the test suite against a
# private stack: real Kafka, schema registry, Spark + Delta (and, for the tests that need
# them, PostgreSQL with Kafka Connect, a Spark cluster, an S3 server).
#
#   scripts/test.sh            lint (ruff), type check (mypy), the whole suite: as CI runs it
#   scripts/test.sh --fast     the fast tier: every test not marked slow (no fault
#                              injection, no heavy service, none that took over 15 s)
#
# Extra arguments go to pytest (e.g. scripts/test.sh -k produce).
set -euo pipefail
cd "$(dirname "$0")/.."
selection=()
if [ "${1:-}" = "--fast" ]; then
  shift
  selection=(-m "not slow")
fi
scripts/install.sh
# Cheap checks first: a lint or type error fails the run before the suite starts.
.venv/bin/ruff check --quiet . || { echo "test: ruff found the problems above" >&2; exit 1; }
.venv/bin/ruff format --check --quiet . || { echo "test: run .venv/bin/ruff format" >&2; exit 1; }
.venv/bin/mypy --no-error-summary || { echo "test: mypy found the type errors above" >&2; exit 1; }
# The package's layers (setup.cfg's [importlinter]): its report only when a contract breaks.
lint_log=$(mktemp)
.venv/bin/lint-imports --no-cache > "$lint_log" 2>&1 \
  || { grep -v '^[[:space:]]*[╔╚║└╣╠]' "$lint_log" >&2; rm -f "$lint_log"; echo "test: an import crosses the package's layers (above)" >&2; exit 1; }
rm -f "$lint_log"
set +e
.venv/bin/pytest "${selection[@]}" "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
