"""``aiokafka-lite share-groups`` end to end (in-process) against the Kafka of the session."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from click.testing import Result
from typer.testing import CliRunner

from aiokafka_lite.admin import Admin
from aiokafka_lite.cli.app import app
from aiokafka_lite.core.errors import UnsupportedVersionError
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.wire.messages import ShareGroupDescribeRequest

runner = CliRunner()


def cli(bootstrap: str, *args: str, input: str | None = None) -> Result:
    return runner.invoke(app, list(args), input=input, env={"KAFKA_BOOTSTRAP": bootstrap})


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result


async def _alter(bootstrap: str, group: str, offsets: dict[TopicPartition, int]) -> bool:
    """Creates an empty share group at these start offsets; False if the broker has no share groups."""
    async with Admin(bootstrap) as admin:
        try:
            await admin.client.negotiated_version(None, ShareGroupDescribeRequest.API_KEY)
        except UnsupportedVersionError:
            return False
        (await admin.alter_share_group_offsets(group, offsets)).raise_errors()
        return True


def test_share_groups_list_describe_delete(kafka_bootstrap: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"cli-sg-{suffix}", f"cli-sg-group-{suffix}"
    ok(cli(kafka_bootstrap, "topics", "create", topic, "--partitions", "2"))
    ok(cli(kafka_bootstrap, "produce", topic, "-p", "0", "-q", input="a\nb\nc\n"))
    if not asyncio.run(
        _alter(kafka_bootstrap, group, {TopicPartition(topic, 0): 1, TopicPartition(topic, 1): 0})
    ):
        pytest.skip("this broker has no share groups (Kafka 4.0)")

    listed = json.loads(ok(cli(kafka_bootstrap, "share-groups", "list", "--json")).stdout)
    (row,) = [r for r in listed if r["group"] == group]
    assert row["state"] == "Empty" and row["coordinator"] >= 0
    assert group not in ok(cli(kafka_bootstrap, "share-groups", "list", "--state", "Stable")).stdout

    (desc,) = json.loads(ok(cli(kafka_bootstrap, "share-groups", "describe", group, "--json")).stdout)
    assert (desc["state"], desc["members"]) == ("Empty", [])
    assert desc["partitions"] == [
        {"topic": topic, "partition": 0, "start_offset": 1, "lag": 2},
        {"topic": topic, "partition": 1, "start_offset": 0, "lag": 0},
    ]
    assert "lag 2" in ok(cli(kafka_bootstrap, "share-groups", "describe", group)).stdout

    assert f"deleted share group {group}" in ok(cli(kafka_bootstrap, "share-groups", "delete", group)).stdout
    unknown = cli(kafka_bootstrap, "share-groups", "describe", group)
    assert unknown.exit_code == 1
    assert "GroupIdNotFoundError" in unknown.stderr


@pytest.mark.parametrize(
    "command",
    [["share-groups"], ["share-groups", "list"], ["share-groups", "describe"], ["share-groups", "delete"]],
)
def test_share_groups_commands_have_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.stdout
