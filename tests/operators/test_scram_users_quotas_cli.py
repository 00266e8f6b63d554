"""``aiokafka-lite users`` and ``aiokafka-lite quotas`` end to end (in-process) against the
pass's broker (embedded, or the session's Apache Kafka with ``--kafka=apache``). Kafka
applies changes through its controller, so reads after a write retry until they show it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable

from click.testing import Result
from typer.testing import CliRunner

from aiokafka_lite.cli.app import app

runner = CliRunner()


def cli(bootstrap: str, *args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    return runner.invoke(app, list(args), input=input, env={"KAFKA_BOOTSTRAP": bootstrap, **(env or {})})


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result


def settled_cli(read: Callable[[], Result], done: Callable[[Result], bool], within_s: float = 15.0) -> Result:
    deadline = time.monotonic() + within_s
    while True:
        result = read()
        if done(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def test_users_set_list_delete(kafka_bootstrap: str) -> None:
    user = f"cli-{uuid.uuid4().hex[:8]}"
    out = ok(
        cli(kafka_bootstrap, "users", "set", user, "--iterations", "8192", "--password-stdin", input="pw\n")
    )
    assert f"{user}: SCRAM-SHA-256 ok" in out.stdout
    ok(
        cli(
            kafka_bootstrap,
            "users", "set", user, "-m", "SCRAM-SHA-512", "--password-env", "CLI_SCRAM_PW",
            env={"CLI_SCRAM_PW": "pw2"},
        )
    )  # fmt: skip

    def listed() -> Result:
        return cli(kafka_bootstrap, "users", "list", user, "--json")

    got = settled_cli(listed, lambda r: r.exit_code == 0 and len(json.loads(r.stdout)) == 2)
    rows = json.loads(ok(got).stdout)
    assert {(r["Mechanism"], r["Iterations"]) for r in rows} == {
        ("SCRAM-SHA-256", 8192),
        ("SCRAM-SHA-512", 4096),
    }

    ok(cli(kafka_bootstrap, "users", "delete", user, "-m", "SCRAM-SHA-256", "-m", "SCRAM-SHA-512"))
    gone = settled_cli(listed, lambda r: r.exit_code != 0)
    assert gone.exit_code == 1 and "ResourceNotFoundError" in gone.stdout

    # Out-of-range iterations: Kafka's error, exit code 1; no password in argv is accepted.
    bad = cli(kafka_bootstrap, "users", "set", user, "--iterations", "100", "--password-stdin", input="pw\n")
    assert bad.exit_code == 1 and "UnacceptableCredentialError" in bad.stderr
    missing = cli(kafka_bootstrap, "users", "set", user, "--password-env", "NO_SUCH_VARIABLE_HERE")
    assert missing.exit_code == 1 and "NO_SUCH_VARIABLE_HERE" in missing.output


def test_quotas_alter_describe(kafka_bootstrap: str) -> None:
    client = f"cli-{uuid.uuid4().hex[:8]}"
    ok(
        cli(
            kafka_bootstrap,
            "quotas", "alter", "--client-id", client, "--default", "user",
            "--add", "producer_byte_rate=1048576", "--add", "request_percentage=50",
        )
    )  # fmt: skip

    def described() -> Result:
        return cli(kafka_bootstrap, "quotas", "describe", "--client-id", client, "--json")

    got = settled_cli(described, lambda r: r.exit_code == 0 and len(json.loads(r.stdout)) == 2)
    rows = json.loads(ok(got).stdout)
    assert rows == [
        {"Entity": {"client-id": client, "user": None}, "Key": "producer_byte_rate", "Value": 1048576.0},
        {"Entity": {"client-id": client, "user": None}, "Key": "request_percentage", "Value": 50.0},
    ]
    # Strict: only entities of exactly the named types (none: ours also has a user part).
    assert (
        json.loads(
            ok(cli(kafka_bootstrap, "quotas", "describe", "--client-id", client, "--strict", "--json")).stdout
        )
        == []
    )

    bad = cli(kafka_bootstrap, "quotas", "alter", "--client-id", client, "--add", "no_such_quota=1")
    assert bad.exit_code == 1 and "InvalidRequestError" in bad.stderr
    ok(cli(kafka_bootstrap, "quotas", "alter", "--client-id", client, "--default", "user",
           "--delete", "producer_byte_rate", "--delete", "request_percentage"))  # fmt: skip
    assert (
        settled_cli(described, lambda r: r.exit_code == 0 and json.loads(r.stdout) == []).stdout.strip()
        == "[]"
    )
