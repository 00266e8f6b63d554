"""``aiokafka-lite tokens create|describe|renew|expire`` end to end (in-process) against
an embedded broker with SASL (in a thread: the CLI runs its own event loop). Kafka's
``kafka-delegation-tokens`` is cross-checked against our tokens in
tests/kafka4/test_credentials_apache.py."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from click.testing import Result
from typer.testing import CliRunner

from aiokafka_lite.cli.app import app
from aiokafka_lite.testing.threaded import ThreadedCluster

pytestmark = pytest.mark.kafka_embedded
runner = CliRunner()
SASL = ["-X", "security_protocol=SASL_PLAINTEXT", "-X", "sasl_mechanism=SCRAM-SHA-256"]


def cli(bootstrap: str, user: str, password: str, *args: str) -> Result:
    creds = ["-X", f"sasl_plain_username={user}", "-X", f"sasl_plain_password={password}"]
    return runner.invoke(app, [*args, *SASL, *creds], env={"KAFKA_BOOTSTRAP": bootstrap})


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result


def test_tokens_create_describe_renew_expire(
    kafka_threaded_cluster_factory: Callable[..., ThreadedCluster],
) -> None:
    tc = kafka_threaded_cluster_factory(sasl_users={"alice": "alice-secret", "bob": "bob-secret"})
    alice = ("alice", "alice-secret")
    created = json.loads(
        ok(cli(tc.bootstrap, *alice, "tokens", "create", "--renewer-principal", "User:bob", "--json")).stdout
    )
    (token,) = created
    assert (token["Owner"], token["Renewers"]) == ("User:alice", ["User:bob"])
    described = json.loads(ok(cli(tc.bootstrap, *alice, "tokens", "describe", "--json")).stdout)
    assert [t["TokenId"] for t in described] == [token["TokenId"]]
    assert described[0]["Hmac"] == token["Hmac"]

    # bob renews (he is a renewer); the token logs in (-X sasl_scram_token_auth=true).
    renewed = ok(cli(tc.bootstrap, "bob", "bob-secret", "tokens", "renew", "--hmac", token["Hmac"]))
    assert "expiry timestamp:" in renewed.stdout
    as_token = runner.invoke(
        app,
        ["topics", "list", *SASL, "-X", f"sasl_plain_username={token['TokenId']}",
         "-X", f"sasl_plain_password={token['Hmac']}", "-X", "sasl_scram_token_auth=true"],
        env={"KAFKA_BOOTSTRAP": tc.bootstrap},
    )  # fmt: skip
    ok(as_token)

    ok(cli(tc.bootstrap, *alice, "tokens", "expire", "--hmac", token["Hmac"], "--expiry-time-period", "-1"))
    assert json.loads(ok(cli(tc.bootstrap, *alice, "tokens", "describe", "--json")).stdout) == []
    bad = cli(tc.bootstrap, *alice, "tokens", "renew", "--hmac", token["Hmac"])
    assert bad.exit_code == 1 and "DelegationTokenNotFound" in bad.output + bad.stderr
