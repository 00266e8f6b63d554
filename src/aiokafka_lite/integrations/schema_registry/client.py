"""An async client for Confluent's Schema Registry REST API (httpx; runs on asyncio and on trio).

Caching follows confluent-kafka's client: an id names one schema forever, and a (subject, schema)
pair keeps its id and version, so both lookups are cached without expiry. The latest version of a
subject changes, so it is cached only for ``latest_cache_ttl`` seconds (``None``: not cached).
"""

from __future__ import annotations

import json
import os
import random
import ssl
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from aiokafka_lite.integrations.schema_registry.errors import (
    RegistryUnavailableError,
    SchemaRegistryError,
    error_for,
)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"

COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)


@dataclass(frozen=True)
class SchemaReference:
    """A named reference from one schema to a registered version of another subject."""

    name: str
    subject: str
    version: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SchemaReference:
        return cls(str(data["name"]), str(data["subject"]), int(data["version"]))


@dataclass(frozen=True)
class Schema:
    """A schema as the registry stores it: its text, its type and its references."""

    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": self.schema_str}
        # Confluent omits the type for AVRO (the default) and the references when there are none.
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [ref.to_dict() for ref in self.references]
        return body

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schema:
        return cls(
            str(data["schema"]),
            str(data.get("schemaType") or "AVRO"),
            tuple(SchemaReference.from_dict(ref) for ref in data.get("references") or ()),
        )


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema registered under a subject: its global id and its version in that subject."""

    schema_id: int
    subject: str
    version: int
    schema: Schema
    guid: str | None = field(default=None, compare=False)


BearerToken = str | Callable[[], str | Awaitable[str]]


class SchemaRegistryClient:
    """Async Schema Registry client.

    ``url`` may carry ``user:password@`` (basic auth), as may ``basic_auth``; ``bearer_token`` is a
    string or a (sync or async) callable returning a fresh token for every request. ``verify`` is a
    bool, a CA bundle path or an ``ssl.SSLContext``; ``cert`` a client certificate (path, or (cert,
    key) paths). A request is retried ``max_retries`` times on 5xx, 429 and transport errors, with
    exponential backoff and jitter, and every call returns or raises within ``timeout`` seconds.
    """

    def __init__(
        self,
        url: str,
        *,
        basic_auth: tuple[str, str] | None = None,
        bearer_token: BearerToken | None = None,
        verify: bool | str | ssl.SSLContext = True,
        cert: str | tuple[str, str] | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        retry_backoff: float = 0.1,
        retry_backoff_max: float = 2.0,
        latest_cache_ttl: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(url.rstrip("/"))
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"schema registry url must be http(s)://host[:port][/path], got {url!r}")
        if parsed.username is not None:
            if basic_auth is not None:
                raise ValueError("basic auth given twice: in the url and as basic_auth")
            basic_auth = (
                urllib.parse.unquote(parsed.username),
                urllib.parse.unquote(parsed.password or ""),
            )
            netloc = parsed.hostname + (f":{parsed.port}" if parsed.port else "")
            parsed = parsed._replace(netloc=netloc)
        if basic_auth is not None and bearer_token is not None:
            raise ValueError("choose one of basic_auth and bearer_token")
        if max_retries < 0 or timeout <= 0:
            raise ValueError("max_retries must be >= 0 and timeout > 0")
        self.url = urllib.parse.urlunsplit(parsed)
        self._bearer_token = bearer_token
        self._timeout = timeout
        self._max_retries = max_retries
        self._retry_backoff = retry_backoff
        self._retry_backoff_max = retry_backoff_max
        self._latest_cache_ttl = latest_cache_ttl
        self._http = httpx.AsyncClient(
            base_url=self.url + "/",
            auth=httpx.BasicAuth(*basic_auth) if basic_auth else None,
            verify=_ssl_context(verify, cert),
            timeout=timeout,
            headers={"Accept": CONTENT_TYPE + ", application/json", **(headers or {})},
        )
        self._schema_by_id: dict[int, Schema] = {}
        self._schema_by_guid: dict[str, Schema] = {}
        self._registered: dict[tuple[str, Schema], RegisteredSchema] = {}
        self._by_version: dict[tuple[str, int], RegisteredSchema] = {}
        self._latest: dict[str, tuple[float, RegisteredSchema]] = {}

    async def __aenter__(self) -> SchemaRegistryClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- transport ---------------------------------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str | int | bool] | None = None,
    ) -> Any:
        """One REST call, retried on 5xx/429/transport errors; an error body becomes a typed error."""
        query = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (params or {}).items()}
        content = json.dumps(body).encode() if body is not None else None
        last_failure = "no attempt"
        last_status, last_code = -1, 50003
        try:
            with anyio.fail_after(self._timeout):
                for attempt in range(self._max_retries + 1):
                    if attempt:
                        delay = min(self._retry_backoff * 2 ** (attempt - 1), self._retry_backoff_max)
                        await anyio.sleep(delay * (0.5 + random.random() / 2))
                    headers = {"Content-Type": CONTENT_TYPE} if content is not None else {}
                    if self._bearer_token is not None:
                        headers["Authorization"] = f"Bearer {await self._token()}"
                    try:
                        response = await self._http.request(
                            method, path, content=content, params=query, headers=headers
                        )
                    except httpx.TransportError as exc:
                        last_failure = f"{type(exc).__name__}: {exc}"
                        continue
                    if response.status_code >= 500 or response.status_code == 429:
                        last_status, last_code = response.status_code, response.status_code
                        last_failure = f"HTTP {response.status_code}: {response.text[:200]}"
                        try:
                            last_code = int(response.json()["error_code"])
                        except (ValueError, KeyError, TypeError):
                            pass  # not a registry error body (a proxy's page): keep the HTTP status
                        continue
                    return self._decode(response)
        except TimeoutError:
            raise RegistryUnavailableError(
                -1, 50002, f"{method} {self.url}/{path} timed out after {self._timeout} s ({last_failure})"
            ) from None
        # The last answer's status and registry error code, when there was an answer.
        raise RegistryUnavailableError(
            last_status,
            last_code,
            f"{method} {self.url}/{path} failed {self._max_retries + 1} times ({last_failure})",
        )

    async def _token(self) -> str:
        token = self._bearer_token
        if callable(token):
            value = token()
            return value if isinstance(value, str) else await value
        assert token is not None
        return token

    @staticmethod
    def _decode(response: httpx.Response) -> Any:
        try:
            payload = response.json() if response.content else None
        except ValueError:
            payload = None
        if response.is_success:
            return payload
        if isinstance(payload, dict) and "error_code" in payload:
            raise error_for(response.status_code, int(payload["error_code"]), str(payload.get("message")))
        raise SchemaRegistryError(response.status_code, response.status_code, response.text[:500])

    # --- schemas -----------------------------------------------------------------------------

    async def register_schema(self, subject: str, schema: Schema, *, normalize: bool = False) -> int:
        """Register ``schema`` under ``subject`` (or find it registered); its global id."""
        return (await self.register_schema_full_response(subject, schema, normalize=normalize)).schema_id

    async def register_schema_full_response(
        self, subject: str, schema: Schema, *, normalize: bool = False
    ) -> RegisteredSchema:
        cached = self._registered.get((subject, schema))
        if cached is not None:
            return cached
        answer = await self._request(
            "POST",
            f"subjects/{_quote(subject)}/versions",
            body=schema.to_dict(),
            params={"normalize": normalize},
        )
        schema_id = int(answer["id"])
        if "version" not in answer:
            # An older registry answers only the id: the version comes from a lookup.
            return await self.lookup_schema(subject, schema)
        registered = RegisteredSchema(schema_id, subject, int(answer["version"]), schema, answer.get("guid"))
        self._remember(registered)
        return registered

    async def get_schema(
        self, schema_id: int, *, subject: str | None = None, fmt: str | None = None
    ) -> Schema:
        """The schema with this global id (cached forever: an id never changes its schema)."""
        if fmt is None and schema_id in self._schema_by_id:
            return self._schema_by_id[schema_id]
        params: dict[str, str | int | bool] = {}
        if subject is not None:
            params["subject"] = subject
        if fmt is not None:
            params["format"] = fmt
        schema = Schema.from_dict(await self._request("GET", f"schemas/ids/{schema_id}", params=params))
        if fmt is None:
            self._schema_by_id[schema_id] = schema
        return schema

    async def get_schema_by_guid(self, guid: str, *, fmt: str | None = None) -> Schema:
        """The schema with this GUID (Confluent's header format names schemas by GUID); cached forever."""
        if fmt is None and guid in self._schema_by_guid:
            return self._schema_by_guid[guid]
        params: dict[str, str | int | bool] = {"format": fmt} if fmt is not None else {}
        schema = Schema.from_dict(await self._request("GET", f"schemas/guids/{_quote(guid)}", params=params))
        if fmt is None:
            self._schema_by_guid[guid] = schema
        return schema

    async def get_subjects_by_id(self, schema_id: int) -> list[str]:
        return [str(s) for s in await self._request("GET", f"schemas/ids/{schema_id}/subjects")]

    async def get_schema_types(self) -> list[str]:
        return [str(s) for s in await self._request("GET", "schemas/types")]

    async def lookup_schema(self, subject: str, schema: Schema, *, deleted: bool = False) -> RegisteredSchema:
        """The id and version of ``schema`` in ``subject``; SchemaNotFoundError if not registered."""
        cached = self._registered.get((subject, schema))
        if cached is not None:
            return cached
        answer = await self._request(
            "POST", f"subjects/{_quote(subject)}", body=schema.to_dict(), params={"deleted": deleted}
        )
        registered = RegisteredSchema(
            int(answer["id"]), subject, int(answer["version"]), schema, answer.get("guid")
        )
        self._remember(registered)
        return registered

    def _remember(self, registered: RegisteredSchema) -> None:
        self._registered[(registered.subject, registered.schema)] = registered
        self._schema_by_id.setdefault(registered.schema_id, registered.schema)
        self._by_version[(registered.subject, registered.version)] = registered

    # --- subjects and versions ---------------------------------------------------------------

    async def get_subjects(self, *, prefix: str | None = None, deleted: bool = False) -> list[str]:
        params: dict[str, str | int | bool] = {"deleted": deleted}
        if prefix is not None:
            params["subjectPrefix"] = prefix
        return [str(s) for s in await self._request("GET", "subjects", params=params)]

    async def get_versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        answer = await self._request(
            "GET", f"subjects/{_quote(subject)}/versions", params={"deleted": deleted}
        )
        return [int(v) for v in answer]

    async def get_version(
        self, subject: str, version: int | str, *, deleted: bool = False
    ) -> RegisteredSchema:
        """One version of a subject; ``version`` is a number or ``"latest"`` (``-1`` means latest too)."""
        if isinstance(version, int) and version > 0 and (subject, version) in self._by_version:
            return self._by_version[(subject, version)]
        answer = await self._request(
            "GET", f"subjects/{_quote(subject)}/versions/{version}", params={"deleted": deleted}
        )
        registered = _registered_from(answer)
        self._remember(registered)
        return registered

    async def get_latest_version(self, subject: str) -> RegisteredSchema:
        now = time.monotonic()
        cached = self._latest.get(subject)
        if (
            cached is not None
            and self._latest_cache_ttl is not None
            and now - cached[0] < self._latest_cache_ttl
        ):
            return cached[1]
        registered = await self.get_version(subject, "latest")
        self._latest[subject] = (now, registered)
        return registered

    async def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """Soft-delete a subject (``permanent=True``: hard-delete a soft-deleted one); its versions."""
        answer = await self._request("DELETE", f"subjects/{_quote(subject)}", params={"permanent": permanent})
        self._forget_subject(subject)
        return [int(v) for v in answer]

    async def delete_version(self, subject: str, version: int | str, *, permanent: bool = False) -> int:
        answer = await self._request(
            "DELETE", f"subjects/{_quote(subject)}/versions/{version}", params={"permanent": permanent}
        )
        self._forget_subject(subject)
        return int(answer)

    def _forget_subject(self, subject: str) -> None:
        # Ids stay valid after a delete (Confluent keeps serving them), so only the subject's views go.
        self._latest.pop(subject, None)
        for key in [k for k in self._registered if k[0] == subject]:
            del self._registered[key]
        for vkey in [k for k in self._by_version if k[0] == subject]:
            del self._by_version[vkey]

    # --- compatibility and config ------------------------------------------------------------

    async def test_compatibility(
        self, subject: str, schema: Schema, version: int | str | None = None
    ) -> tuple[bool, list[str]]:
        """Whether registering ``schema`` would pass the subject's level (``version``: against that one
        version only), and the registry's reasons if not."""
        path = f"compatibility/subjects/{_quote(subject)}/versions"
        if version is not None:
            path += f"/{version}"
        answer = await self._request("POST", path, body=schema.to_dict(), params={"verbose": True})
        return bool(answer["is_compatible"]), [str(m) for m in answer.get("messages") or ()]

    async def get_compatibility(self, subject: str | None = None, *, default_to_global: bool = True) -> str:
        if subject is None:
            answer = await self._request("GET", "config")
        else:
            answer = await self._request(
                "GET", f"config/{_quote(subject)}", params={"defaultToGlobal": default_to_global}
            )
        return str(answer.get("compatibilityLevel") or answer.get("compatibility"))

    async def set_compatibility(self, level: str, subject: str | None = None) -> str:
        level = level.upper()
        if level not in COMPATIBILITY_LEVELS:
            raise ValueError(
                f"compatibility level must be one of {', '.join(COMPATIBILITY_LEVELS)}, got {level!r}"
            )
        path = "config" if subject is None else f"config/{_quote(subject)}"
        answer = await self._request("PUT", path, body={"compatibility": level})
        return str(answer["compatibility"])

    async def delete_compatibility(self, subject: str) -> str:
        answer = await self._request("DELETE", f"config/{_quote(subject)}")
        return str(answer.get("compatibilityLevel") or answer.get("compatibility"))

    async def get_contexts(self) -> list[str]:
        return [str(c) for c in await self._request("GET", "contexts")]


def _ssl_context(
    verify: bool | str | ssl.SSLContext, cert: str | tuple[str, str] | None
) -> bool | ssl.SSLContext:
    """One SSL context from the verify/cert options (httpx 0.28 ignores ``cert`` next to a CA path)."""
    if cert is None and not isinstance(verify, str):
        return verify
    if isinstance(verify, ssl.SSLContext):
        raise ValueError(
            "give the client certificate inside the ssl.SSLContext passed as verify, not as cert"
        )
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif verify is True:
        import certifi

        context = ssl.create_default_context(cafile=certifi.where())
    elif os.path.isdir(verify):
        context = ssl.create_default_context(capath=verify)
    else:
        context = ssl.create_default_context(cafile=verify)
    if cert is not None:
        certfile, keyfile = (cert, None) if isinstance(cert, str) else cert
        context.load_cert_chain(certfile, keyfile)
    return context


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _registered_from(answer: Mapping[str, Any]) -> RegisteredSchema:
    return RegisteredSchema(
        int(answer["id"]),
        str(answer["subject"]),
        int(answer["version"]),
        Schema.from_dict(answer),
        answer.get("guid"),
    )
