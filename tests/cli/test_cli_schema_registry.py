"""``produce``/``consume --schema-registry``: Avro and JSON Schema records written and read as JSON text.

The tests that take ``kafka_bootstrap`` and ``schema_registry_url`` also run with ``--kafka=apache``
(the registry from ``--schema-registry-url``, else an embedded one beside the real Kafka).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from aiokafka_lite.cli.app import app
from aiokafka_lite.integrations.schema_registry import Schema, SchemaRegistryClient
from aiokafka_lite.testing.threaded import ThreadedCluster

runner = CliRunner()

AVRO = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "item", "type": "string"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
    "required": ["id", "item"],
}
ORDERS = [{"id": 1, "item": "tea", "note": None}, {"id": 2, "item": "cake", "note": "no nuts"}]


def cli(bootstrap: str, *args: str, input: str | None = None) -> Result:
    return runner.invoke(app, list(args), input=input, env={"KAFKA_BOOTSTRAP": bootstrap})


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result


def lines(records: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def consume_json(bootstrap: str, topic: str, url: str, count: int) -> list[object]:
    out = ok(cli(bootstrap, "consume", topic, "--from-beginning", "-c", str(count), "--schema-registry", url))
    return [json.loads(line) for line in out.stdout.splitlines()]


def registered(url: str, subject: str) -> tuple[int, str]:
    async def latest() -> tuple[int, str]:
        async with SchemaRegistryClient(url) as client:
            got = await client.get_latest_version(subject)
            return got.schema_id, got.schema.schema_type

    return asyncio.run(latest())


@pytest.fixture
def topic() -> str:
    return f"cli-sr-{uuid.uuid4().hex[:8]}"


def test_avro_file_registers_and_round_trips(
    kafka_bootstrap: str, schema_registry_url: str, topic: str, tmp_path: Path
) -> None:
    schema_file = tmp_path / "order.avsc"
    schema_file.write_text(json.dumps(AVRO))
    ok(
        cli(
            kafka_bootstrap,
            "produce",
            topic,
            "--schema-registry",
            schema_registry_url,
            "--value-schema",
            str(schema_file),
            input=lines(ORDERS),
        )
    )
    schema_id, schema_type = registered(schema_registry_url, f"{topic}-value")
    assert schema_type == "AVRO"
    # The values are Confluent-framed Avro: the raw bytes start with magic 0 and the id.
    raw = ok(cli(kafka_bootstrap, "consume", topic, "--from-beginning", "-c", "1", "--format", "%S %s\n"))
    assert raw.stdout_bytes.split(b" ", 1)[1][:5] == b"\x00" + schema_id.to_bytes(4, "big")
    assert consume_json(kafka_bootstrap, topic, schema_registry_url, 2) == ORDERS


def test_json_schema_file_and_use_latest(
    kafka_bootstrap: str, schema_registry_url: str, topic: str, tmp_path: Path
) -> None:
    schema_file = tmp_path / "order.json"
    schema_file.write_text(json.dumps(JSON_SCHEMA))
    first = [{"id": 1, "item": "tea"}]
    ok(
        cli(
            kafka_bootstrap,
            "produce",
            topic,
            "--schema-registry",
            schema_registry_url,
            "--value-schema",
            str(schema_file),
            input=lines(first),
        )
    )
    assert registered(schema_registry_url, f"{topic}-value")[1] == "JSON"
    # No --value-schema: the latest version of TOPIC-value.
    second = [{"id": 2, "item": "cake"}]
    ok(cli(kafka_bootstrap, "produce", topic, "--schema-registry", schema_registry_url, input=lines(second)))
    # @SUBJECT: that subject's latest version, whatever the topic.
    other = f"{topic}-copy"
    ok(
        cli(
            kafka_bootstrap,
            "produce",
            other,
            "--schema-registry",
            schema_registry_url,
            "--value-schema",
            f"@{topic}-value",
            input=lines(first),
        )
    )
    assert consume_json(kafka_bootstrap, topic, schema_registry_url, 2) == first + second
    assert consume_json(kafka_bootstrap, other, schema_registry_url, 1) == first


def test_a_line_that_does_not_fit_stops_there(
    kafka_bootstrap: str, schema_registry_url: str, topic: str, tmp_path: Path
) -> None:
    schema_file = tmp_path / "order.json"
    schema_file.write_text(json.dumps(JSON_SCHEMA))
    text = lines([{"id": 1, "item": "tea"}, {"id": "two"}, {"id": 3, "item": "jam"}])
    bad = cli(
        kafka_bootstrap,
        "produce",
        topic,
        "--schema-registry",
        schema_registry_url,
        "--value-schema",
        str(schema_file),
        input=text,
    )
    assert bad.exit_code == 1
    assert "record 2 does not fit the schema" in bad.stderr
    # The line before it was produced, the bad one and the rest were not.
    assert consume_json(kafka_bootstrap, topic, schema_registry_url, 1) == [{"id": 1, "item": "tea"}]
    rows = json.loads(ok(cli(kafka_bootstrap, "offsets", topic, "--json")).stdout)
    assert [row["latest"] for row in rows] == [1]


def test_use_latest_without_a_registered_subject_says_so(
    kafka_bootstrap: str, schema_registry_url: str, topic: str
) -> None:
    result = cli(kafka_bootstrap, "produce", topic, "--schema-registry", schema_registry_url, input="{}\n")
    assert result.exit_code == 1
    assert f"{topic}-value" in result.stderr and "not found" in result.stderr


def test_consume_of_unframed_values_says_what_is_wrong(
    kafka_bootstrap: str, schema_registry_url: str, topic: str
) -> None:
    ok(cli(kafka_bootstrap, "produce", topic, input="plain text\n"))
    result = cli(
        kafka_bootstrap,
        "consume",
        topic,
        "--from-beginning",
        "-c",
        "1",
        "--schema-registry",
        schema_registry_url,
    )
    assert result.exit_code == 1
    assert "not Confluent-framed" in result.stderr


def test_value_schema_needs_the_registry() -> None:
    result = runner.invoke(app, ["produce", "t", "--value-schema", "x.avsc"])
    assert result.exit_code == 2
    assert "--schema-registry" in result.output + result.stderr


@pytest.mark.kafka_embedded
def test_on_the_clusters_own_registry(
    kafka_threaded_cluster_factory: Callable[..., ThreadedCluster], tmp_path: Path
) -> None:
    tc = kafka_threaded_cluster_factory(schema_registry=True)
    url = tc.call(lambda c: c.schema_registry_url)
    schema_file = tmp_path / "order.avsc"
    schema_file.write_text(json.dumps(AVRO))
    ok(
        cli(
            tc.bootstrap,
            "produce",
            "orders",
            "--schema-registry",
            url,
            "--value-schema",
            str(schema_file),
            input=lines(ORDERS),
        )
    )
    assert consume_json(tc.bootstrap, "orders", url, 2) == ORDERS


def test_schema_kinds_are_guessed() -> None:
    from aiokafka_lite.cli._schemas import guess_schema_type

    assert guess_schema_type(json.dumps(AVRO), "order.json") == "AVRO"
    assert guess_schema_type('"string"', "s.avsc") == "AVRO"
    assert guess_schema_type(json.dumps(JSON_SCHEMA), "order.json") == "JSON"
    assert Schema(json.dumps(JSON_SCHEMA), "JSON").schema_type == "JSON"
