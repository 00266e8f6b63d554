"""Transaction markers: control batches holding one COMMIT or ABORT control record.

Key: version int16 (0) + type int16 (0 = abort, 1 = commit).
Value: version int16 (0) + coordinator epoch int32.
"""

from __future__ import annotations

import struct
from typing import Final

from aiokafka_lite.core.errors import CorruptRecordError
from aiokafka_lite.wire.records._model import ControlRecordType, Record
from aiokafka_lite.wire.records._v2 import encode_batch

_KEY: Final = struct.Struct(">hh")
_VALUE: Final = struct.Struct(">hi")


def control_record_key(kind: ControlRecordType) -> bytes:
    """Encoded key of a version-0 control record."""
    return _KEY.pack(0, kind)


def build_control_batch(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Encode a transactional control batch with a single commit/abort marker."""
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return encode_batch(
        [(timestamp, _KEY.pack(0, kind), _VALUE.pack(0, coordinator_epoch), ())],
        is_transactional=True,
        is_control=True,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
    )


def parse_control_record(record: Record) -> tuple[ControlRecordType | int, int]:
    """Return ``(type, coordinator_epoch)`` of a control record.

    Unknown types (e.g. KRaft's internal ones) come back as plain ints with a
    coordinator epoch of -1, since only commit/abort values carry one. Versions above
    0 are read by their version-0 prefix, as the protocol requires.
    """
    key = record.key
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"control record at offset {record.offset} has a short key")
    version, kind = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record at offset {record.offset} has version {version}")
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return int(kind), -1
    value = record.value
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError(f"transaction marker at offset {record.offset} has a short value")
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return ControlRecordType(kind), int(coordinator_epoch)
