from collections.abc import Iterable
from typing import Any, overload

from aiokafka_lite.wire.records._model import Buffer, Record

def setup(record_type: type[Record], error: type[Exception], /) -> None: ...
@overload
def decode_records(
    data: Buffer,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    /,
) -> list[Record]: ...
@overload
def decode_records(
    data: Buffer,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    cls: type[tuple[Any, ...]],
    topic: str,
    partition: int,
    timestamp_type: Any,
    leader_epoch: int | None,
    /,
) -> list[Any]: ...
def murmur2_u32(data: Buffer, /) -> int: ...
def group_by_key_partition(keys: list[bytes], count: int, /) -> tuple[list[int], list[int]]: ...
def scan_records(data: Buffer, start: int, end: int, count: int, /) -> tuple[int, int, list[int], bool]: ...

class RecordsWriter:
    def _core_init(self, max_batch_size: int, /) -> None: ...
    def append(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Iterable[tuple[str | bytes, Buffer | None]] = (),
    ) -> bool: ...
    def add(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Iterable[tuple[str | bytes, Buffer | None]],
        /,
    ) -> int: ...
    def track_timestamps(self, timestamps: list[int], /) -> None: ...
    @property
    def record_count(self) -> int: ...
    @property
    def first_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def records_size(self) -> int: ...
    @property
    def max_batch_size(self) -> int: ...
    def records_bytes(self) -> bytes: ...
    def records_view(self) -> memoryview: ...
