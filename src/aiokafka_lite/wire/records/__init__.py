"""Kafka record batches: v2 encode/decode, legacy (magic 0/1) decode, control records.

Pure functions over bytes. Hot per-record loops run in the optional ``_crecords`` C
extension when it is built (``AIOKAFKA_LITE_NO_EXTENSIONS=1`` forces the pure-Python
fallback, which behaves identically).
"""

from __future__ import annotations

from aiokafka_lite.wire.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression
from aiokafka_lite.wire.records._c_extension import c_ext
from aiokafka_lite.wire.records._control import build_control_batch, control_record_key, parse_control_record
from aiokafka_lite.wire.records._frames import (
    AnyBatch,
    as_byte_view,
    decode_batches,
    iter_batches,
    parse_batches,
    read_batch,
    read_batch_headers,
    scan_batches,
    set_base_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from aiokafka_lite.wire.records._legacy import LegacyRecordBatch
from aiokafka_lite.wire.records._model import (
    BatchTooShortError,
    Buffer,
    CompressedPayloadError,
    ControlRecordType,
    Header,
    Record,
    RecordsSummary,
    TimestampType,
)
from aiokafka_lite.wire.records._v2 import BatchBuilder, RecordBatch, as_records, encode_batch

#: True when the C accelerator is in use.
HAS_C_EXTENSION: bool = c_ext is not None

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "HAS_C_EXTENSION",
    "AnyBatch",
    "BatchBuilder",
    "BatchTooShortError",
    "Buffer",
    "CompressedPayloadError",
    "Compression",
    "ControlRecordType",
    "Header",
    "LegacyRecordBatch",
    "Record",
    "RecordBatch",
    "RecordsSummary",
    "TimestampType",
    "as_byte_view",
    "as_records",
    "build_control_batch",
    "control_record_key",
    "decode_batches",
    "encode_batch",
    "iter_batches",
    "parse_batches",
    "parse_control_record",
    "read_batch",
    "read_batch_headers",
    "scan_batches",
    "set_base_offset",
    "set_log_append_time",
    "set_max_timestamp",
    "set_partition_leader_epoch",
]
