"""Kafka 4.x protocol tests that start their own Apache Kafka clusters.

Transactions V2 (and a cluster held at ``transaction.version=1``), rebootstrap onto a
replaced cluster, leader discovery after a SIGKILL, the client-metrics push to a broker-side
reporter and the KRaft quorum admin: each needs a cluster shaped for it (several nodes,
chosen features, a reporter on the classpath), so these tests build one with
``aiokafka_lite.testing.apache.ApacheCluster`` instead of taking the pass's broker. CI runs
this folder in its own Apache lane (scripts/test.sh), not in the embedded pass.
"""
