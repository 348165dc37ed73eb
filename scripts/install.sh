#!/usr/bin/env bash
# Installs everything zync-assets needs, idempotently, into the project:
#   .venv/              Python environment with the package (editable), its stack and dev
#                       extras, at the versions in scripts/constraints.txt
#   .zync/m2/           Maven's download cache (so re-runs fetch nothing)
#   .zync/jars/kafka/   Apache Kafka broker jars (run with java -cp)
#   .zync/jars/registry/ Apicurio Registry (Quarkus fast-jar)
#   .zync/jars/spark/   Delta Lake, Spark Kafka source and Avro jars, minus what PySpark ships
#   .zync/jars/s3/      hadoop-aws and the AWS SDK modules, for a lake on S3 (ZYNC_LAKE=s3a://)
#   .zync/jars/catalog/ Derby's network client and server: the catalog's metastore
#                       (ZYNC_METASTORE, `zync stack up --catalog`)
#                       (all three fetched by `zync jars`, as a library user fetches them)
#   .zync/jars/s3proxy/ S3Proxy, the local S3 API server (`zync stack up --s3`, the tests)
#   zync_assets/jars/zync-spark.jar  zync's own Spark functions (jvm/, built by Maven with its
#                       Java tests: jvm/build.sh, as a wheel build does)
#   .zync/jars/class-data/ the local Spark driver's class-data archive (Java AppCDS)
#   .zync/jars/connect/ a Kafka Connect worker; .zync/jars/connect-plugins/ holds Debezium's
#                       PostgreSQL source and JDBC sink and an Avro converter (the CDC stack),
#                       and zync's own sink connector and converter around them (jvm/connect/)
#   PostgreSQL          Debian's postgresql-15 (server binaries only: the stack runs its own
#                       private clusters under .zync/, the package makes none)
#   /usr/bin/chromium   Debian's Chromium, for the browser test of the Dagster UI (.debs
#                       cached in .zync/apt/); Playwright drives it, it downloads no browser
# Each step is skipped when its stamp matches the inputs it was built from.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ZYNC_DIR=$ROOT/.zync
M2=$ZYNC_DIR/m2
JARS=$ZYNC_DIR/jars
mkdir -p "$ZYNC_DIR" "$JARS"
export PIP_CACHE_DIR=$ZYNC_DIR/pip-cache
export ZYNC_M2=$M2  # Maven's local repository for jvm/build.sh (the editable install runs it)

say() { printf '[install] %s\n' "$*"; }
die() { printf 'install: %s\n' "$*" >&2; exit 1; }
stamp_of() { cat "$@" | sha256sum | cut -c1-16; }
fresh() { [ -f "$1/.stamp" ] && [ "$(cat "$1/.stamp")" = "$2" ]; }

command -v java >/dev/null || die "Java is missing: install a JDK 17+ (Debian: apt-get install openjdk-17-jdk-headless)"
command -v mvn >/dev/null || die "Maven is missing: install it (Debian: apt-get install maven)"
command -v python3 >/dev/null || die "python3 is missing: install Python 3.11"

# 1. Python environment ------------------------------------------------------
py_stamp=$(stamp_of pyproject.toml scripts/constraints.txt)
if [ ! -x .venv/bin/python ] || ! fresh .venv "$py_stamp"; then
  say "creating .venv and installing the package (pip)"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -c scripts/constraints.txt -e '.[dev]'
  echo "$py_stamp" > .venv/.stamp
else
  say ".venv is up to date"
fi

# 1b. zync's Spark functions (Avro <-> VARIANT for ingest and to-kafka), into the package ---------
say "zync's Spark functions (jvm/build.sh: Maven, with the Java tests; skipped when up to date)"
.venv/bin/python jvm/build_backend.py || die "jvm/build.sh failed (see above); re-run scripts/install.sh"

# 2. Jars from Maven Central ----------------------------------------------------
fetch_deps() {  # fetch_deps NAME POM
  local dir=$JARS/$1 pom=$2 st
  st=$(stamp_of "$pom")
  if fresh "$dir" "$st"; then say "$1 jars are up to date"; return; fi
  say "fetching $1 jars with Maven"
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  if ! mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$M2" -f "$pom" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dir.tmp" \
      > "$ZYNC_DIR/maven-$1.log" 2>&1; then
    tail -n 20 "$ZYNC_DIR/maven-$1.log" >&2
    die "Maven could not fetch the $1 jars (log: .zync/maven-$1.log); re-run scripts/install.sh"
  fi
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  echo "$st" > "$dir/.stamp"
}

fetch_deps kafka scripts/maven/kafka.pom.xml

# Delta Lake, Spark's Kafka source and Avro; hadoop-aws and the AWS SDK for a lake on S3.
say "Spark's jars (zync jars)"
.venv/bin/zync jars --s3 --catalog --into "$JARS" --maven-repo "$M2" > /dev/null \
  || die "zync jars could not fetch Spark's jars (see above); re-run scripts/install.sh"
# The local S3 API server (S3Proxy).
fetch_deps s3proxy scripts/maven/s3proxy.pom.xml

reg_stamp=$(stamp_of scripts/maven/registry.pom.xml)
if ! fresh "$JARS/registry" "$reg_stamp"; then
  fetch_deps registry-dist scripts/maven/registry.pom.xml
  say "unpacking the schema registry"
  rm -rf "$JARS/registry" && mkdir -p "$JARS/registry"
  tar xzf "$JARS"/registry-dist/apicurio-registry-app-*-all.tar.gz -C "$JARS/registry"
  rm -rf "$JARS/registry-dist"
  echo "$reg_stamp" > "$JARS/registry/.stamp"
else
  say "registry jars are up to date"
fi

# 3. The Spark driver's class-data archive (about 40% off a local driver's start-up) -------------
# Named by a digest of the Java and the jars: a fresh one is built whenever either changes.
say "the Spark driver's class-data archive (built once for this Java and these jars)"
# Only start-up time hangs on it: without one, Spark starts as it did before.
.venv/bin/python -m zync_assets.spark.archive_build > "$ZYNC_DIR/class-data.log" 2>&1 \
  || say "no class-data archive (log: .zync/class-data.log): Spark starts without it, more slowly"

# 4. The CDC stack: Kafka Connect, Debezium's connectors, an Avro converter, PostgreSQL --------
fetch_deps connect scripts/maven/connect.pom.xml

plugins=$JARS/connect-plugins
plug_stamp=$(stamp_of scripts/maven/debezium.pom.xml scripts/maven/avro-converter.pom.xml)
if ! fresh "$plugins" "$plug_stamp"; then
  fetch_deps debezium-dist scripts/maven/debezium.pom.xml
  fetch_deps avro-converter scripts/maven/avro-converter.pom.xml
  say "unpacking Debezium's connectors into the Connect plugin path"
  rm -rf "$plugins.tmp" && mkdir -p "$plugins.tmp"
  for archive in "$JARS"/debezium-dist/*.tar.gz; do
    tar xzf "$archive" -C "$plugins.tmp"  # each holds one folder named after the connector
  done
  mv "$JARS/avro-converter" "$plugins.tmp/avro-converter"
  # The worker finds plugins by their ServiceLoader manifests (plugin.discovery=service_load,
  # 6 s faster to start than a scan); Apicurio's converter jars have none, so add one.
  rm -rf "$ZYNC_DIR/converter-manifest" && mkdir -p "$ZYNC_DIR/converter-manifest/META-INF/services"
  echo io.apicurio.registry.utils.converter.AvroConverter \
    > "$ZYNC_DIR/converter-manifest/META-INF/services/org.apache.kafka.connect.storage.Converter"
  jar cf "$plugins.tmp/avro-converter/zync-converter-manifest.jar" -C "$ZYNC_DIR/converter-manifest" .
  rm -rf "$plugins" "$JARS/debezium-dist" && mv "$plugins.tmp" "$plugins"
  echo "$plug_stamp" > "$plugins/.stamp"
else
  say "Debezium connectors are up to date"
fi
# zync's own Connect plugins (jvm/connect: the sink that costs one record for a record the
# warehouse refuses, the Avro converter whose registry requests time out), built against the
# worker's, Debezium's and Apicurio's jars into their plugin folders.
zync_plugins_stamp=$(stamp_of jvm/connect/build.sh jvm/connect/src/zync/connect/*/*.java jvm/connect/resources/*/META-INF/services/*)
if [ "$(cat "$plugins/.zync-stamp" 2>/dev/null)" != "$zync_plugins_stamp" ]; then
  say "building zync's Connect plugins (jvm/connect)"
  jvm/connect/build.sh "$JARS/connect" "$plugins" > "$ZYNC_DIR/connect-plugins.log" 2>&1 \
    || { tail -n 20 "$ZYNC_DIR/connect-plugins.log" >&2; die "javac could not build jvm/connect (log: .zync/connect-plugins.log)"; }
  echo "$zync_plugins_stamp" > "$plugins/.zync-stamp"
fi

sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
apt_install() {  # apt_install WHY PACKAGE...: Debian packages, .debs cached in .zync/apt/
  local why=$1; shift
  command -v apt-get >/dev/null || die "$* missing and this is not Debian: install $* ($why)"
  say "installing Debian's $* ($why)"
  mkdir -p "$ZYNC_DIR/apt/partial"
  local apt_cache=(-o "Dir::Cache::archives=$ZYNC_DIR/apt")
  if ! { $sudo apt-get "${apt_cache[@]}" install -y -q --no-install-recommends "$@" \
         || { $sudo apt-get update -q && $sudo apt-get "${apt_cache[@]}" install -y -q --no-install-recommends "$@"; }; \
       } > "$ZYNC_DIR/apt.log" 2>&1; then
    tail -n 20 "$ZYNC_DIR/apt.log" >&2
    die "apt-get could not install $* (log: .zync/apt.log); re-run scripts/install.sh"
  fi
}

if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  # The package must not create and start a cluster of its own on port 5432.
  $sudo mkdir -p /etc/postgresql-common
  echo "create_main_cluster = false" | $sudo tee /etc/postgresql-common/createcluster.conf >/dev/null
  apt_install "the CDC stack's source and warehouse databases" postgresql-15 postgresql-client-15
else
  say "PostgreSQL is present"
fi

# 5. Chromium for the UI test (Debian package; Playwright uses it, downloads none) --------
if [ -z "${ZYNC_SKIP_CHROMIUM:-}" ] && ! command -v chromium >/dev/null; then
  apt_install "the browser test of the Dagster UI; ZYNC_SKIP_CHROMIUM=1 skips it" chromium
else
  say "chromium is present"
fi

say "done: activate with 'source .venv/bin/activate' or call .venv/bin/zync"
