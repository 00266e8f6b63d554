"""``aiokafka-lite acls list|add|remove`` (in-process): against an embedded broker with
its authorizer on (``User:ANONYMOUS``, a plaintext client, is its super user), and
against the pass's broker, which has no authorizer (exit code 1, SECURITY_DISABLED).
The same commands against Kafka's own kafka-acls are compared in
tests/kafka4/test_acls_apache.py (through the Admin calls they share)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from aiokafka_lite.cli.app import app

runner = CliRunner()


def cli(bootstrap: str, *args: str) -> Result:
    return runner.invoke(app, list(args), env={"KAFKA_BOOTSTRAP": bootstrap})


def ok(result: Result) -> Any:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return json.loads(result.stdout) if result.stdout.lstrip().startswith("[") else result.stdout


@pytest.mark.kafka_embedded
def test_add_list_remove(kafka_threaded_cluster_factory: Callable[..., Any]) -> None:
    tc = kafka_threaded_cluster_factory(authorizer=True, super_users=["User:ANONYMOUS"])
    b = tc.bootstrap
    added = ok(
        cli(
            b, "acls", "add", "--allow-principal", "User:alice", "--operation", "Read", "--operation",
            "Describe", "--topic", "orders", "--group", "g1", "--json",
        )
    )  # fmt: skip
    assert len(added) == 4
    ok(
        cli(
            b, "acls", "add", "--deny-principal", "User:bob", "--operation", "IdempotentWrite", "--cluster",
        )
    )  # fmt: skip
    ok(
        cli(
            b, "acls", "add", "--allow-principal", "User:alice", "--operation", "write", "--transactional-id",
            "tx-", "--resource-pattern-type", "prefixed",
        )
    )  # fmt: skip
    rows = ok(cli(b, "acls", "list", "--json"))
    assert len(rows) == 6
    assert {
        "resource_type": "CLUSTER",
        "name": "kafka-cluster",
        "pattern_type": "LITERAL",
        "principal": "User:bob",
        "host": "*",
        "operation": "IDEMPOTENT_WRITE",
        "permission": "DENY",
    } in rows
    topic_rows = ok(cli(b, "acls", "list", "--topic", "orders", "--json"))
    assert {(r["operation"], r["principal"]) for r in topic_rows} == {
        ("READ", "User:alice"),
        ("DESCRIBE", "User:alice"),
    }
    # match: what applies to transactional id "tx-1" (the prefixed binding).
    match = ok(
        cli(b, "acls", "list", "--transactional-id", "tx-1", "--resource-pattern-type", "match", "--json")
    )
    assert [(r["name"], r["pattern_type"], r["operation"]) for r in match] == [("tx-", "PREFIXED", "WRITE")]
    assert "User:alice" in ok(cli(b, "acls", "list", "--group", "g1"))

    removed = ok(cli(b, "acls", "remove", "--topic", "orders", "--operation", "Read", "--json"))
    assert [(r["name"], r["operation"]) for r in removed] == [("orders", "READ")]
    removed = ok(cli(b, "acls", "remove", "--group", "g1", "--allow-principal", "User:alice", "--json"))
    assert {(r["name"], r["operation"]) for r in removed} == {("g1", "DESCRIBE"), ("g1", "READ")}
    assert len(ok(cli(b, "acls", "list", "--json"))) == 3

    bad = cli(b, "acls", "add", "--allow-principal", "alice", "--operation", "Read", "--topic", "t")
    assert bad.exit_code != 0 and "User:alice" in bad.output + bad.stderr
    bad = cli(b, "acls", "add", "--allow-principal", "User:a", "--operation", "Reed", "--topic", "t")
    assert bad.exit_code != 0 and "unknown operation" in bad.output + bad.stderr
    bad = cli(b, "acls", "add", "--allow-principal", "User:a", "--operation", "Read")
    assert bad.exit_code != 0 and "--topic" in bad.output + bad.stderr


def test_without_an_authorizer_the_commands_fail_with_security_disabled(kafka_bootstrap: str) -> None:
    for args in (
        ("acls", "list"),
        ("acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"),
        ("acls", "remove", "--topic", "t"),
    ):
        result = cli(kafka_bootstrap, *args)
        assert result.exit_code == 1, result.output
        assert "SECURITY_DISABLED" in result.output + result.stderr
