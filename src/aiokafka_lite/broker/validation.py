"""Kafka's produce-time checks on one partition's record set, as pure functions.

Apache Kafka is the reference: every check, its order and its error code follow what a
Kafka 4.x broker answers (the differential suite in ``tests/differential`` sends the
same requests to both and compares). Three stages, in Kafka's order:

* :func:`check_request_records`: what ``ProduceRequest.validateRecords`` checks when
  the request arrives: exactly one batch of magic 2 (INVALID_RECORD), framing
  (CORRUPT_MESSAGE), zstd only from Produce v7 (UNSUPPORTED_COMPRESSION_TYPE).
* :func:`check_batch`: what the log checks before assigning offsets (``UnifiedLog`` and
  ``LogValidator``): base offset 0, ``max.message.bytes``, CRC, codec, header counts,
  no control batches, a sequence with a producer id, then every record: keys on a
  compacted topic and ``message.timestamp.before/after.max.ms``, reported per record.
* producer state (sequences, epochs, duplicates) is checked by ``PartitionLog``.

Where Kafka answers UNKNOWN_SERVER_ERROR because a malformed batch makes it fail
internally (an unknown codec, an undecompressable payload, an lz4 frame with linked
blocks, a compressed batch with gaps in its offsets), the same code is answered here,
so that a client sees what Kafka would show it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aiokafka_lite.core.errors import (
    BrokerResponseError,
    CorruptMessageError,
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageSizeTooLargeError,
    UnknownServerError,
    UnsupportedCompressionTypeError,
)
from aiokafka_lite.wire.records import (
    BatchTooShortError,
    Buffer,
    CompressedPayloadError,
    Compression,
    RecordBatch,
    RecordsSummary,
    as_byte_view,
    encode_batch,
    read_batch,
)

__all__ = [
    "NO_TIMESTAMP_LIMIT",
    "RecordErrors",
    "TopicRules",
    "check_batch",
    "check_request_records",
    "stored_form",
]

#: ``message.timestamp.before.max.ms`` default: no lower bound.
NO_TIMESTAMP_LIMIT: Final = 2**63 - 1
_NO_TIMESTAMP: Final = -1
_ATTR_CODEC: Final = 0x07
_ATTR_LOG_APPEND_TIME: Final = 0x08
_MAX_CODEC: Final = max(Compression)
# Kafka reads the producer id (bytes 43..51) of every produced batch before it checks
# the batch's size, so a shorter "batch" fails inside the broker.
_PRODUCER_ID_END: Final = 51
_V2_HEADER_SIZE: Final = 61
_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"


@dataclass(slots=True, frozen=True)
class TopicRules:
    """The topic configs that decide whether a batch is accepted (Kafka 4.x defaults)."""

    max_message_bytes: int = 1048588
    compacted: bool = False  # cleanup.policy contains compact
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    timestamp_before_max_ms: int = NO_TIMESTAMP_LIMIT
    timestamp_after_max_ms: int = 3_600_000
    #: compression.type: the codec batches are stored with, ``None`` for "producer".
    compression: Compression | None = None


class RecordErrors(Exception):
    """A batch refused because of some of its records: the partition's error plus, per
    refused record, its index in the batch and why (the produce response's
    ``record_errors``)."""

    def __init__(self, error: BrokerResponseError, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(str(error))
        self.error = error
        self.record_errors = record_errors


def check_request_records(data: Buffer, produce_version: int) -> RecordBatch:
    """The request-level checks of one partition's records; returns its single batch.

    Raises INVALID_RECORD (no batch, more than one, magic 0/1), CORRUPT_MESSAGE (broken
    framing), UNSUPPORTED_COMPRESSION_TYPE (zstd before Produce v7) and, for a "batch"
    too short to hold a v2 header, what Kafka answers for one (see module doc).
    """
    view = as_byte_view(data)
    short = False  # a complete v2 batch too short for its header
    try:
        first = read_batch(view)
        size = first.size_in_bytes if first is not None else 0
    except BatchTooShortError as e:
        if e.magic != 2:
            raise InvalidRecordError(_V2_ONLY.format(produce_version)) from None
        first, size, short = None, e.size, True
    except CorruptRecordError as e:
        raise CorruptMessageError(str(e)) from None
    if not short:
        if first is None:
            raise InvalidRecordError(
                f"Produce requests with version {produce_version} must have at least one record batch per partition"
            )
        if not isinstance(first, RecordBatch):
            raise InvalidRecordError(_V2_ONLY.format(produce_version))
        if produce_version < 7 and first.attributes & _ATTR_CODEC == Compression.ZSTD:
            raise UnsupportedCompressionTypeError(
                f"Produce requests with version {produce_version} cannot use ZStandard compression (needs v7)"
            )
    try:
        more = read_batch(view, size) is not None
    except BatchTooShortError:
        more = True
    except CorruptRecordError as e:
        raise CorruptMessageError(str(e)) from None
    if more:
        raise InvalidRecordError(
            f"Produce requests with version {produce_version} are only allowed to contain exactly one record batch per partition"
        )
    if not isinstance(first, RecordBatch):
        if size < _PRODUCER_ID_END:
            raise UnknownServerError(f"record batch of {size} bytes ends before its producer id")
        raise CorruptMessageError(
            f"Record batch is corrupt (the size {size} is smaller than the minimum allowed overhead {_V2_HEADER_SIZE})"
        )
    return first


_V2_ONLY: Final = (
    "Produce requests with version {} are only allowed to contain record batches with magic version 2"
)


def check_batch(batch: RecordBatch, rules: TopicRules, now_ms: int) -> RecordsSummary:
    """The log's checks of a produced batch, before producer state and offsets.

    Returns the records' summary (the log stores the true max timestamp). Raises the
    partition's error; refused records raise :class:`RecordErrors`.
    """
    if batch.base_offset != 0:
        raise InvalidRecordError(
            f"The baseOffset of the record batch should be 0, but it is {batch.base_offset}"
        )
    size = batch.size_in_bytes
    if size > rules.max_message_bytes:
        raise MessageSizeTooLargeError(
            f"The record batch of {size} bytes exceeds the maximum configured size of {rules.max_message_bytes}"
        )
    try:
        batch.validate_crc()
    except CorruptRecordError as e:
        raise CorruptMessageError(str(e)) from None
    codec = batch.attributes & _ATTR_CODEC
    if codec > _MAX_CODEC:
        raise UnknownServerError(f"Unknown compression type id: {codec}")
    # LogValidator.validateBatch for batches from clients.
    count = batch.record_count
    if batch.last_offset_delta + 1 <= 0:
        raise InvalidRecordError(f"Batch has an invalid offset range: [0, {batch.last_offset_delta}]")
    if count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {count}")
    if batch.last_offset_delta + 1 != count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [0, {batch.last_offset_delta}] and count of records {count}"
        )
    if batch.is_control:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if batch.producer_id >= 0 and batch.base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {batch.base_sequence} in record batch with producerId {batch.producer_id}"
        )
    if codec == Compression.LZ4:
        problem = lz4_frame_problem(batch.payload)
        if problem is not None:
            raise UnknownServerError(problem)
    try:
        summary = batch.summarize()
    except CompressedPayloadError as e:
        raise UnknownServerError(f"Failed to decompress record stream: {e}") from None
    except CorruptRecordError as e:
        raise InvalidRecordError(str(e)) from None
    errors = _record_errors(batch, summary, rules, now_ms)
    if errors:
        if any(timestamp for _, _, timestamp in errors):
            raise RecordErrors(
                InvalidTimestampError("One or more records have been rejected due to invalid timestamp"),
                [(i, msg) for i, msg, _ in errors],
            )
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{msg}')" for i, msg, _ in errors[:3])
        raise RecordErrors(
            InvalidRecordError(
                f"One or more records have been rejected due to {len(errors)} record errors in total, "
                f"and only showing the first three errors at most: [{shown}]"
            ),
            [(i, msg) for i, msg, _ in errors],
        )
    if codec and not summary.sequential_offsets and rules.compression in (None, codec):
        # Kafka keeps a compressed batch as it is when the topic stores that codec; with
        # gaps in its record offsets it must rebuild it instead, and fails doing so.
        raise UnknownServerError("compressed record batch whose record offsets are not 0..count-1")
    return summary


def stored_form(batch: RecordBatch, rules: TopicRules) -> RecordBatch:
    """The batch as the log stores it: recompressed when the topic's compression.type
    names another codec (its records renumbered 0..count-1, as Kafka rebuilds them)."""
    target = rules.compression
    if target is None or target == batch.attributes & _ATTR_CODEC:
        return batch
    rebuilt = encode_batch(
        [(r.timestamp, r.key, r.value, r.headers) for r in batch.records()],
        compression=target,
        is_transactional=batch.is_transactional,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
    )
    stored = read_batch(as_byte_view(rebuilt))
    assert isinstance(stored, RecordBatch)
    return stored


def _record_errors(
    batch: RecordBatch, summary: RecordsSummary, rules: TopicRules, now_ms: int
) -> list[tuple[int, str, bool]]:
    """(index, message, is a timestamp error) per refused record, in record order."""
    keyless = summary.keyless if rules.compacted else []
    lat_batch = bool(batch.attributes & _ATTR_LOG_APPEND_TIME)
    if rules.log_append_time:
        timestamps_ok = not lat_batch
    else:
        lo = now_ms - rules.timestamp_before_max_ms
        hi = now_ms + rules.timestamp_after_max_ms
        timestamps_ok = lo <= summary.min_timestamp and summary.max_timestamp <= hi
    if not keyless and timestamps_ok:
        return []
    # The slow path, for refused batches only: look at each record.
    missing_key = set(keyless)
    out: list[tuple[int, str, bool]] = []
    for i, record in enumerate(batch.records()):
        if i in missing_key:
            out.append((i, "Compacted topic cannot accept message without key", False))
            continue
        ts = record.timestamp
        if not rules.log_append_time and ts != _NO_TIMESTAMP:
            if now_ms - ts > rules.timestamp_before_max_ms or ts - now_ms > rules.timestamp_after_max_ms:
                out.append(
                    (
                        i,
                        f"Timestamp {ts} of message with offset {i} is out of range. The timestamp should be "
                        f"within [{now_ms - rules.timestamp_before_max_ms}, {now_ms + rules.timestamp_after_max_ms}]",
                        True,
                    )
                )
        elif lat_batch:
            out.append(
                (
                    i,
                    "Invalid timestamp type in message: producers may not set the timestamp type LogAppendTime",
                    True,
                )
            )
    return out


def lz4_frame_problem(payload: Buffer) -> str | None:
    """Why Kafka's lz4 reader would refuse this frame's descriptor, or ``None``.

    Kafka reads lz4 frames with its own block reader, which supports version 1 frames
    of independent blocks without a dictionary. Frames other readers accept with linked
    blocks make a Kafka broker fail with UNKNOWN_SERVER_ERROR.
    """
    head = bytes(payload[:5])
    if len(head) < 5 or head[:4] != _LZ4_MAGIC:
        return "Stream unsupported (invalid magic bytes)"
    flg = head[4]
    if flg >> 6 != 1:
        return "Version Unsupported"
    if flg & 0x03:
        return "Reserved0 field must be 0"
    if not flg & 0x20:
        return "Dependent block stream is unsupported"
    return None
