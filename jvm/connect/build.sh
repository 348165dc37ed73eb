#!/usr/bin/env bash
# Builds zync's two Kafka Connect plugin jars, each into the plugin folder of the classes it
# extends (a Connect plugin sees only its own folder's jars):
#   zync-isolating-sink.jar  (zync.connect.sink) into Debezium's JDBC sink's folder:
#     IsolatingJdbcSinkConnector, whose task sends a record the warehouse refuses to the
#     dead-letter topic and keeps the rest flowing;
#   zync-timed-converter.jar (zync.connect.registry) into the Avro converter's folder:
#     TimedAvroConverter, Apicurio's converter whose registry requests time out.
#   jvm/connect/build.sh CONNECT_JARS PLUGINS_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
connect=$1 plugins=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
build() {  # build PACKAGE PLUGIN JAR
  local classes=$out/$1
  javac -nowarn -d "$classes" --release 17 -cp "$connect/*:$plugins/$2/*" "$here/src/zync/connect/$1"/*.java
  cp -r "$here/resources/$1/." "$classes/"
  jar cf "$plugins/$2/$3" -C "$classes" .
}
build sink debezium-connector-jdbc zync-isolating-sink.jar
build registry avro-converter zync-timed-converter.jar
