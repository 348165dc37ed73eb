#!/usr/bin/env bash
# Builds zync's Spark functions with Maven, their Java unit tests included, into the
# package: zync_assets/jars/zync-spark.jar. setup.py runs it before every wheel;
# scripts/install.sh runs it for the checkout. $ZYNC_M2 names Maven's local repository
# (default: Maven's own, ~/.m2/repository).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p target
if ! mvn -q -B -Dstyle.color=never ${ZYNC_M2:+-Dmaven.repo.local="$ZYNC_M2"} package \
    > target/maven.log 2>&1; then
  tail -n 30 target/maven.log >&2
  echo "jvm/build.sh: Maven could not build zync's Spark functions (log: jvm/target/maven.log)" >&2
  exit 1
fi
cp target/zync-spark.jar ../zync_assets/jars/zync-spark.jar
