#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine, then runs lint, types and tests.
#
#   bash scripts/test.sh            lint, types, docs, then the three test passes below
#   bash scripts/test.sh ARGS...    lint, types, docs, then `pytest ARGS...` only
#
# The passes: (1) the whole suite on the embedded broker (the differential suite there
# also starts Apache Kafka); (2) every client suite against Apache Kafka, newest pinned
# 4.x (--kafka=apache); (3) a smaller client subset against Kafka 4.0.x. (2) and (3) run
# one after the other, beside (1).
# AIOKAFKA_LITE_APACHE_PASSES=0 skips passes 2 and 3 (quick local runs; CI runs them all).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
# CI requires the C accelerator: a build failure is an error there, not a warning.
if [ -n "${CI:-}" ]; then
    export AIOKAFKA_LITE_REQUIRE_EXTENSIONS=1
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[test,spark,docs]'

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else return 1; fi
}
apt_install() {
    command -v apt-get >/dev/null 2>&1 || return 1
    (as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@") >/dev/null
}

# kcat is one of the independent clients the interop tests use; openssl makes the TLS
# tests' certificates (Debian packages). The tests need them: a missing one stops here.
if ! command -v kcat >/dev/null 2>&1 || ! command -v openssl >/dev/null 2>&1; then
    apt_install kcat openssl || { echo "kcat/openssl are missing: apt-get install kcat openssl" >&2; exit 1; }
fi
# Apache Kafka runs on Java 17+ and is fetched from Maven Central with Maven; javac
# compiles the Java murmur2 cross-check.
if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
    apt_install openjdk-17-jdk-headless maven || { echo "a JDK 17+ and Maven are missing: apt-get install openjdk-17-jdk-headless maven" >&2; exit 1; }
fi
echo "== Apache Kafka jars (Maven Central, cached in ~/.m2 and ~/.cache/aiokafka_lite/kafka)"
"$VENV/bin/python" -m aiokafka_lite.testing.apache --fetch
echo "== Spark's own Kafka connector (the yardstick of the Spark tests; Maven Central, cached)"
"$VENV/bin/python" -m aiokafka_lite.integrations.spark.connector --fetch >/dev/null

echo "== ruff"
lint_dirs=()
for d in src tests tools bench examples; do [ -d "$d" ] && lint_dirs+=("$d"); done
"$VENV/bin/python" -m ruff check "${lint_dirs[@]}"
"$VENV/bin/python" -m ruff format --check "${lint_dirs[@]}"
echo "== mypy --strict src/"
"$VENV/bin/python" -m mypy
echo "== docs: mkdocs build --strict"
NO_MKDOCS_2_WARNING=1 "$VENV/bin/python" -m mkdocs build --strict --quiet

PYTEST=("$VENV/bin/python" -m pytest -q -p no:cacheprovider)
if [ "$#" -gt 0 ]; then
    echo "== pytest $*"
    "${PYTEST[@]}" "$@"
    exit
fi

# The suites that talk to a broker through the client. In the Apache passes the plugin
# keeps only their tests that use a Kafka fixture and need no embedded-only fault injection.
CLIENT_SUITES=(tests/produce tests/fetch tests/groups tests/transactions tests/admin tests/net
    tests/cli tests/examples tests/spark tests/interop tests/otel tests/workers tests/log_handler
    tests/mirror tests/test_health.py tests/test_demo.py)
CLIENT_SUBSET_40=(tests/test_demo.py tests/examples tests/produce tests/fetch tests/admin
    tests/groups/test_consumer_protocol_e2e.py)

# The Apache passes spend most of their time waiting (JVM start-up, group rebalances,
# broker restarts), so they run beside the embedded pass rather than after it; their
# output is printed when they finish. Every pass must succeed.
apache_passes() {
    local t0=$SECONDS
    echo "== pytest --kafka=apache (Apache Kafka, newest pinned 4.x): the client suites"
    "${PYTEST[@]}" --kafka=apache --kafka-version=latest --durations=15 "${CLIENT_SUITES[@]}" || return 1
    echo "(Apache Kafka latest pass: $((SECONDS - t0))s)"
    t0=$SECONDS
    echo "== pytest --kafka=apache --kafka-version=4.0: a client subset"
    "${PYTEST[@]}" --kafka=apache --kafka-version=4.0 "${CLIENT_SUBSET_40[@]}" || return 1
    echo "(Apache Kafka 4.0 pass: $((SECONDS - t0))s)"
}

SECONDS=0
apache_rc=0
apache_log=""
if [ "${AIOKAFKA_LITE_APACHE_PASSES:-1}" != 0 ]; then
    apache_log="$(mktemp -t aiokafka-lite-apache-XXXXXX.log)"
    apache_passes >"$apache_log" 2>&1 &
    apache_pid=$!
fi
echo "== pytest: everything, on the embedded broker"
embedded_rc=0
"${PYTEST[@]}" || embedded_rc=$?
echo "(embedded pass: ${SECONDS}s)"
if [ -n "$apache_log" ]; then
    wait "$apache_pid" || apache_rc=$?
    cat "$apache_log"
    rm -f "$apache_log"
    echo "(all passes: ${SECONDS}s)"
fi
if [ "$embedded_rc" != 0 ] || [ "$apache_rc" != 0 ]; then
    echo "FAILED: embedded pass exit $embedded_rc, Apache passes exit $apache_rc" >&2
    exit 1
fi
