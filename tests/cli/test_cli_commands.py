"""``aiokafka-lite`` commands end to end (in-process) against the Kafka of the session."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from aiokafka_lite.cli.app import app
from aiokafka_lite.testing.threaded import ThreadedCluster

runner = CliRunner()


def cli(bootstrap: str, *args: str, input: bytes | str | None = None) -> Result:
    """Run a command with ``--bootstrap`` taken from the environment (as users do)."""
    return runner.invoke(app, list(args), input=input, env={"KAFKA_BOOTSTRAP": bootstrap})


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result


@pytest.fixture
def topic() -> str:
    return f"cli-{uuid.uuid4().hex[:8]}"


def test_topics_create_list_describe_delete(kafka_bootstrap: str, topic: str) -> None:
    ok(cli(kafka_bootstrap, "topics", "create", topic, "--partitions", "3", "-c", "retention.ms=60000"))
    listed = json.loads(ok(cli(kafka_bootstrap, "topics", "list", "--json")).stdout)
    assert {
        "topic": topic,
        "partitions": 3,
        "replication_factor": 1,
        "internal": False,
        "error": None,
    } in listed
    assert topic in ok(cli(kafka_bootstrap, "topics", "list")).stdout

    (desc,) = json.loads(ok(cli(kafka_bootstrap, "topics", "describe", topic, "--json")).stdout)
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    assert all(p["leader"] >= 0 and p["isr"] == p["replicas"] for p in desc["partitions"])
    assert desc["configs"]["retention.ms"] == "60000"
    assert "partitions 3" in ok(cli(kafka_bootstrap, "topics", "describe", topic)).stdout

    ok(cli(kafka_bootstrap, "topics", "delete", topic))
    assert topic not in json.dumps(json.loads(ok(cli(kafka_bootstrap, "topics", "list", "--json")).stdout))


def test_topic_errors_are_clear_with_exit_code_1(kafka_bootstrap: str, topic: str) -> None:
    ok(cli(kafka_bootstrap, "topics", "create", topic, "-p", "1"))
    again = cli(kafka_bootstrap, "topics", "create", topic, "-p", "1")
    assert again.exit_code == 1
    assert "TopicAlreadyExistsError" in again.stderr
    ok(cli(kafka_bootstrap, "topics", "create", topic, "-p", "1", "--if-not-exists"))

    missing = f"{topic}-missing"
    for args in (["topics", "describe", missing], ["topics", "delete", missing], ["offsets", missing]):
        result = cli(kafka_bootstrap, *args)
        assert result.exit_code == 1, args
        assert "UnknownTopicOrPartitionError" in result.stderr
    ok(cli(kafka_bootstrap, "topics", "delete", missing, "--if-exists"))


def test_produce_lines_then_consume_one_value_per_line(kafka_bootstrap: str, topic: str) -> None:
    ok(cli(kafka_bootstrap, "topics", "create", topic, "--partitions", "2"))
    lines = [f"value {i}" for i in range(200)]
    produced = ok(cli(kafka_bootstrap, "produce", topic, input="\n".join(lines) + "\n"))
    assert "produced 200 records" in produced.stderr
    out = ok(cli(kafka_bootstrap, "consume", topic, "--from-beginning", "--count", "200"))
    assert sorted(out.stdout.splitlines()) == sorted(lines)
    assert "consumed 200 records" in out.stderr
    # --exit stops at the end without a count
    out = ok(cli(kafka_bootstrap, "consume", topic, "--from-beginning", "-e", "-q"))
    assert len(out.stdout.splitlines()) == 200


def test_produce_keys_headers_partition_compression(kafka_bootstrap: str, topic: str) -> None:
    ok(cli(kafka_bootstrap, "topics", "create", topic, "--partitions", "4"))
    data = b"user-1\tlogin\nuser-2\tlogout\nno separator here\n\xff\tbinary \x00 value\n"
    ok(
        cli(
            kafka_bootstrap,
            "produce", topic, "-K", "\\t", "-H", "source=cli", "-H", "v=2", "-p", "2", "-z", "zstd",
            input=data,
        )
    )  # fmt: skip
    out = ok(cli(kafka_bootstrap, "consume", topic, "-o", "0", "-p", "2", "-e", "--json", "-q"))
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["partition"], r["offset"]) for r in records] == [(2, 0), (2, 1), (2, 2), (2, 3)]
    assert [r["key"] for r in records] == ["user-1", "user-2", None, {"base64": "/w=="}]
    assert [r["value"] for r in records] == ["login", "logout", "no separator here", "binary \x00 value"]
    assert all(r["headers"] == [["source", "cli"], ["v", "2"]] for r in records)

    fmt = ok(
        cli(kafka_bootstrap, "consume", topic, "-p", "2", "-o", "0", "-c", "2", "-q", "-f", "%p:%o %k=%s;")
    )
    assert fmt.stdout == "2:0 user-1=login;2:1 user-2=logout;"


def test_produce_from_a_file(kafka_bootstrap: str, topic: str, tmp_path: Path) -> None:
    path = tmp_path / "lines.txt"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(5000)))
    ok(cli(kafka_bootstrap, "produce", topic, "--file", str(path), "-z", "lz4"))
    offsets = json.loads(ok(cli(kafka_bootstrap, "offsets", topic, "--json")).stdout)
    assert sum(o["records"] for o in offsets) == 5000
    missing = cli(kafka_bootstrap, "produce", topic, "--file", str(tmp_path / "nope.txt"))
    assert missing.exit_code == 1
    assert "cannot read" in missing.stderr


def test_consume_start_positions(kafka_bootstrap: str, topic: str) -> None:
    ok(cli(kafka_bootstrap, "topics", "create", topic, "--partitions", "1"))
    ok(cli(kafka_bootstrap, "produce", topic, "-q", input="a\nb\nc\n"))
    time.sleep(0.01)
    middle = int(time.time() * 1000)
    time.sleep(0.01)
    ok(cli(kafka_bootstrap, "produce", topic, "-q", input="d\ne\n"))

    def values(*args: str) -> list[str]:
        return ok(cli(kafka_bootstrap, "consume", topic, "-e", "-q", *args)).stdout.splitlines()

    assert values("--from-beginning") == ["a", "b", "c", "d", "e"]
    assert values("--offset", "3") == ["d", "e"]
    assert values("--offset", "-2") == ["d", "e"]
    assert values("--offset", "-100") == ["a", "b", "c", "d", "e"]  # clamped to the log start
    assert values("--timestamp", str(middle)) == ["d", "e"]
    assert values("--timestamp", "2000-01-01T00:00:00Z") == ["a", "b", "c", "d", "e"]
    assert values("--from-end") == []
    assert values() == []  # the default: only new records


def test_consume_idle_timeout_stops_an_empty_consume(kafka_bootstrap: str, topic: str) -> None:
    ok(cli(kafka_bootstrap, "topics", "create", topic))
    result = ok(cli(kafka_bootstrap, "consume", topic, "--idle-timeout", "0.3"))
    assert result.stdout == ""
    assert "consumed 0 records" in result.stderr


def test_consume_in_a_group_commits_and_groups_show_lag(kafka_bootstrap: str, topic: str) -> None:
    group = f"{topic}-g"
    ok(cli(kafka_bootstrap, "topics", "create", topic, "--partitions", "2"))
    ok(
        cli(
            kafka_bootstrap,
            "produce",
            topic,
            "-q",
            "-K",
            ":",
            input="".join(f"k{i}:v{i}\n" for i in range(30)),
        )
    )
    first = ok(cli(kafka_bootstrap, "consume", topic, "-g", group, "--from-beginning", "-c", "10", "-q"))
    assert len(first.stdout.splitlines()) == 10

    listed = json.loads(ok(cli(kafka_bootstrap, "groups", "list", "--json")).stdout)
    assert any(g["group"] == group and g["state"] == "Empty" for g in listed)
    (desc,) = json.loads(ok(cli(kafka_bootstrap, "groups", "describe", group, "--json")).stdout)
    assert desc["state"] == "Empty" and desc["members"] == []
    assert sum(p["committed"] or 0 for p in desc["partitions"]) == 10
    assert desc["total_lag"] == 20
    assert all(
        p["lag"] == p["end"] - (p["committed"] or 0) for p in desc["partitions"] if p["lag"] is not None
    )
    assert "lag 20" in ok(cli(kafka_bootstrap, "groups", "describe", group)).stdout

    # The group resumes where it committed: the remaining 20, then nothing new.
    rest = ok(cli(kafka_bootstrap, "consume", topic, "-g", group, "-e", "-q"))
    assert sorted(first.stdout.splitlines() + rest.stdout.splitlines()) == sorted(f"v{i}" for i in range(30))
    (desc,) = json.loads(ok(cli(kafka_bootstrap, "groups", "describe", group, "--json")).stdout)
    assert desc["total_lag"] == 0

    unknown = cli(kafka_bootstrap, "groups", "describe", f"{group}-nobody")
    assert unknown.exit_code == 1
    assert "GroupIdNotFoundError" in unknown.stderr


def test_offsets_per_partition_and_at_a_timestamp(kafka_bootstrap: str, topic: str) -> None:
    ok(cli(kafka_bootstrap, "topics", "create", topic, "--partitions", "2"))
    ok(cli(kafka_bootstrap, "produce", topic, "-p", "1", "-q", input="x\ny\nz\n"))
    rows = json.loads(ok(cli(kafka_bootstrap, "offsets", topic, "--json", "--timestamp", "0")).stdout)
    assert rows == [
        {"topic": topic, "partition": 0, "earliest": 0, "latest": 0, "records": 0, "at_timestamp": -1},
        {"topic": topic, "partition": 1, "earliest": 0, "latest": 3, "records": 3, "at_timestamp": 0},
    ]
    table = ok(cli(kafka_bootstrap, "offsets", topic)).stdout
    assert "earliest" in table and "latest" in table


def test_client_options_reach_the_producer(kafka_bootstrap: str, topic: str) -> None:
    ok(
        cli(
            kafka_bootstrap,
            "produce",
            topic,
            "-q",
            "-X",
            "client.id=from-cli",
            "-X",
            "batch_size=100",
            input="a\n",
        )
    )
    bad = cli(kafka_bootstrap, "produce", topic, "-X", "bogus=1", input="a\n")
    assert bad.exit_code == 2
    assert "unknown option 'bogus'" in bad.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["consume", "t", "--from-beginning", "--offset", "3"],
        ["consume", "t", "--group", "g", "--partition", "0"],
        ["consume", "t", "--json", "--format", "%s"],
        ["consume", "t", "--format", "%q"],
        ["consume", "t", "--count", "0"],
        ["produce", "t", "--acks", "2"],
        ["produce", "t", "--compression", "brotli"],
        ["topics", "create", "t", "--partitions", "0"],
        ["broker", "--bootstrap", "nonsense"],
        ["no-such-command"],
    ],
)
def test_bad_usage_exits_2_with_a_message(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, (result.output, result.stderr)
    assert result.stderr.strip()


def test_unreachable_cluster_is_an_error_not_a_hang() -> None:
    result = runner.invoke(app, ["topics", "list", "--bootstrap", "127.0.0.1:1"])
    assert result.exit_code == 1
    assert "NoBrokersAvailableError" in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["broker"],
        ["topics"],
        ["topics", "list"],
        ["topics", "create"],
        ["topics", "delete"],
        ["topics", "describe"],
        ["produce"],
        ["consume"],
        ["groups"],
        ["groups", "list"],
        ["groups", "describe"],
        ["offsets"],
    ],
)
def test_every_command_has_help_with_bootstrap(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.stdout
    if command and command not in (["topics"], ["groups"]):
        assert "--bootstrap" in result.stdout


def test_produce_to_a_missing_topic_fails_fast_without_auto_creation(
    kafka_threaded_cluster_factory: Callable[..., ThreadedCluster],
) -> None:
    tc = kafka_threaded_cluster_factory(auto_create_topics=False)
    result = cli(tc.bootstrap, "produce", "missing", input="x\n")
    assert result.exit_code == 1
    assert "does not exist" in result.stderr and "topics create missing" in result.stderr
    ok(cli(tc.bootstrap, "topics", "create", "missing"))
    ok(cli(tc.bootstrap, "produce", "missing", "-q", input="x\n"))
