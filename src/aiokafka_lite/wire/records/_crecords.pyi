from collections.abc import Iterable

from ._model import Buffer, Record

def setup(record_type: type[Record], error: type[Exception], /) -> None: ...
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

def scan_records(
    data: Buffer, start: int, end: int, count: int, /
) -> tuple[int, int, list[int], bool]: ...

class RecordsWriter:
    def _core_init(self, max_batch_size: int, /) -> None: ...
    def append(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Iterable[tuple[str | bytes, Buffer | None]] = (),
    ) -> bool: ...
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
