"""An in-process Schema Registry serving Confluent's REST API subset, for development and tests.

``async with EmbeddedSchemaRegistry() as registry:`` serves on ``registry.url`` (127.0.0.1, a free
port) in the running asyncio loop. ``EmbeddedSchemaRegistry.in_thread()`` runs it on its own loop in a
daemon thread, for blocking clients such as confluent-kafka's and for trio programs (the server is
asyncio's; clients of any kind talk HTTP to it). State lives in memory only.

Served: ``/schemas/types``, ``/schemas/ids/{id}`` (+ ``/schema``, ``/subjects``, ``/versions``),
``/schemas/guids/{guid}``,
``/subjects`` (list, lookup, register, versions, ``latest``, ``referencedby``, soft and hard delete),
``/compatibility/subjects/{s}/versions[/{v}]``, ``/config`` and ``/config/{s}`` (GET, PUT, DELETE),
``/contexts``, ``/mode``. Status codes and error bodies are Confluent's. ``format=serialized`` turns
a Protobuf schema into a base64 ``FileDescriptorProto``. Compatibility rules: :mod:`.compat_avro`,
:mod:`.compat_json`, :mod:`.compat_protobuf`. Not served: metadata and rule sets (data contracts),
modes other than READWRITE, schema normalization (``normalize`` is accepted and ignored), and
contexts beyond listing the ``:.name:`` subject prefixes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import ssl
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite.integrations.schema_registry import compat_avro, compat_json, compat_protobuf
from aiokafka_lite.integrations.schema_registry._http import HttpServer, Request, Response
from aiokafka_lite.integrations.schema_registry.client import COMPATIBILITY_LEVELS

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


class _RegistryError(Exception):
    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.response = Response(status, {"error_code": error_code, "message": message})


def _subject_not_found(subject: str) -> _RegistryError:
    return _RegistryError(404, 40401, f"Subject '{subject}' not found.")


@dataclass
class _StoredSchema:
    schema_id: int
    schema_type: str
    schema_str: str
    references: list[dict[str, Any]]
    guid: str = field(default_factory=lambda: str(uuid.uuid4()))

    def body(self, fmt: str | None = None, subject: str | None = None) -> dict[str, Any]:
        text = self.schema_str
        if fmt == "serialized" and self.schema_type == "PROTOBUF":
            # A text schema gets a file name: its subject, which for an imported file is (by
            # Confluent's default reference naming) the import path itself.
            name = subject if subject and subject.endswith(".proto") else f"{subject or self.schema_id}.proto"
            text = base64.b64encode(_proto_descriptor(self.schema_str, name).SerializeToString()).decode()
        out: dict[str, Any] = {"schema": text}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = self.references
        return out


@dataclass
class _Version:
    version: int
    schema: _StoredSchema
    deleted: bool = False


def _proto_descriptor(text: str, name: str = "schema.proto") -> Any:
    """A Protobuf schema's FileDescriptorProto: from base64 (what confluent-kafka's Python serializer
    registers) or from .proto text (what the Java serializers register); ValueError if neither."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    from aiokafka_lite.integrations.schema_registry.proto_text import parse_proto

    if _BASE64.fullmatch(text.strip()):
        try:
            descriptor = descriptor_pb2.FileDescriptorProto()
            descriptor.ParseFromString(base64.b64decode(text.strip(), validate=True))
            return descriptor
        except (binascii.Error, DecodeError) as exc:
            raise ValueError(f"not a base64 FileDescriptorProto: {exc}") from exc
    return parse_proto(text, name)


_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


class _Store:
    """The registry's state and rules, independent of HTTP."""

    def __init__(self, compatibility: str) -> None:
        self.global_level = compatibility
        self.subject_levels: dict[str, str] = {}
        self.subjects: dict[str, list[_Version]] = {}
        self.by_id: dict[int, _StoredSchema] = {}
        self.by_key: dict[tuple[str, str, str], _StoredSchema] = {}

    # -- parsing ---------------------------------------------------------------------------------

    def _reference_texts(self, references: list[dict[str, Any]]) -> list[_StoredSchema]:
        """The referenced schemas, dependencies first (each reference's own references before it)."""
        ordered: list[_StoredSchema] = []
        for ref in references:
            try:
                subject, version = str(ref["subject"]), int(ref["version"])
                str(ref["name"])
            except (KeyError, TypeError, ValueError) as exc:
                raise _RegistryError(422, 42201, f"Invalid schema: bad reference {ref!r}") from exc
            stored = self._version(subject, version, deleted=True, missing_code=42201).schema
            ordered += self._reference_texts(stored.references)
            ordered.append(stored)
        return ordered

    def parse(self, schema_type: str, schema_str: str, references: list[dict[str, Any]]) -> Any:
        refs = self._reference_texts(references)
        try:
            if schema_type == "AVRO":
                return compat_avro.parse(schema_str, [r.schema_str for r in refs])
            if schema_type == "JSON":
                return compat_json.parse(schema_str)
            return _proto_descriptor(schema_str)
        except ValueError as exc:
            raise _RegistryError(422, 42201, f"Invalid schema {schema_str[:200]!r}: {exc}") from exc

    @staticmethod
    def canonical(schema_type: str, schema_str: str) -> str:
        if schema_type in ("AVRO", "JSON"):
            return json.dumps(json.loads(schema_str), separators=(",", ":"))
        return schema_str.strip()

    # -- lookups ---------------------------------------------------------------------------------

    def versions(self, subject: str, *, deleted: bool) -> list[_Version]:
        versions = self.subjects.get(subject)
        live = [v for v in versions or () if deleted or not v.deleted]
        if not live:
            raise _subject_not_found(subject)
        return live

    def _version(
        self, subject: str, version: int | str, *, deleted: bool, missing_code: int = 40402
    ) -> _Version:
        versions = self.versions(subject, deleted=deleted)
        if version in ("latest", -1, "-1"):
            return versions[-1]
        try:
            number = int(version)
        except ValueError:
            raise _RegistryError(
                422,
                42202,
                f"The specified version '{version}' is not a valid version id. "
                'Allowed values are between [1, 2^31-1] and the string "latest"',
            ) from None
        if number < 1:
            raise _RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id.")
        for entry in versions:
            if entry.version == number:
                return entry
        if missing_code == 42201:
            raise _RegistryError(
                422, 42201, f"Invalid schema: reference {subject} version {number} not found"
            )
        raise _RegistryError(404, 40402, f"Version {number} not found.")

    def level(self, subject: str) -> str:
        return self.subject_levels.get(subject, self.global_level)

    # -- compatibility ---------------------------------------------------------------------------

    def incompatibilities(
        self, subject: str, schema_type: str, parsed: Any, against: list[_Version], level: str
    ) -> list[str]:
        if level == "NONE" or not against:
            return []
        targets = against if level.endswith("_TRANSITIVE") else against[-1:]
        problems: list[str] = []
        for old in targets:
            if old.schema.schema_type != schema_type:
                problems.append(
                    f"Incompatible because of different schema type: {old.schema.schema_type} -> {schema_type}"
                )
                continue
            old_parsed = self.parse(old.schema.schema_type, old.schema.schema_str, old.schema.references)
            if level.startswith(("BACKWARD", "FULL")):
                problems += [
                    f"{m}, version {old.version} (BACKWARD)" for m in _check(schema_type, parsed, old_parsed)
                ]
            if level.startswith(("FORWARD", "FULL")):
                problems += [
                    f"{m}, version {old.version} (FORWARD)" for m in _check(schema_type, old_parsed, parsed)
                ]
        return problems

    # -- mutations -------------------------------------------------------------------------------

    def register(self, subject: str, body: Any) -> _StoredSchema:
        schema_type, schema_str, references = _schema_fields(body)
        parsed = self.parse(schema_type, schema_str, references)
        key = (schema_type, self.canonical(schema_type, schema_str), json.dumps(references, sort_keys=True))
        existing = self.subjects.setdefault(subject, [])
        for entry in existing:
            if not entry.deleted and self._key(entry.schema) == key:
                return entry.schema
        live = [v for v in existing if not v.deleted]
        problems = self.incompatibilities(subject, schema_type, parsed, live, self.level(subject))
        if problems:
            if not existing:
                del self.subjects[subject]
            raise _RegistryError(
                409,
                409,
                f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
                f"details: {problems}",
            )
        stored = self.by_key.get(key)
        if stored is None:
            stored = _StoredSchema(len(self.by_id) + 1, schema_type, schema_str, references)
            self.by_id[stored.schema_id] = stored
            self.by_key[key] = stored
        existing.append(_Version(max((v.version for v in existing), default=0) + 1, stored))
        return stored

    def _key(self, stored: _StoredSchema) -> tuple[str, str, str]:
        return (
            stored.schema_type,
            self.canonical(stored.schema_type, stored.schema_str),
            json.dumps(stored.references, sort_keys=True),
        )

    def lookup(self, subject: str, body: Any, *, deleted: bool) -> _Version:
        schema_type, schema_str, references = _schema_fields(body)
        versions = self.versions(subject, deleted=deleted)
        self.parse(schema_type, schema_str, references)
        key = (schema_type, self.canonical(schema_type, schema_str), json.dumps(references, sort_keys=True))
        for entry in reversed(versions):
            if self._key(entry.schema) == key:
                return entry
        raise _RegistryError(404, 40403, "Schema not found")

    def referenced_by(self, subject: str, version: int) -> list[int]:
        return sorted(
            {
                entry.schema.schema_id
                for versions in self.subjects.values()
                for entry in versions
                if not entry.deleted
                for ref in entry.schema.references
                if ref.get("subject") == subject and int(ref.get("version", -1)) == version
            }
        )

    def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        versions = self.subjects.get(subject)
        if not versions:
            raise _subject_not_found(subject)
        for entry in versions:
            if self.referenced_by(subject, entry.version):
                raise _RegistryError(
                    422,
                    42206,
                    f"One or more references exist to the schema {{subject={subject}, version={entry.version}}}.",
                )
        if permanent:
            if any(not v.deleted for v in versions):
                raise _RegistryError(
                    404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
                )
            del self.subjects[subject]
            self.subject_levels.pop(subject, None)
            return [v.version for v in versions]
        if all(v.deleted for v in versions):
            raise _RegistryError(
                404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
            )
        deleted = [v.version for v in versions if not v.deleted]
        for entry in versions:
            entry.deleted = True
        return deleted

    def delete_version(self, subject: str, version: str, *, permanent: bool) -> int:
        entry = self._version(subject, version, deleted=permanent)
        if self.referenced_by(subject, entry.version):
            raise _RegistryError(
                422,
                42206,
                f"One or more references exist to the schema {{subject={subject}, version={entry.version}}}.",
            )
        if permanent:
            if not entry.deleted:
                raise _RegistryError(
                    404,
                    40407,
                    f"Subject '{subject}' Version {entry.version} was not deleted first before being permanently deleted",
                )
            self.subjects[subject].remove(entry)
            if not self.subjects[subject]:
                del self.subjects[subject]
        else:
            if entry.deleted:
                raise _RegistryError(
                    404, 40406, f"Subject '{subject}' Version {entry.version} was soft deleted."
                )
            entry.deleted = True
        return entry.version


def _check(schema_type: str, reader: Any, writer: Any) -> list[str]:
    if schema_type == "AVRO":
        return compat_avro.check(reader, writer)
    if schema_type == "JSON":
        return compat_json.check(reader, writer)
    return compat_protobuf.check(reader, writer)


def _schema_fields(body: Any) -> tuple[str, str, list[dict[str, Any]]]:
    if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
        raise _RegistryError(422, 42201, 'Invalid schema: the request body needs a "schema" string')
    schema_type = str(body.get("schemaType") or "AVRO").upper()
    if schema_type not in SCHEMA_TYPES:
        raise _RegistryError(422, 42201, f"Invalid schema: unknown schema type {schema_type}")
    references = body.get("references") or []
    if not isinstance(references, list):
        raise _RegistryError(422, 42201, "Invalid schema: references must be a list")
    refs = [
        {"name": str(r["name"]), "subject": str(r["subject"]), "version": int(r["version"])}
        for r in references
    ]
    return schema_type, str(body["schema"]), refs


def _flag(request: Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


class EmbeddedSchemaRegistry:
    """A Confluent-compatible schema registry in this process (see the module docstring).

    ``compatibility`` is the global level (Confluent's default: BACKWARD). ``basic_auth`` (user,
    password) or ``bearer_token`` make every request need those credentials (401 otherwise), to test
    clients' authentication; ``ssl_context`` (a server-side context) serves HTTPS, with client
    certificates required if the context says so.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        compatibility: str = "BACKWARD",
        basic_auth: tuple[str, str] | None = None,
        bearer_token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if compatibility not in COMPATIBILITY_LEVELS:
            raise ValueError(f"compatibility must be one of {', '.join(COMPATIBILITY_LEVELS)}")
        self._store = _Store(compatibility)
        self._server = HttpServer(self._handle, host, port, ssl_context)
        self._scheme = "https" if ssl_context is not None else "http"
        self._host = host
        self._expected_auth: str | None = None
        if basic_auth is not None:
            token = base64.b64encode(f"{basic_auth[0]}:{basic_auth[1]}".encode()).decode()
            self._expected_auth = f"Basic {token}"
        elif bearer_token is not None:
            self._expected_auth = f"Bearer {bearer_token}"
        self.requests_served = 0

    @property
    def url(self) -> str:
        return f"{self._scheme}://{self._host}:{self._server.port}"

    async def start(self) -> None:
        await self._server.start()

    async def stop(self) -> None:
        await self._server.stop()

    async def __aenter__(self) -> EmbeddedSchemaRegistry:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @classmethod
    @contextmanager
    def in_thread(cls, **kwargs: Any) -> Iterator[EmbeddedSchemaRegistry]:
        """Run a registry on its own event loop in a daemon thread (for blocking clients)."""
        registry = cls(**kwargs)
        loop = asyncio.new_event_loop()
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(registry.start())
            except BaseException as exc:
                failure.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()

        thread = threading.Thread(target=run, name="embedded-schema-registry", daemon=True)
        thread.start()
        started.wait()
        if failure:
            raise failure[0]
        try:
            yield registry
        finally:
            asyncio.run_coroutine_threadsafe(registry.stop(), loop).result(timeout=30)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
            loop.close()

    # -- HTTP ------------------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        self.requests_served += 1
        if self._expected_auth is not None and request.headers.get("authorization") != self._expected_auth:
            return Response(401, {"error_code": 401, "message": "Unauthorized"})
        segments = [urllib.parse.unquote(s) for s in request.path.strip("/").split("/") if s]
        try:
            body = request.json() if request.body else None
        except ValueError:
            return Response(400, {"error_code": 400, "message": "Unrecognized request body: not JSON"})
        try:
            return self._route(request, segments, body)
        except _RegistryError as exc:
            return exc.response

    def _route(self, request: Request, seg: list[str], body: Any) -> Response:
        method = request.method
        store = self._store
        routes: list[tuple[str, list[str], Callable[..., Response]]] = [
            ("GET", [], lambda: Response(200, {})),
            ("GET", ["schemas", "types"], lambda: Response(200, list(SCHEMA_TYPES))),
            (
                "GET",
                ["schemas", "ids", "*"],
                lambda i: Response(
                    200, self._by_id(i).body(request.query.get("format"), request.query.get("subject"))
                ),
            ),
            ("GET", ["schemas", "ids", "*", "schema"], self._raw_by_id),
            (
                "GET",
                ["schemas", "guids", "*"],
                lambda g: Response(200, self._by_guid(g).body(request.query.get("format"))),
            ),
            (
                "GET",
                ["schemas", "ids", "*", "subjects"],
                lambda i: Response(200, [s for s, _ in self._usages(i)]),
            ),
            (
                "GET",
                ["schemas", "ids", "*", "versions"],
                lambda i: Response(200, [{"subject": s, "version": v} for s, v in self._usages(i)]),
            ),
            ("GET", ["subjects"], lambda: Response(200, self._subjects(request))),
            (
                "POST",
                ["subjects", "*"],
                lambda s: Response(
                    200, self._version_body(s, store.lookup(s, body, deleted=_flag(request, "deleted")), None)
                ),
            ),
            (
                "DELETE",
                ["subjects", "*"],
                lambda s: Response(200, store.delete_subject(s, permanent=_flag(request, "permanent"))),
            ),
            (
                "GET",
                ["subjects", "*", "versions"],
                lambda s: Response(
                    200, [v.version for v in store.versions(s, deleted=_flag(request, "deleted"))]
                ),
            ),
            ("POST", ["subjects", "*", "versions"], lambda s: self._register(s, body)),
            (
                "GET",
                ["subjects", "*", "versions", "*"],
                lambda s, v: Response(
                    200,
                    self._version_body(
                        s,
                        store._version(s, v, deleted=_flag(request, "deleted")),
                        request.query.get("format"),
                    ),
                ),
            ),
            (
                "GET",
                ["subjects", "*", "versions", "*", "schema"],
                lambda s, v: self._raw(store._version(s, v, deleted=False).schema),
            ),
            (
                "GET",
                ["subjects", "*", "versions", "*", "referencedby"],
                lambda s, v: Response(
                    200, store.referenced_by(s, store._version(s, v, deleted=False).version)
                ),
            ),
            (
                "DELETE",
                ["subjects", "*", "versions", "*"],
                lambda s, v: Response(200, store.delete_version(s, v, permanent=_flag(request, "permanent"))),
            ),
            (
                "POST",
                ["compatibility", "subjects", "*", "versions"],
                lambda s: self._compatibility(request, s, None, body),
            ),
            (
                "POST",
                ["compatibility", "subjects", "*", "versions", "*"],
                lambda s, v: self._compatibility(request, s, v, body),
            ),
            ("GET", ["config"], lambda: Response(200, {"compatibilityLevel": store.global_level})),
            ("PUT", ["config"], lambda: self._set_config(None, body)),
            ("DELETE", ["config"], lambda: self._delete_config(None)),
            ("GET", ["config", "*"], lambda s: self._get_config(request, s)),
            ("PUT", ["config", "*"], lambda s: self._set_config(s, body)),
            ("DELETE", ["config", "*"], lambda s: self._delete_config(s)),
            ("GET", ["contexts"], lambda: Response(200, self._contexts())),
            ("GET", ["mode"], lambda: Response(200, {"mode": "READWRITE"})),
            ("GET", ["mode", "*"], lambda s: Response(200, {"mode": "READWRITE"})),
        ]
        path_matched = False
        for route_method, pattern, handler in routes:
            if len(pattern) != len(seg) or any(
                p != "*" and p != s for p, s in zip(pattern, seg, strict=True)
            ):
                continue
            path_matched = True
            if route_method == method:
                return handler(*[s for p, s in zip(pattern, seg, strict=True) if p == "*"])
        if path_matched:
            return Response(405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"})
        return Response(404, {"error_code": 404, "message": "HTTP 404 Not Found"})

    def _by_id(self, raw_id: str) -> _StoredSchema:
        try:
            stored = self._store.by_id.get(int(raw_id))
        except ValueError:
            stored = None
        if stored is None:
            raise _RegistryError(404, 40403, "Schema not found")
        return stored

    def _by_guid(self, guid: str) -> _StoredSchema:
        for stored in self._store.by_id.values():
            if stored.guid == guid:
                return stored
        raise _RegistryError(404, 40403, "Schema not found")

    def _raw_by_id(self, raw_id: str) -> Response:
        return self._raw(self._by_id(raw_id))

    @staticmethod
    def _raw(stored: _StoredSchema) -> Response:
        """The schema itself as the body: JSON for Avro and JSON Schema, a string for Protobuf."""
        if stored.schema_type == "PROTOBUF":
            return Response(200, stored.schema_str)
        return Response(200, json.loads(stored.schema_str))

    def _usages(self, raw_id: str) -> list[tuple[str, int]]:
        stored = self._by_id(raw_id)
        return [
            (subject, entry.version)
            for subject, versions in self._store.subjects.items()
            for entry in versions
            if entry.schema is stored and not entry.deleted
        ]

    def _subjects(self, request: Request) -> list[str]:
        deleted = _flag(request, "deleted")
        prefix = request.query.get("subjectPrefix", "")
        return sorted(
            s
            for s, versions in self._store.subjects.items()
            if s.startswith(prefix) and any(deleted or not v.deleted for v in versions)
        )

    def _contexts(self) -> list[str]:
        contexts = {"."}
        for subject in self._store.subjects:
            if subject.startswith(":.") and subject.count(":") >= 2:
                contexts.add(subject[1:].split(":", 1)[0])
        return sorted(contexts)

    def _version_body(self, subject: str, entry: _Version, fmt: str | None) -> dict[str, Any]:
        return {
            "subject": subject,
            "version": entry.version,
            "id": entry.schema.schema_id,
            "guid": entry.schema.guid,
            **entry.schema.body(fmt, subject),
        }

    def _register(self, subject: str, body: Any) -> Response:
        stored = self._store.register(subject, body)
        entry = next(
            v for v in reversed(self._store.subjects[subject]) if v.schema is stored and not v.deleted
        )
        return Response(200, self._version_body(subject, entry, None))

    def _compatibility(self, request: Request, subject: str, version: str | None, body: Any) -> Response:
        store = self._store
        schema_type, schema_str, references = _schema_fields(body)
        parsed = store.parse(schema_type, schema_str, references)
        level = store.level(subject)
        if subject not in store.subjects or not any(not v.deleted for v in store.subjects[subject]):
            if version is None:
                against: list[_Version] = []
            else:
                raise _subject_not_found(subject)
        elif version is None:
            # Without a version: the same check as registering (the level decides latest or all).
            against = store.versions(subject, deleted=False)
        else:
            # Against one given version, whatever the level's transitivity (as Confluent does).
            against = [store._version(subject, version, deleted=False)]
            level = level.removesuffix("_TRANSITIVE")
        problems = store.incompatibilities(subject, schema_type, parsed, against, level)
        result: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            result["messages"] = problems
        return Response(200, result)

    def _get_config(self, request: Request, subject: str) -> Response:
        level = self._store.subject_levels.get(subject)
        if level is None:
            if not _flag(request, "defaultToGlobal"):
                raise _RegistryError(
                    404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
                )
            level = self._store.global_level
        return Response(200, {"compatibilityLevel": level})

    def _set_config(self, subject: str | None, body: Any) -> Response:
        level = str((body or {}).get("compatibility", "")).upper()
        if level not in COMPATIBILITY_LEVELS:
            raise _RegistryError(
                422,
                42203,
                "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive",
            )
        if subject is None:
            self._store.global_level = level
        else:
            self._store.subject_levels[subject] = level
        return Response(200, {"compatibility": level})

    def _delete_config(self, subject: str | None) -> Response:
        if subject is None:
            previous = self._store.global_level
            self._store.global_level = "BACKWARD"
            return Response(200, {"compatibilityLevel": previous})
        previous_level = self._store.subject_levels.pop(subject, None)
        if previous_level is None:
            raise _subject_not_found(subject)
        return Response(200, {"compatibilityLevel": previous_level})
