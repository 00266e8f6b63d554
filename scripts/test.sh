#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine, then runs lint, types and tests.
#
#   bash scripts/test.sh            lint, types, docs, then the three test passes below
#   bash scripts/test.sh ARGS...    lint, types, docs, then `pytest ARGS...` only
#
# The passes, in four lanes side by side: (1) the whole suite on the embedded broker (the
# Spark yardstick and mirror tests there also start Apache Kafka), minus tests/net and
# tests/groups, which mostly wait; (2) those two, then half of the client suites against
# Apache Kafka, newest pinned 4.x (--kafka=apache); (3) the other half of the client suites
# against the newest 4.x; (4) a smaller client subset against Kafka 4.0.x, then the
# share-group suites (and the Schema Registry's Kafka end-to-end tests) and tests/operators
# against the newest 4.x, then tests/kafka4 (Kafka 4.x protocol tests on clusters of their
# own) and tests/differential.
# AIOKAFKA_LITE_APACHE_PASSES=0 skips passes 2 and 3 (quick local runs; CI runs them all).
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests start many Python processes (brokers, CLI runs, workers, Spark's Python
# workers); each would compile the package from source again where the environment
# forbids writing bytecode (it does on the CI machine): let the first one cache it.
unset PYTHONDONTWRITEBYTECODE

VENV="${VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
# CI requires the C accelerator: a build failure is an error there, not a warning.
if [ -n "${CI:-}" ]; then
    export AIOKAFKA_LITE_REQUIRE_EXTENSIONS=1
fi
# Kerberos (Debian packages), before pip: the gssapi package of the test extra builds
# against MIT Kerberos' headers (libkrb5-dev); the GSSAPI tests run a real KDC
# (krb5-kdc, kadmin.local, kinit) and kcat through Cyrus SASL's GSSAPI plugin.
if ! command -v krb5-config >/dev/null 2>&1 || [ ! -x /usr/sbin/krb5kdc ] || ! command -v kinit >/dev/null 2>&1 \
    || [ ! -e /usr/lib/x86_64-linux-gnu/sasl2/libgssapiv2.so ] && command -v apt-get >/dev/null 2>&1; then
    krb5_sudo=""; [ "$(id -u)" = 0 ] || krb5_sudo=sudo
    ($krb5_sudo apt-get update -qq && $krb5_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        krb5-kdc krb5-admin-server krb5-user libkrb5-dev libsasl2-modules-gssapi-mit) >/dev/null \
        || { echo "Kerberos packages are missing: apt-get install krb5-kdc krb5-admin-server krb5-user libkrb5-dev libsasl2-modules-gssapi-mit" >&2; exit 1; }
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
# Against the newest Apache Kafka they run in two halves, each in a lane of its own with its
# own broker (together they took 39 minutes in one lane on CI): the ones that mostly wait
# (failures, rebalances, Spark's JVMs) and the rest, after the embedded waiting suites.
CLIENT_SUITES_WAITING=(tests/net tests/groups tests/spark)
CLIENT_SUITES_REST=(tests/produce tests/fetch tests/transactions tests/admin tests/cli tests/examples
    tests/interop tests/otel tests/workers tests/log_handler tests/mirror tests/test_health.py
    tests/test_demo.py)
CLIENT_SUBSET_40=(tests/test_demo.py tests/examples tests/produce tests/fetch tests/admin
    tests/groups/test_consumer_protocol_e2e.py)
# Share groups on Apache Kafka (4.4 is formatted with share.version=1; 4.0 has none). These
# modules take the pass's broker (kafka_cluster/kafka_bootstrap), so their Apache half runs
# here rather than inside the embedded pass; joining a share group takes 5-16 s on Kafka 4.4.
SHARE_SUITES=(tests/share/test_share_contract.py tests/share/test_share_consumer.py
    tests/share/test_share_in_flight_limit.py tests/share/test_share_read_committed.py
    tests/share/test_share_referee.py tests/share/test_share_renew.py tests/schema_registry)
# Kafka 4.x protocol tests that start clusters of their own (several nodes, chosen feature
# levels, a broker-side metrics reporter): their own lane's tail, out of the embedded pass.
# The differential suite (the same requests to Apache Kafka 4.4 and the embedded broker) goes
# with them: it starts its own Apache broker too.
KAFKA4_SUITES=(tests/kafka4 tests/differential)
# The operators' admin calls and CLI commands (ACLs, SCRAM users, quotas, transactions,
# reassignments, log dirs, features) on the lane's broker: this lane has the slack the
# client-suite lane (tests/admin, tests/cli) no longer has.
OPERATOR_SUITES=(tests/operators)

# The Apache passes spend most of their time waiting (JVM start-up, group rebalances,
# share-group joins, broker restarts), so they run beside the embedded pass rather than
# after it, each with its own broker; their output is printed when they finish. The two
# lanes are balanced against the embedded pass (the long pole). Every pass must succeed.
apache_latest_pass() {
    local t0=$SECONDS
    echo "== pytest --kafka=apache (Apache Kafka, newest pinned 4.x): ${CLIENT_SUITES_WAITING[*]}"
    "${PYTEST[@]}" --kafka=apache --kafka-version=latest --durations=15 "${CLIENT_SUITES_WAITING[@]}" || return 1
    echo "(Apache Kafka latest, ${CLIENT_SUITES_WAITING[*]}: $((SECONDS - t0))s)"
}
apache_latest_rest_pass() {
    local t0=$SECONDS
    echo "== pytest --kafka=apache (Apache Kafka, newest pinned 4.x): the other client suites"
    "${PYTEST[@]}" --kafka=apache --kafka-version=latest --durations=15 "${CLIENT_SUITES_REST[@]}" || return 1
    echo "(Apache Kafka latest, the other client suites: $((SECONDS - t0))s)"
}
apache_40_and_share_passes() {
    local t0=$SECONDS
    echo "== pytest --kafka=apache --kafka-version=4.0: a client subset"
    "${PYTEST[@]}" --kafka=apache --kafka-version=4.0 "${CLIENT_SUBSET_40[@]}" || return 1
    echo "(Apache Kafka 4.0 pass: $((SECONDS - t0))s)"
    t0=$SECONDS
    echo "== pytest --kafka=apache (Apache Kafka, newest pinned 4.x): share groups, Schema Registry"
    "${PYTEST[@]}" --kafka=apache --kafka-version=latest --durations=10 "${SHARE_SUITES[@]}" || return 1
    echo "(Apache Kafka latest, share groups: $((SECONDS - t0))s)"
    t0=$SECONDS
    echo "== pytest --kafka=apache (Apache Kafka, newest pinned 4.x): the operators' admin calls and CLI"
    "${PYTEST[@]}" --kafka=apache --kafka-version=latest --durations=10 "${OPERATOR_SUITES[@]}" || return 1
    echo "(Apache Kafka latest, operators: $((SECONDS - t0))s)"
    t0=$SECONDS
    echo "== pytest: Kafka 4.x protocol tests on clusters of their own, the differential suite"
    "${PYTEST[@]}" --durations=10 "${KAFKA4_SUITES[@]}" || return 1
    echo "(Kafka 4.x protocol tests: $((SECONDS - t0))s)"
}

# The embedded suites that mostly wait (network partitions held until a deadline,
# coordinators lost, rebalances): a lane of their own beside the rest of the embedded
# pass, since waiting takes no CPU.
EMBEDDED_WAITING_SUITES=(tests/net tests/groups)
embedded_waiting_pass() {
    local t0=$SECONDS
    echo "== pytest: ${EMBEDDED_WAITING_SUITES[*]}, on the embedded broker"
    "${PYTEST[@]}" --durations=15 "${EMBEDDED_WAITING_SUITES[@]}" || return 1
    echo "(embedded pass, waiting suites: $((SECONDS - t0))s)"
}
# The waiting suites leave their lane free after ~10 minutes: the other half of the Apache
# client suites follows them there.
embedded_waiting_then_apache_rest() {
    local rc=0
    embedded_waiting_pass || rc=1
    if [ "${AIOKAFKA_LITE_APACHE_PASSES:-1}" != 0 ]; then
        apache_latest_rest_pass || rc=1
    fi
    return $rc
}

SECONDS=0
lanes=()
passes=(embedded_waiting_then_apache_rest)
if [ "${AIOKAFKA_LITE_APACHE_PASSES:-1}" != 0 ]; then
    passes+=(apache_latest_pass apache_40_and_share_passes)
fi
for lane in "${passes[@]}"; do
    log="$(mktemp -t aiokafka-lite-lane-XXXXXX.log)"
    "$lane" >"$log" 2>&1 &
    lanes+=("$!:$log")
done
echo "== pytest: everything else, on the embedded broker"
embedded_rc=0
embedded_args=()
for suite in "${EMBEDDED_WAITING_SUITES[@]}"; do embedded_args+=("--ignore=$suite"); done
# With the Apache lanes on, tests/kafka4 and tests/differential run in one of them (they
# start Apache Kafka anyway).
[ "${#lanes[@]}" -gt 1 ] && embedded_args+=(--ignore=tests/kafka4 --ignore=tests/differential)
# With the Apache lanes on, the comparisons of our Spark source with Spark's built-in Kafka
# connector (each reads or writes the same broker with both, in local mode and on a
# standalone cluster) run against Apache Kafka only, in the tests/spark lane: run against
# the embedded broker too they cost the longest lane ~6 minutes of Spark JVM work.
[ "${#lanes[@]}" -gt 1 ] && embedded_args+=(--ignore=tests/spark/test_spark_builtin_compare.py
    --deselect=tests/spark/test_spark_cluster.py::test_cluster_batch_read_same_as_builtin
    --deselect=tests/spark/test_spark_cluster.py::test_cluster_batch_write_same_as_builtin
    --deselect=tests/spark/test_spark_cluster.py::test_cluster_streaming_restart_same_as_builtin)
"${PYTEST[@]}" --durations=30 "${embedded_args[@]}" || embedded_rc=$?
echo "(embedded pass: ${SECONDS}s)"
apache_rc=0
for entry in "${lanes[@]}"; do
    wait "${entry%%:*}" || apache_rc=$?
    cat "${entry#*:}"
    rm -f "${entry#*:}"
done
echo "(all passes: ${SECONDS}s)"
if [ "$embedded_rc" != 0 ] || [ "$apache_rc" != 0 ]; then
    echo "FAILED: embedded pass exit $embedded_rc, other lanes exit $apache_rc" >&2
    exit 1
fi
