"""Shared helpers for the record tests: backend switching and hand-built legacy messages.

Every record test that touches the per-record loops takes the ``backend`` fixture,
which runs it once on the C extension and once on pure Python. Locally a missing C
extension skips the C half; in CI (``CI`` or ``AIOKAFKA_LITE_REQUIRE_EXTENSIONS`` set)
it fails, so a broken build cannot turn ~160 C-backend cases into green skips.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from crc32c import crc32c

from aiokafka_lite.wire.records import _pyimpl, _v2
from aiokafka_lite.wire.records._c_extension import c_ext

BACKENDS = ["c", "python"]


@dataclass
class Backend:
    name: str
    BatchBuilder: Any
    decode_records: Any


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def c_extension_required() -> bool:
    """CI must test the C backend: there a missing extension is a failure, not a skip."""
    return _env_flag("AIOKAFKA_LITE_REQUIRE_EXTENSIONS") or _env_flag("CI")


def require_c_backend() -> None:
    """Skip (locally) or fail (in CI) the calling test when the C extension is not loaded."""
    if c_ext is not None and _v2.CBatchBuilder is not None:
        return
    if _env_flag("AIOKAFKA_LITE_NO_EXTENSIONS"):
        why = "the C extension is disabled by AIOKAFKA_LITE_NO_EXTENSIONS"
    else:
        why = (
            "the C extension aiokafka_lite.wire.records._crecords is not built or did not load "
            "(reinstall with AIOKAFKA_LITE_REQUIRE_EXTENSIONS=1 pip install -e . to see the build error)"
        )
    if c_extension_required():
        pytest.fail(f"{why}; CI / AIOKAFKA_LITE_REQUIRE_EXTENSIONS requires it", pytrace=False)
    pytest.skip(why)


def _select(name: str) -> Backend:
    if name == "c":
        require_c_backend()
        assert c_ext is not None and _v2.CBatchBuilder is not None
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


def test_python_backend_is_the_pure_python_code() -> None:
    # The pure-Python backend is always there, whatever was built.
    selected = _select("python")
    assert selected.BatchBuilder is _v2.PyBatchBuilder and selected.decode_records is _pyimpl.decode_records


def test_c_extension_is_built() -> None:
    # The one place that names the requirement: optional for users, required in CI.
    require_c_backend()
    assert c_ext is not None
    assert _v2.CBatchBuilder is not None and issubclass(_v2.CBatchBuilder, c_ext.RecordsWriter)
    # The default builder/decoder the library uses is the C one when it is loaded.
    assert _v2.BatchBuilder is _v2.CBatchBuilder and _v2.decode_records is c_ext.decode_records


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
