"""RecordBatch v2 (magic 2): decoded batch view and incremental builder.

The header is parsed eagerly with one ``struct`` call; records are decoded only when
:meth:`RecordBatch.records` is called, by the backend chosen in ``_backend`` (C
extension or pure Python). Batches keep a ``memoryview`` of the caller's buffer, so
parsing a fetch response copies nothing until records are materialised.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

from crc32c import crc32c

from aiokafka_lite.core.errors import CorruptRecordError, UnsupportedCodecError
from aiokafka_lite.wire.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    codec_from_attributes,
    compress,
    decompress_to_buffer,
    validate_level,
)
from aiokafka_lite.wire.records import _pyimpl
from aiokafka_lite.wire.records._c_extension import c_ext
from aiokafka_lite.wire.records._model import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    LOG_OVERHEAD,
    MIN_RECORD_SIZE,
    V2_ATTRIBUTES_OFFSET,
    V2_CRC_OFFSET,
    V2_HEADER,
    V2_HEADER_SIZE,
    Buffer,
    CompressedPayloadError,
    Record,
    RecordsSummary,
    TimestampType,
)

DecodeFn = Callable[[Buffer, int, int, int, int, int, "int | None"], list[Record]]

ScanFn = Callable[[Buffer, int, int, int], tuple[int, int, list[int], bool]]

#: Record decoder in use (module global so tests can swap backends).
decode_records: DecodeFn = c_ext.decode_records if c_ext is not None else _pyimpl.decode_records
#: ``(cls, topic, partition, timestamp_type, leader_epoch)``: see :meth:`RecordBatch.records_as`.
RecordForm = tuple[type[tuple[Any, ...]], str, int, Any, "int | None"]


def as_records(
    records: Iterable[Record],
    cls: type[tuple[Any, ...]],
    topic: str,
    partition: int,
    timestamp_type: Any,
    leader_epoch: int | None,
) -> list[Any]:
    """Decoded records as ``cls`` instances, as :meth:`RecordBatch.records_as` builds them
    (headers as a tuple, the shared empty one when there are none)."""
    new = tuple.__new__
    return [
        new(
            cls,
            (
                topic,
                partition,
                r.offset,
                r.key,
                r.value,
                tuple(r.headers) if r.headers else (),
                r.timestamp,
                timestamp_type,
                leader_epoch,
            ),
        )
        for r in records
    ]


def _py_decode_records_as(
    data: Buffer,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    *form: Any,
) -> list[Any]:
    return as_records(
        decode_records(data, start, end, count, base_offset, base_timestamp, log_append_time), *form
    )


def decode_records_as(*args: Any) -> list[Any]:
    """``decode_records`` building the records as ``cls`` instances (``RecordBatch.records_as``):
    the C decoder builds them directly, untracked by the garbage collector (they cannot be
    part of a cycle); otherwise the records ``decode_records`` makes are converted."""
    if decode_records is _C_DECODE:
        records: list[Any] = decode_records(*args)
        return records
    return _py_decode_records_as(*args)


_C_DECODE = c_ext.decode_records if c_ext is not None else None
#: Record walker behind :meth:`RecordBatch.summarize` (same errors as ``decode_records``).
scan_records: ScanFn = c_ext.scan_records if c_ext is not None else _pyimpl.scan_records

_U32: Final = struct.Struct(">I")


def _codec_name(attributes: int) -> str:
    code = attributes & ATTR_CODEC_MASK
    try:
        return Compression(code).name
    except ValueError:
        return f"unknown({code})"


class RecordBatch:
    """A v2 record batch inside a larger buffer: header fields plus lazy records."""

    __slots__ = (
        "_data",
        "_max_decompressed_size",
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "position",
        "producer_epoch",
        "producer_id",
        "record_count",
    )

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    def __init__(
        self,
        data: memoryview,
        position: int = 0,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        """Parse the header at ``data[position:]``; the caller has checked the framing."""
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = V2_HEADER.unpack_from(data, position)
        self._data = data
        self.position = position
        self._max_decompressed_size = max_decompressed_size

    # -- derived header fields ------------------------------------------------------

    @property
    def size_in_bytes(self) -> int:
        """Total encoded size, including base offset and length fields."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        """Offset of the last record (valid even after compaction removed records)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """Offset a consumer should fetch after this batch."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        """Codec from attributes bits 0-2; ``UnsupportedCodecError`` for unknown ids."""
        return codec_from_attributes(self.attributes)

    @property
    def timestamp_type(self) -> TimestampType:
        """CREATE_TIME or LOG_APPEND_TIME (attributes bit 3)."""
        return TimestampType(1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0)

    @property
    def is_transactional(self) -> bool:
        """Attributes bit 4."""
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        """Attributes bit 5: the batch holds control records (e.g. commit/abort markers)."""
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        """Attributes bit 6 (KIP-534): ``base_timestamp`` is the compaction delete horizon."""
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon when bit 6 is set, else ``None``."""
        return self.base_timestamp if self.attributes & ATTR_DELETE_HORIZON else None

    @property
    def last_sequence(self) -> int:
        """Sequence number of the last record (-1 without idempotence); wraps after 2**31-1."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def buffer(self) -> memoryview:
        """The batch's bytes (a view into the decoded buffer, not a copy)."""
        return self._data[self.position : self.position + self.batch_length + LOG_OVERHEAD]

    @property
    def payload(self) -> memoryview:
        """The records region as stored (compressed when the batch is), a view."""
        return self._data[self.position + V2_HEADER_SIZE : self.position + self.batch_length + LOG_OVERHEAD]

    def _where(self) -> str:
        return (
            f"batch at byte {self.position} (base offset {self.base_offset}, "
            f"codec {_codec_name(self.attributes)})"
        )

    # -- validation -----------------------------------------------------------------

    def compute_crc(self) -> int:
        """CRC-32C over attributes..end, as stored in the ``crc`` field."""
        start = self.position + V2_ATTRIBUTES_OFFSET
        return int(crc32c(self._data[start : self.position + LOG_OVERHEAD + self.batch_length]))

    def validate_crc(self) -> None:
        """Raise ``CorruptRecordError`` if the stored CRC does not match the contents."""
        pos = self.position
        # compute_crc() inlined: this runs once per fetched batch.
        computed = crc32c(self._data[pos + V2_ATTRIBUTES_OFFSET : pos + LOG_OVERHEAD + self.batch_length])
        if computed != self.crc:
            raise CorruptRecordError(
                f"CRC mismatch in {self._where()}: stored 0x{self.crc:08x}, computed 0x{computed:08x}"
            )

    def validate_header(self) -> None:
        """Cheap sanity checks a broker applies before appending (no decompression)."""
        if self.record_count < 0:
            raise CorruptRecordError(f"negative record count {self.record_count} in {self._where()}")
        if self.record_count > 0 and self.last_offset_delta < self.record_count - 1:
            raise CorruptRecordError(
                f"last offset delta {self.last_offset_delta} < record count - 1 "
                f"({self.record_count - 1}) in {self._where()}"
            )
        codec = self.compression
        if codec is Compression.NONE:
            payload = self.batch_length + LOG_OVERHEAD - V2_HEADER_SIZE
            if self.record_count > payload // MIN_RECORD_SIZE:
                raise CorruptRecordError(
                    f"record count {self.record_count} cannot fit in {payload} bytes in {self._where()}"
                )

    def validate_records(self) -> list[Record]:
        """Full produce-side check for a broker: header sanity, then decode every record
        (bounded decompression) and require offset deltas 0..count-1 with the header's
        last offset delta. Returns the decoded records."""
        self.validate_header()
        records = self.records()
        expected = self.base_offset
        for record in records:
            if record.offset != expected:
                raise CorruptRecordError(
                    f"record offset delta {record.offset - self.base_offset} where "
                    f"{expected - self.base_offset} was expected in {self._where()}"
                )
            expected += 1
        if records and self.last_offset_delta != len(records) - 1:
            raise CorruptRecordError(
                f"last offset delta {self.last_offset_delta} does not match {len(records)} records "
                f"in {self._where()}"
            )
        return records

    def summarize(self) -> RecordsSummary:
        """Walk every record, decompressing like :meth:`records`, without building them.

        Malformed records raise ``CorruptRecordError`` (the same errors as ``records()``);
        a compressed payload that does not decompress raises ``CompressedPayloadError``.
        """
        attrs = self.attributes
        start = self.position + V2_HEADER_SIZE
        end = self.position + LOG_OVERHEAD + self.batch_length
        try:
            if not attrs & ATTR_CODEC_MASK:
                lo, hi, keyless, sequential = scan_records(self._data, start, end, self.record_count)
            else:
                try:
                    raw = decompress_to_buffer(
                        codec_from_attributes(attrs), self._data[start:end], self._max_decompressed_size
                    )
                except UnsupportedCodecError:
                    raise
                except CorruptRecordError as exc:
                    raise CompressedPayloadError(str(exc)) from None
                lo, hi, keyless, sequential = scan_records(raw, 0, len(raw), self.record_count)
        except UnsupportedCodecError as exc:
            raise UnsupportedCodecError(f"{self._where()}: {exc}") from None
        except CompressedPayloadError as exc:
            raise CompressedPayloadError(f"{self._where()}: {exc}") from None
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{self._where()}: {exc}") from None
        if attrs & ATTR_TIMESTAMP_TYPE:
            return RecordsSummary(self.max_timestamp, self.max_timestamp, keyless, sequential)
        base = self.base_timestamp
        return RecordsSummary(base + lo, base + hi, keyless, sequential)

    # -- records --------------------------------------------------------------------

    def records(self) -> list[Record]:
        """Decompress (bounded by the batch's cap) and decode all records.

        Offsets and timestamps are absolute; with LOG_APPEND_TIME every record gets
        the batch's max timestamp, as the broker intends.
        """
        attrs = self.attributes
        start = self.position + V2_HEADER_SIZE
        end = self.position + LOG_OVERHEAD + self.batch_length
        lat = self.max_timestamp if attrs & ATTR_TIMESTAMP_TYPE else None
        try:
            if not attrs & ATTR_CODEC_MASK:
                return decode_records(
                    self._data, start, end, self.record_count, self.base_offset, self.base_timestamp, lat
                )
            raw = decompress_to_buffer(
                codec_from_attributes(attrs), self._data[start:end], self._max_decompressed_size
            )
            return decode_records(
                raw, 0, len(raw), self.record_count, self.base_offset, self.base_timestamp, lat
            )
        except UnsupportedCodecError as exc:
            raise UnsupportedCodecError(f"{self._where()}: {exc}") from None
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{self._where()}: {exc}") from None

    def records_as(self, form: RecordForm) -> list[Any]:
        """:meth:`records` in another record type: ``form`` is ``(cls, topic, partition,
        timestamp_type, leader_epoch)`` and each record is ``cls((topic, partition, offset,
        key, value, headers, timestamp, timestamp_type, leader_epoch))`` with the headers a
        tuple (the shared empty tuple when there are none). ``cls`` is a tuple subclass
        without slots (the consumer's Record). Same errors as :meth:`records`."""
        attrs = self.attributes
        start = self.position + V2_HEADER_SIZE
        end = self.position + LOG_OVERHEAD + self.batch_length
        lat = self.max_timestamp if attrs & ATTR_TIMESTAMP_TYPE else None
        try:
            if not attrs & ATTR_CODEC_MASK:
                return decode_records_as(
                    self._data,
                    start,
                    end,
                    self.record_count,
                    self.base_offset,
                    self.base_timestamp,
                    lat,
                    *form,
                )
            raw = decompress_to_buffer(
                codec_from_attributes(attrs), self._data[start:end], self._max_decompressed_size
            )
            return decode_records_as(
                raw, 0, len(raw), self.record_count, self.base_offset, self.base_timestamp, lat, *form
            )
        except UnsupportedCodecError as exc:
            raise UnsupportedCodecError(f"{self._where()}: {exc}") from None
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{self._where()}: {exc}") from None

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.record_count}, codec={_codec_name(self.attributes)}, "
            f"producer_id={self.producer_id}, size={self.size_in_bytes})"
        )


class _BuilderMixin:
    """Batch-level half of :class:`BatchBuilder`: header, compression and CRC.

    The record-level half (``append`` and the counters) comes from the backend's
    ``RecordsWriter``, so ``append`` is a direct C call when the extension is built.
    """

    if not TYPE_CHECKING:  # mypy: the concrete subclasses declare the slots
        __slots__ = ()

    if TYPE_CHECKING:
        _compression: Compression
        _compression_level: int | None
        _timestamp_type: int
        _is_transactional: bool
        _is_control: bool
        _base_offset: int
        _partition_leader_epoch: int
        _payload: bytes | None
        _payload_count: int

        def _core_init(self, max_batch_size: int, /) -> None: ...
        @property
        def record_count(self) -> int: ...
        @property
        def first_timestamp(self) -> int: ...
        @property
        def max_timestamp(self) -> int: ...
        @property
        def records_size(self) -> int: ...
        def records_bytes(self) -> bytes: ...
        def records_view(self) -> memoryview: ...

    def __init__(
        self,
        *,
        compression: Compression = Compression.NONE,
        compression_level: int | None = None,
        max_batch_size: int,
        timestamp_type: int = 0,
        is_transactional: bool = False,
        base_offset: int = 0,
        partition_leader_epoch: int = -1,
        is_control: bool = False,
    ) -> None:
        self._core_init(max_batch_size)
        self._compression = Compression(compression)
        self._compression_level = validate_level(self._compression, compression_level)
        self._timestamp_type = TimestampType(timestamp_type)
        self._is_transactional = bool(is_transactional)
        self._is_control = bool(is_control)
        self._base_offset = base_offset
        self._partition_leader_epoch = partition_leader_epoch
        self._payload = None
        self._payload_count = -1

    @property
    def is_empty(self) -> bool:
        """True until the first record is appended."""
        return self.record_count == 0

    @property
    def compression(self) -> Compression:
        """Codec the batch will be written with."""
        return self._compression

    def estimated_size(self) -> int:
        """Header plus uncompressed records size: an upper bound for compressible data."""
        return V2_HEADER_SIZE + self.records_size

    def build(self, *, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
        """Serialise the batch.

        Producer fields are passed here because the sequence number is only known at
        drain time; the compressed records are cached, so building again (a retry
        after an epoch bump) only rewrites the header and CRC.
        """
        count = self.record_count
        payload: bytes | memoryview
        if self._compression is Compression.NONE:
            # A view of the writer's own buffer: the output below is the only copy.
            payload = self.records_view()
        else:
            if self._payload is None or self._payload_count != count:
                with self.records_view() as raw:
                    self._payload = compress(self._compression, raw, self._compression_level)
                self._payload_count = count
            payload = self._payload
        attributes = (
            self._compression
            | (ATTR_TIMESTAMP_TYPE if self._timestamp_type == TimestampType.LOG_APPEND_TIME else 0)
            | (ATTR_TRANSACTIONAL if self._is_transactional else 0)
            | (ATTR_CONTROL if self._is_control else 0)
        )
        header = bytearray(
            V2_HEADER.pack(
                self._base_offset,
                V2_HEADER_SIZE - LOG_OVERHEAD + len(payload),
                self._partition_leader_epoch,
                2,
                0,
                attributes,
                count - 1,
                self.first_timestamp,
                self.max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                count,
            )
        )
        crc = crc32c(payload, crc32c(memoryview(header)[V2_ATTRIBUTES_OFFSET:]))
        _U32.pack_into(header, V2_CRC_OFFSET, crc)
        try:
            return b"".join((header, payload))
        finally:
            if isinstance(payload, memoryview):
                payload.release()


_BUILDER_SLOTS: Final = (
    "_base_offset",
    "_compression",
    "_compression_level",
    "_is_control",
    "_is_transactional",
    "_partition_leader_epoch",
    "_payload",
    "_payload_count",
    "_timestamp_type",
)


class PyBatchBuilder(_BuilderMixin, _pyimpl.RecordsWriter):
    """:class:`BatchBuilder` on the pure-Python backend."""

    __slots__ = _BUILDER_SLOTS


if c_ext is not None:
    CBatchBuilder: type[PyBatchBuilder] | None = type(
        "BatchBuilder",
        (_BuilderMixin, c_ext.RecordsWriter),
        {"__slots__": _BUILDER_SLOTS, "__module__": __name__, "__doc__": PyBatchBuilder.__doc__},
    )
else:
    CBatchBuilder = None

if TYPE_CHECKING:
    BatchBuilder = PyBatchBuilder
else:
    BatchBuilder = CBatchBuilder if CBatchBuilder is not None else PyBatchBuilder
    BatchBuilder.__name__ = BatchBuilder.__qualname__ = "BatchBuilder"
    BatchBuilder.__doc__ = """Incremental v2 batch builder used by the producer's accumulator.

    ``append(timestamp, key, value, headers=())`` returns ``False`` when the record
    would push the batch past ``max_batch_size`` (the first record is always taken);
    ``build(producer_id=, producer_epoch=, base_sequence=)`` serialises it.
    """


def encode_batch(
    records: Iterable[tuple[int, Buffer | None, Buffer | None, Iterable[tuple[str | bytes, Buffer | None]]]],
    *,
    compression: Compression = Compression.NONE,
    compression_level: int | None = None,
    timestamp_type: int = 0,
    is_transactional: bool = False,
    is_control: bool = False,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """Encode ``(timestamp, key, value, headers)`` tuples as one v2 batch (no size limit)."""
    builder = BatchBuilder(
        compression=compression,
        compression_level=compression_level,
        max_batch_size=1 << 62,
        timestamp_type=timestamp_type,
        is_transactional=is_transactional,
        is_control=is_control,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
    )
    append = builder.append
    for timestamp, key, value, headers in records:
        append(timestamp, key, value, headers)
    return builder.build(producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence)
