"""Our client against our embedded registry: the REST subset, Confluent's status and error codes."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
from pathlib import Path

import httpx
import pytest

from aiokafka_lite.integrations.schema_registry import (
    EmbeddedSchemaRegistry,
    IncompatibleSchemaError,
    InvalidCompatibilityLevelError,
    InvalidSchemaError,
    InvalidVersionError,
    RegistryUnavailableError,
    Schema,
    SchemaNotFoundError,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
)
from aiokafka_lite.integrations.schema_registry._http import HttpServer, Request, Response

USER_V1 = Schema(
    json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
)
USER_V2 = Schema(
    json.dumps(
        {
            "type": "record",
            "name": "User",
            "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}],
        }
    )
)
USER_BAD = Schema(
    json.dumps({"type": "record", "name": "User", "fields": [{"name": "email", "type": "string"}]})
)


async def test_register_is_idempotent_and_ids_are_global(client: SchemaRegistryClient) -> None:
    first = await client.register_schema_full_response("a-value", USER_V1)
    again = await client.register_schema_full_response("a-value", USER_V1)
    other_subject = await client.register_schema_full_response("b-value", USER_V1)
    assert (first.schema_id, first.version) == (again.schema_id, again.version) == (first.schema_id, 1)
    assert other_subject.schema_id == first.schema_id  # the same schema keeps its id across subjects
    v2 = await client.register_schema_full_response("a-value", USER_V2)
    assert (v2.version, v2.schema_id != first.schema_id) == (2, True)
    assert await client.get_versions("a-value") == [1, 2]
    assert await client.get_subjects() == ["a-value", "b-value"]
    assert await client.get_subjects(prefix="b") == ["b-value"]
    assert sorted(await client.get_subjects_by_id(first.schema_id)) == ["a-value", "b-value"]


async def test_lookups_by_id_version_latest(registry: EmbeddedSchemaRegistry) -> None:
    async with SchemaRegistryClient(registry.url) as writer:
        id1 = await writer.register_schema("s", USER_V1)
        id2 = await writer.register_schema("s", USER_V2)
    async with SchemaRegistryClient(registry.url) as reader:  # a fresh cache: answers come from the registry
        assert json.loads((await reader.get_schema(id1)).schema_str) == json.loads(USER_V1.schema_str)
        assert (await reader.get_version("s", 1)).schema_id == id1
        latest = await reader.get_latest_version("s")
        assert (latest.version, latest.schema_id, latest.subject) == (2, id2, "s")
        found = await reader.lookup_schema("s", USER_V1)
        assert (found.schema_id, found.version) == (id1, 1)
        served = registry.requests_served
        await reader.get_schema(id1)
        await reader.lookup_schema("s", USER_V1)
        assert registry.requests_served == served  # ids and (subject, schema) pairs are cached
        assert await reader.get_schema_types() == ["AVRO", "JSON", "PROTOBUF"]


async def test_not_found_errors_carry_confluent_codes(client: SchemaRegistryClient) -> None:
    with pytest.raises(SchemaNotFoundError) as by_id:
        await client.get_schema(999)
    assert (by_id.value.http_status, by_id.value.error_code) == (404, 40403)
    with pytest.raises(SubjectNotFoundError) as subject:
        await client.get_version("nope", 1)
    assert subject.value.error_code == 40401 and "nope" in subject.value.message
    await client.register_schema("s", USER_V1)
    with pytest.raises(VersionNotFoundError):
        await client.get_version("s", 7)
    with pytest.raises(InvalidVersionError):
        await client.get_version("s", "x")
    with pytest.raises(SchemaNotFoundError):
        await client.lookup_schema("s", USER_V2)
    with pytest.raises(InvalidSchemaError) as invalid:
        await client.register_schema("s", Schema('{"type": "record", "name": "X"}'))
    assert invalid.value.http_status == 422 and invalid.value.error_code == 42201
    with pytest.raises(InvalidSchemaError):
        await client.register_schema("j", Schema("{not json", "JSON"))
    with pytest.raises(SchemaRegistryError) as unknown_route:
        await client._request("GET", "no/such/route")
    assert unknown_route.value.http_status == 404


async def test_incompatible_schema_is_refused_with_the_reason(client: SchemaRegistryClient) -> None:
    await client.register_schema("s", USER_V1)
    with pytest.raises(IncompatibleSchemaError) as refused:
        await client.register_schema("s", USER_BAD)
    assert refused.value.error_code == 409 and "email" in refused.value.message
    ok, messages = await client.test_compatibility("s", USER_BAD)
    assert not ok and any("READER_FIELD_MISSING_DEFAULT_VALUE" in m for m in messages)
    assert await client.test_compatibility("s", USER_V2) == (True, [])
    await client.set_compatibility("NONE", "s")
    assert await client.register_schema("s", USER_BAD) > 0


async def test_config_global_and_subject(client: SchemaRegistryClient) -> None:
    assert await client.get_compatibility() == "BACKWARD"
    assert await client.set_compatibility("full_transitive") == "FULL_TRANSITIVE"
    assert await client.get_compatibility() == "FULL_TRANSITIVE"
    with pytest.raises(SchemaRegistryError) as unset:
        await client.get_compatibility("s", default_to_global=False)
    assert unset.value.error_code == 40408
    assert await client.get_compatibility("s") == "FULL_TRANSITIVE"
    await client.set_compatibility("FORWARD", "s")
    assert await client.get_compatibility("s", default_to_global=False) == "FORWARD"
    assert await client.delete_compatibility("s") == "FORWARD"
    with pytest.raises(ValueError, match="compatibility level"):
        await client.set_compatibility("SIDEWAYS")
    with pytest.raises(InvalidCompatibilityLevelError):
        await client._request("PUT", "config", body={"compatibility": "SIDEWAYS"})


async def test_soft_then_hard_delete(client: SchemaRegistryClient) -> None:
    schema_id = await client.register_schema("s", USER_V1)
    await client.register_schema("s", USER_V2)
    with pytest.raises(SubjectNotSoftDeletedError):
        await client.delete_subject("s", permanent=True)
    assert await client.delete_version("s", 2) == 2
    assert await client.get_versions("s") == [1]
    assert await client.get_versions("s", deleted=True) == [1, 2]
    assert await client.delete_subject("s") == [1]
    with pytest.raises(SubjectNotFoundError):
        await client.get_versions("s")
    with pytest.raises(SubjectSoftDeletedError):
        await client.delete_subject("s")
    assert await client.get_subjects(deleted=True) == ["s"]
    assert (await client.get_schema(schema_id)).schema_str  # ids stay readable after a delete
    assert await client.delete_subject("s", permanent=True) == [1, 2]
    assert await client.get_subjects(deleted=True) == []
    # Registering after a hard delete starts over at version 1 and reuses the id.
    again = await client.register_schema_full_response("s", USER_V1)
    assert (again.version, again.schema_id) == (1, schema_id)


async def test_references_resolve_and_protect_their_target(client: SchemaRegistryClient) -> None:
    address = Schema(
        json.dumps(
            {
                "type": "record",
                "name": "Address",
                "namespace": "ex",
                "fields": [{"name": "city", "type": "string"}],
            }
        )
    )
    await client.register_schema("ex.Address", address)
    person = Schema(
        json.dumps(
            {
                "type": "record",
                "name": "Person",
                "namespace": "ex",
                "fields": [{"name": "home", "type": "ex.Address"}],
            }
        ),
        references=(SchemaReference("ex.Address", "ex.Address", 1),),
    )
    registered = await client.register_schema_full_response("people-value", person)
    fetched = await client.get_version("people-value", registered.version)
    assert fetched.schema.references == (SchemaReference("ex.Address", "ex.Address", 1),)
    assert await client._request("GET", "subjects/ex.Address/versions/1/referencedby") == [
        registered.schema_id
    ]
    with pytest.raises(SchemaRegistryError) as referenced:
        await client.delete_subject("ex.Address")
    assert referenced.value.error_code == 42206
    dangling = Schema(person.schema_str, references=(SchemaReference("ex.Address", "ex.Address", 9),))
    with pytest.raises(InvalidSchemaError):
        await client.register_schema("other", dangling)
    without = Schema(person.schema_str)
    with pytest.raises(InvalidSchemaError, match=r"ex\.Address"):
        await client.register_schema("other", without)


async def test_contexts(client: SchemaRegistryClient) -> None:
    assert await client.get_contexts() == ["."]
    await client.register_schema(":.staging:orders-value", USER_V1)
    assert await client.get_contexts() == [".", ".staging"]


async def test_basic_auth_and_bearer() -> None:
    async with EmbeddedSchemaRegistry(basic_auth=("ann", "s3cret")) as registry:
        host = registry.url.removeprefix("http://")
        async with SchemaRegistryClient(f"http://ann:s3cret@{host}") as client:
            assert await client.register_schema("s", USER_V1) == 1
        async with SchemaRegistryClient(registry.url, basic_auth=("ann", "wrong")) as client:
            with pytest.raises(SchemaRegistryError) as denied:
                await client.get_subjects()
            assert denied.value.http_status == 401
    async with EmbeddedSchemaRegistry(bearer_token="tok-1") as registry:
        tokens = iter(["tok-1", "tok-2"])

        async def fresh_token() -> str:
            return next(tokens)

        async with SchemaRegistryClient(registry.url, bearer_token=fresh_token) as client:
            assert await client.get_subjects() == []
            with pytest.raises(SchemaRegistryError) as stale:  # a fresh token is fetched per request
                await client.get_subjects()
            assert stale.value.http_status == 401


def test_client_rejects_bad_configuration() -> None:
    with pytest.raises(ValueError, match="http"):
        SchemaRegistryClient("ftp://x")
    with pytest.raises(ValueError, match="one of"):
        SchemaRegistryClient("http://x", basic_auth=("a", "b"), bearer_token="t")


async def test_5xx_is_retried_then_answered() -> None:
    failures = 2
    seen = 0

    async def flaky(request: Request) -> Response:
        nonlocal seen
        seen += 1
        if seen <= failures:
            # Confluent's 50001: an error in the backend.
            return Response(503, {"error_code": 50001, "message": "busy"})
        return Response(200, ["s"])

    server = HttpServer(flaky)
    await server.start()
    try:
        async with SchemaRegistryClient(f"http://127.0.0.1:{server.port}", retry_backoff=0.01) as client:
            assert await client.get_subjects() == ["s"]
            assert seen == 3
        seen, failures = 0, 100
        async with SchemaRegistryClient(
            f"http://127.0.0.1:{server.port}", retry_backoff=0.01, max_retries=2
        ) as client:
            with pytest.raises(RegistryUnavailableError, match="3 times") as failed:
                await client.get_subjects()
            assert seen == 3
            assert (failed.value.http_status, failed.value.error_code) == (503, 50001)  # the registry's own
    finally:
        await server.stop()


async def test_a_silent_registry_fails_within_the_timeout() -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # accept and never answer: a partition after connect

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with SchemaRegistryClient(f"http://127.0.0.1:{port}", timeout=0.5, max_retries=10) as client:
            async with asyncio.timeout(10):  # the client's own bound is what this test is about
                with pytest.raises(RegistryUnavailableError, match="timed out"):
                    await client.get_subjects()
    finally:
        for w in accepted:
            w.close()
        server.close()
        await server.wait_closed()


async def test_server_refuses_bad_http(registry: EmbeddedSchemaRegistry) -> None:
    async with httpx.AsyncClient(base_url=registry.url) as http:
        not_json = await http.post("/subjects/s/versions", content=b"{nope")
        assert not_json.status_code == 400
        wrong_method = await http.patch("/subjects")
        assert wrong_method.status_code == 405
        no_schema = await http.post("/subjects/s/versions", json={"schemaType": "AVRO"})
        assert (no_schema.status_code, no_schema.json()["error_code"]) == (422, 42201)
        bad_type = await http.post("/subjects/s/versions", json={"schema": "{}", "schemaType": "XML"})
        assert bad_type.json()["error_code"] == 42201


async def test_raw_schema_and_usage_endpoints(
    client: SchemaRegistryClient, registry: EmbeddedSchemaRegistry
) -> None:
    schema_id = await client.register_schema("a", USER_V1)
    await client.register_schema("b", USER_V1)
    proto_id = await client.register_schema(
        "p", Schema('syntax = "proto3"; message M { string a = 1; }', "PROTOBUF")
    )
    async with httpx.AsyncClient(base_url=registry.url) as http:
        assert (await http.get(f"/schemas/ids/{schema_id}/schema")).json() == json.loads(USER_V1.schema_str)
        assert (await http.get("/subjects/a/versions/latest/schema")).json() == json.loads(USER_V1.schema_str)
        assert (await http.get(f"/schemas/ids/{proto_id}/schema")).json().startswith('syntax = "proto3"')
        assert (await http.get(f"/schemas/ids/{schema_id}/versions")).json() == [
            {"subject": "a", "version": 1},
            {"subject": "b", "version": 1},
        ]
        body = (await http.get("/subjects/a/versions/1")).json()
        assert body["id"] == schema_id and body["subject"] == "a" and "schemaType" not in body
        assert (await http.get("/mode")).json() == {"mode": "READWRITE"}


def _self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
            "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_tls_with_a_ca_file_and_a_client_certificate(tmp_path: Path) -> None:
    server_cert, server_key = _self_signed(tmp_path, "server")
    client_cert, client_key = _self_signed(tmp_path, "client")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(server_cert, server_key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(client_cert)  # the client's self-signed certificate is its own CA
    async with EmbeddedSchemaRegistry(ssl_context=context) as registry:
        assert registry.url.startswith("https://")
        async with SchemaRegistryClient(
            registry.url, verify=str(server_cert), cert=(str(client_cert), str(client_key))
        ) as client:
            assert await client.register_schema("s", USER_V1) == 1
        # An unknown server certificate fails verification; no retry turns that into success.
        async with SchemaRegistryClient(registry.url, max_retries=0) as untrusting:
            with pytest.raises(RegistryUnavailableError, match="CERTIFICATE_VERIFY_FAILED"):
                await untrusting.get_subjects()
        # Without the client certificate the server refuses the handshake.
        async with SchemaRegistryClient(registry.url, verify=str(server_cert), max_retries=0) as anonymous:
            with pytest.raises(RegistryUnavailableError):
                await anonymous.get_subjects()
