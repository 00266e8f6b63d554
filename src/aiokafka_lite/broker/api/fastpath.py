"""Hand-written codecs for the produce hot path: request header, ProduceRequest, ProduceResponse.

The generated codecs handle every field generically; for produce (one request per
partition batch with librdkafka) that generality costs more than storing the batch.
These decode/encode exactly the same bytes (the tests compare them with the generated
codecs at every version); anything unexpected raises, and the caller falls back to the
generated codec, which then reports malformed input as usual.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Final

from aiokafka_lite.core.errors import CorruptFrameError
from aiokafka_lite.wire.messages import ProduceRequest

__all__ = ["decode_produce_request", "encode_produce_response", "parse_request_header"]

_H: Final = struct.Struct(">h")
_I: Final = struct.Struct(">i")
_HI: Final = struct.Struct(">hi")  # acks, timeout
_PART_V3: Final = struct.Struct(">ihqq")  # index, error, base offset, log append time
_Q: Final = struct.Struct(">q")
_PRODUCE_FLEXIBLE: Final = 9
_REQUEST_HEADER_FLEXIBLE: Final = 2


def _uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise CorruptFrameError("varint too long")


def _skip_tags(buf: bytes | memoryview, pos: int) -> int:
    n, pos = _uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


def parse_request_header(frame: bytes, header_version: int) -> tuple[str | None, int]:
    """(client id, offset of the body) of a request frame with header v1 or v2."""
    n = _H.unpack_from(frame, 8)[0]
    pos = 10
    client_id: str | None = None
    if n >= 0:
        if pos + n > len(frame):
            raise CorruptFrameError("truncated client id")
        client_id = frame[pos : pos + n].decode()
        pos += n
    elif n != -1:
        raise CorruptFrameError(f"bad client id length {n}")
    if header_version >= _REQUEST_HEADER_FLEXIBLE:
        pos = _skip_tags(frame, pos)
    if pos > len(frame):
        raise CorruptFrameError("truncated request header")
    return client_id, pos


def decode_produce_request(frame: bytes, pos: int, v: int) -> ProduceRequest:
    """ProduceRequest v3+ body at ``frame[pos:]``; records are zero-copy views."""
    view = memoryview(frame)
    end = len(frame)
    flex = v >= _PRODUCE_FLEXIBLE
    # transactional_id (nullable string)
    txn: str | None = None
    if flex:
        n, pos = _uvarint(frame, pos)
        n -= 1
    else:
        n = _H.unpack_from(frame, pos)[0]
        pos += 2
    if n >= 0:
        txn = frame[pos : pos + n].decode()
        pos += n
    acks, timeout = _HI.unpack_from(frame, pos)
    pos += 6
    if flex:
        ntopics, pos = _uvarint(frame, pos)
        ntopics -= 1
    else:
        ntopics = _I.unpack_from(frame, pos)[0]
        pos += 4
    if ntopics < 0 or ntopics > end - pos:
        raise CorruptFrameError("bad topic count")
    topics = []
    for _ in range(ntopics):
        name = ""
        topic_id = uuid.UUID(int=0)
        if v >= 13:
            topic_id = uuid.UUID(bytes=frame[pos : pos + 16])
            pos += 16
        else:
            if flex:
                n, pos = _uvarint(frame, pos)
                n -= 1
            else:
                n = _H.unpack_from(frame, pos)[0]
                pos += 2
            if n < 0:
                raise CorruptFrameError("null topic name")
            name = frame[pos : pos + n].decode()
            pos += n
        if flex:
            nparts, pos = _uvarint(frame, pos)
            nparts -= 1
        else:
            nparts = _I.unpack_from(frame, pos)[0]
            pos += 4
        if nparts < 0 or nparts > end - pos:
            raise CorruptFrameError("bad partition count")
        parts = []
        for _ in range(nparts):
            index = _I.unpack_from(frame, pos)[0]
            pos += 4
            if flex:
                n, pos = _uvarint(frame, pos)
                n -= 1
            else:
                n = _I.unpack_from(frame, pos)[0]
                pos += 4
            records = None
            if n >= 0:
                if pos + n > end:
                    raise CorruptFrameError("truncated records")
                records = view[pos : pos + n]
                pos += n
            if flex:
                pos = _skip_tags(frame, pos)
            parts.append(ProduceRequest.PartitionProduceData(index=index, records=records))
        if flex:
            pos = _skip_tags(frame, pos)
        topics.append(ProduceRequest.TopicProduceData(name=name, topic_id=topic_id, partition_data=parts))
    if flex:
        pos = _skip_tags(frame, pos)
    if pos > end:
        raise CorruptFrameError("truncated produce request")
    return ProduceRequest(transactional_id=txn, acks=acks, timeout_ms=timeout, topic_data=topics)


# (index, error code, base offset, log append time, log start offset, error message,
#  record errors as (batch index, message))
PartitionResult = tuple[int, int, int, int, int, str | None, Sequence[tuple[int, str | None]]]


def _varint_bytes(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(out: bytearray, value: str | None, flex: bool) -> None:
    if value is None:
        out += b"\x00" if flex else b"\xff\xff"
        return
    raw = value.encode()
    out += _varint_bytes(len(raw) + 1) if flex else _H.pack(len(raw))
    out += raw


def encode_produce_response(
    v: int, topics: Sequence[tuple[str, uuid.UUID, Sequence[PartitionResult]]]
) -> bytes:
    """ProduceResponse v3+ body without leaders or node endpoints."""
    flex = v >= _PRODUCE_FLEXIBLE
    out = bytearray(_varint_bytes(len(topics) + 1) if flex else _I.pack(len(topics)))
    for name, topic_id, parts in topics:
        if v >= 13:
            out += topic_id.bytes
        else:
            raw = name.encode()
            out += _varint_bytes(len(raw) + 1) if flex else _H.pack(len(raw))
            out += raw
        out += _varint_bytes(len(parts) + 1) if flex else _I.pack(len(parts))
        for index, error, base, append_time, log_start, message, record_errors in parts:
            out += _PART_V3.pack(index, error, base, append_time)
            if v >= 5:
                out += _Q.pack(log_start)
            if v >= 8:
                out += _varint_bytes(len(record_errors) + 1) if flex else _I.pack(len(record_errors))
                for batch_index, batch_message in record_errors:
                    out += _I.pack(batch_index)
                    _string(out, batch_message, flex)
                    if flex:
                        out.append(0)
                _string(out, message, flex)
            if flex:
                out.append(0)
        if flex:
            out.append(0)
    out += _I.pack(0)  # throttle time
    if flex:
        out.append(0)
    return bytes(out)
