#!/usr/bin/env bash
# Installs everything (idempotent, fast when cached) and runs the test suite against a
# private stack: real Kafka, schema registry, Spark + Delta (and, for the tests that need
# them, PostgreSQL with Kafka Connect, a Spark cluster, an S3 server).
#
#   scripts/test.sh            lint (ruff), type check (mypy), then the whole suite as CI
#                              runs it: the fast tier first, stopping on its failure, then
#                              the slow tier (`-m slow`, the tests marked `extended` last
#                              in it); one closing line counts both
#
# ZYNC_SUITE_BUDGET_MIN=N: the whole command's minutes (CI=true: 80 of CI's 90 unless set);
# a test that would end past them is skipped, saying so, instead of failing the run.
#   scripts/test.sh --fast     the fast tier alone: every test not marked slow (no fault
#                              injection, no heavy service, the cheapest by the last run)
#
# Extra arguments go to pytest (e.g. scripts/test.sh -k produce).
set -euo pipefail
cd "$(dirname "$0")/.."
started_at=$(date +%s)
budget=${ZYNC_SUITE_BUDGET_MIN:-}
[ -z "$budget" ] && [ "${CI:-}" = true ] && budget=80
[ -n "$budget" ] && export ZYNC_SUITE_DEADLINE=$(( started_at + budget * 60 ))
fast_only=no
if [ "${1:-}" = "--fast" ]; then
  shift
  fast_only=yes
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
# Each session's JUnit report (bench/suite_report.py reads them) and its wall time.
reports=.zync/suite
mkdir -p "$reports"
rm -f "$reports"/*.xml "$reports"/services.jsonl
session() {  # session NAME MARK_EXPRESSION [pytest args]: its exit status, 5 (no tests) as 0
  local name=$1 marks=$2 started status
  shift 2
  started=$(date +%s)
  set +e
  .venv/bin/pytest -m "$marks" --junitxml="$reports/$name.xml" "$@"
  status=$?
  set -e
  echo "$(( $(date +%s) - started ))" > "$reports/$name.seconds"
  [ "$status" -eq 5 ] && status=0
  return "$status"
}
tally() {
  .venv/bin/python -m zync_assets_tests.support.tally "$reports"/*.xml
  if ! grep -q '<testcase' "$reports"/*.xml 2>/dev/null; then
    echo "test: pytest ran no tests: that is a failure" >&2
    exit 1
  fi
}
status=0
session fast "not slow" "$@" || status=$?
if [ "$status" -ne 0 ] || [ "$fast_only" = yes ]; then
  [ "$fast_only" = yes ] || echo "test: the fast tier failed; the rest of the suite did not run" >&2
  tally
  exit "$status"
fi
# One session for the rest: LAST's tests go out after every other unit (scheduling.py), so
# they still run last, without a third session's start-up (its stacks, its Spark
# sessions, the CDC services again) and its two idle tails.
session slow "slow" "$@" || status=$?
echo "test: fast tier $(cat "$reports/fast.seconds") s, the slow tier $(cat "$reports/slow.seconds") s"
tally
exit "$status"
