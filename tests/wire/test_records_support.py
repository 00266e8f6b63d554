"""Shared helpers for the record tests: backend switching and hand-built legacy messages.

Every record test that touches the per-record loops takes the ``backend`` fixture,
which runs it once on the C extension (when built) and once on pure Python.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from crc32c import crc32c

from aiokafka_lite.wire.records import _pyimpl, _v2
from aiokafka_lite.wire.records._backend import c_ext

BACKENDS = ["c", "python"]


@dataclass
class Backend:
    name: str
    BatchBuilder: Any
    decode_records: Any


def _select(name: str) -> Backend:
    if name == "c":
        if c_ext is None or _v2.CBatchBuilder is None:
            pytest.skip("C extension not built")
        return Backend("c", _v2.CBatchBuilder, c_ext.decode_records)
    return Backend("python", _v2.PyBatchBuilder, _pyimpl.decode_records)


def make_backend_fixture() -> Any:
    """A fixture running the test on each backend (patching the module-level hooks)."""

    @pytest.fixture(params=BACKENDS)
    def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
        selected = _select(request.param)
        monkeypatch.setattr(_v2, "BatchBuilder", selected.BatchBuilder)
        monkeypatch.setattr(_v2, "decode_records", selected.decode_records)
        yield selected

    return backend


def test_both_backends_available_or_skipped() -> None:
    # The pure-Python backend is always there; the C one is optional by design.
    assert _select("python").name == "python"


# ----------------------------------------------------------------- legacy builders


def legacy_message(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    *,
    magic: int = 1,
    attributes: int = 0,
    timestamp: int = -1,
) -> bytes:
    """Encode one magic 0/1 message with its offset/size prefix (CRC-32 over magic..end)."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body)
    message = struct.pack(">I", crc) + body
    return struct.pack(">qi", offset, len(message)) + message


# ----------------------------------------------------------------- raw v2 builders


def varint(v: int) -> bytes:
    return _pyimpl.encode_varint(v)


def record(*fields: bytes) -> bytes:
    body = b"".join(fields)
    return varint(len(body)) + body


def raw_batch(payload: bytes, count: int, *, attributes: int = 0, base_offset: int = 0) -> bytes:
    """A v2 batch around arbitrary record bytes, with a correct CRC."""
    tail = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), 0, 0, -1, -1, -1, count) + payload
    head = struct.pack(">qiib", base_offset, 4 + 1 + 4 + len(tail), -1, 2)
    return head + struct.pack(">I", crc32c(tail)) + tail
