"""Shared tools of the differential suite: one request, two brokers, same answer.

A *target* is a broker reached through its bootstrap address (Apache Kafka or the
embedded broker). A *case* is an ``async def case(target) -> dict`` that sends raw
requests and returns what a client could observe: error codes, offsets, watermarks and
the records a fetch returns. The suite runs every case on both brokers and compares
the dicts; ``report.py`` prints them side by side for any number of brokers.

Observations hold only what must agree: never producer ids, error messages, throttle
times or timestamps chosen by the broker.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import struct
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from crc32c import crc32c

from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    EndTxnRequest,
    EndTxnResponse,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from aiokafka_lite.wire.records import Compression, decode_batches, encode_batch

Observation = dict[str, Any]
Case = Callable[["Target"], Awaitable[Observation]]

#: Produce v11 addresses topics by name and predates KIP-890's implicit
#: AddPartitionsToTxn (v12), so every Kafka 4.x answers it the same way.
PRODUCE_VERSION = 11
#: Fetch v12: the last version that names topics (v13 uses topic ids).
FETCH_VERSION = 12

#: Every case, by area then name (filled by ``@case`` in the case modules).
CASES: dict[str, dict[str, Case]] = {}


def case(area: str) -> Callable[[Case], Case]:
    """Registers ``case_<name>`` as case ``<name>`` of ``area``."""

    def register(fn: Case) -> Case:
        CASES.setdefault(area, {})[fn.__name__.removeprefix("case_")] = fn
        return fn

    return register


_names = itertools.count()
_RUN = uuid.uuid4().hex[:8]


@dataclass
class Target:
    """A broker under test: its name (``apache`` / ``embedded``) and bootstrap."""

    name: str
    bootstrap: str
    #: "4.0" for Kafka 4.0.x, else "newest" (the behaviour the embedded broker follows).
    generation: str = "newest"
    _clients: list[RawClient] = field(default_factory=list)

    def unique(self, prefix: str) -> str:
        """A topic/group/transactional id nobody else uses (the Apache broker is shared)."""
        return f"diff-{prefix}-{_RUN}-{next(_names)}"

    async def client(self) -> RawClient:
        """A fresh connection, closed by :meth:`close`."""
        c = await RawClient.connect(self.bootstrap, client_id="differential")
        self._clients.append(c)
        return c

    async def close(self) -> None:
        for c in self._clients:
            await c.close()
        self._clients.clear()

    async def create_topic(
        self, prefix: str, partitions: int = 1, configs: dict[str, str] | None = None
    ) -> str:
        """Creates a uniquely named topic and waits until its leaders serve it."""
        name = self.unique(prefix)
        c = await self.client()
        resp = await c.request(
            CreateTopicsRequest(
                topics=[
                    CreateTopicsRequest.CreatableTopic(
                        name=name,
                        num_partitions=partitions,
                        replication_factor=-1,
                        configs=[
                            CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                            for k, v in (configs or {}).items()
                        ],
                    )
                ],
                timeout_ms=30000,
            ),
            7,
        )
        assert isinstance(resp, CreateTopicsResponse)
        code = resp.topics[0].error_code
        if code:
            raise AssertionError(
                f"{self.name}: creating {name} failed: {code} {resp.topics[0].error_message}"
            )
        await self.wait_for_topic(name, partitions)
        return name

    async def wait_for_topic(self, name: str, partitions: int, within: float = 30.0) -> None:
        """Until every partition answers ListOffsets: Kafka's metadata names a leader
        slightly before that leader serves the partition."""
        c = await self.client()
        deadline = time.monotonic() + within
        while True:
            resp = await c.request(
                ListOffsetsRequest(
                    replica_id=-1,
                    topics=[
                        ListOffsetsRequest.ListOffsetsTopic(
                            name=name,
                            partitions=[
                                ListOffsetsRequest.ListOffsetsPartition(partition_index=i, timestamp=-1)
                                for i in range(partitions)
                            ],
                        )
                    ],
                ),
                7,
            )
            assert isinstance(resp, ListOffsetsResponse)
            codes = [p.error_code for t in resp.topics for p in t.partitions]
            if len(codes) == partitions and not any(codes):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: topic {name} not served after {within}s: {codes}")
            await asyncio.sleep(0.02)


async def kafka_generation(bootstrap: str) -> str:
    """ "4.0" when the broker's newest Produce version is 12 (Kafka 4.0.x), else "newest"."""
    c = await RawClient.connect(bootstrap, client_id="differential")
    try:
        resp = await c.request(
            ApiVersionsRequest(client_software_name="differential", client_software_version="1"), 3
        )
    finally:
        await c.close()
    assert isinstance(resp, ApiVersionsResponse)
    produce_max = next(k.max_version for k in resp.api_keys if k.api_key == ProduceRequest.API_KEY)
    return "4.0" if produce_max <= 12 else "newest"


# -- requests -------------------------------------------------------------------------


async def metadata(c: RawClient, topics: list[str] | None, *, auto_create: bool = False) -> MetadataResponse:
    req = MetadataRequest(
        topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=auto_create,
    )
    resp = await c.request(req, 12)
    assert isinstance(resp, MetadataResponse)
    return resp


@dataclass
class Produced:
    error: int
    base_offset: int
    message: str | None
    record_errors: list[int]  # batch indexes of the records the broker named

    def observe(self) -> Observation:
        return {"error": self.error, "base_offset": self.base_offset, "record_errors": self.record_errors}


async def produce(
    c: RawClient,
    topic: str,
    records: bytes | None,
    *,
    partition: int = 0,
    acks: int = -1,
    version: int = PRODUCE_VERSION,
    transactional_id: str | None = None,
) -> Produced:
    """One produce request for one partition; returns that partition's answer."""
    resp = await c.request(
        ProduceRequest(
            transactional_id=transactional_id,
            acks=acks,
            timeout_ms=30000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=topic,
                    partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)],
                )
            ],
        ),
        version,
    )
    assert isinstance(resp, ProduceResponse)
    pr = resp.responses[0].partition_responses[0]
    return Produced(
        pr.error_code, pr.base_offset, pr.error_message, [e.batch_index for e in pr.record_errors or ()]
    )


@dataclass
class Fetched:
    error: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[int]  # first offsets of aborted transactions
    records: list[tuple[int, bytes | None, bytes | None]]
    control: list[int]  # offsets of control batches
    codecs: list[str]  # compression of each data batch as stored

    def observe(self) -> Observation:
        return {
            "fetch_error": self.error,
            "hw": self.high_watermark,
            "lso": self.last_stable_offset,
            "log_start": self.log_start_offset,
            "aborted": self.aborted,
            "records": [(o, k, v) for o, k, v in self.records],
            "control": self.control,
            "codecs": self.codecs,
        }


async def fetch(
    c: RawClient,
    topic: str,
    *,
    offset: int = 0,
    partition: int = 0,
    read_committed: bool = False,
    max_wait_ms: int = 0,
    version: int = FETCH_VERSION,
) -> Fetched:
    """A sessionless fetch of one partition, decoded to (offset, key, value) triples."""
    resp = await c.request(
        FetchRequest(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=50 * 1024 * 1024,
            isolation_level=1 if read_committed else 0,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchRequest.FetchTopic(
                    topic=topic,
                    partitions=[
                        FetchRequest.FetchPartition(
                            partition=partition,
                            fetch_offset=offset,
                            log_start_offset=-1,
                            partition_max_bytes=10 * 1024 * 1024,
                        )
                    ],
                )
            ],
        ),
        version,
    )
    assert isinstance(resp, FetchResponse)
    p = resp.responses[0].partitions[0]
    records: list[tuple[int, bytes | None, bytes | None]] = []
    control: list[int] = []
    codecs: list[str] = []
    if p.records:
        for batch in decode_batches(bytes(p.records)):
            if batch.is_control:
                control.append(batch.base_offset)
                continue
            codecs.append(batch.compression.name)
            records.extend((r.offset, r.key, r.value) for r in batch.records())
    return Fetched(
        p.error_code,
        p.high_watermark,
        p.last_stable_offset,
        p.log_start_offset,
        sorted(a.first_offset for a in p.aborted_transactions or ()),
        records,
        control,
        codecs,
    )


#: Answers a client retries: coordinator loading / not yet known, concurrent transactions.
RETRIABLE_COORDINATOR_ERRORS = frozenset({14, 15, 16, 51})


async def find_coordinator(c: RawClient, key: str, key_type: int) -> int:
    """FindCoordinator v3 (0 = group, 1 = transaction), retried while the coordinator
    topic is being created; returns the error code (0 once found)."""
    deadline = time.monotonic() + 30
    while True:
        resp = await c.request(FindCoordinatorRequest(key=key, key_type=key_type), 3)
        assert isinstance(resp, FindCoordinatorResponse)
        if resp.error_code not in RETRIABLE_COORDINATOR_ERRORS or time.monotonic() > deadline:
            return resp.error_code
        await asyncio.sleep(0.05)


async def init_producer_id(
    c: RawClient,
    transactional_id: str | None = None,
    *,
    timeout_ms: int = 60000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    version: int = 4,
) -> InitProducerIdResponse:
    """InitProducerId as a client does it: find the transaction coordinator first, retry
    while it loads or finishes an earlier transaction."""
    if transactional_id is not None:
        await find_coordinator(c, transactional_id, 1)
    deadline = time.monotonic() + 30
    while True:
        resp = await c.request(
            InitProducerIdRequest(
                transactional_id=transactional_id,
                transaction_timeout_ms=timeout_ms,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
            ),
            version,
        )
        assert isinstance(resp, InitProducerIdResponse)
        if resp.error_code not in RETRIABLE_COORDINATOR_ERRORS or time.monotonic() > deadline:
            return resp
        await asyncio.sleep(0.05)


async def add_partitions(
    c: RawClient,
    txn: str,
    producer_id: int,
    producer_epoch: int,
    topic: str,
    partitions: tuple[int, ...] = (0,),
) -> int:
    """AddPartitionsToTxn v3 (the client version); the first partition's error code."""
    resp = await c.request(
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn,
            v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=producer_epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=list(partitions))
            ],
        ),
        3,
    )
    assert isinstance(resp, AddPartitionsToTxnResponse)
    return resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


async def end_txn(c: RawClient, txn: str, producer_id: int, producer_epoch: int, *, commit: bool) -> int:
    resp = await c.request(
        EndTxnRequest(
            transactional_id=txn, producer_id=producer_id, producer_epoch=producer_epoch, committed=commit
        ),
        3,
    )
    assert isinstance(resp, EndTxnResponse)
    return resp.error_code


async def request(c: RawClient, req: Request, version: int) -> Response:
    return await c.request(req, version)


def consumer_join_request(group: str, **fields: Any) -> ConsumerGroupHeartbeatRequest:
    """A member's first ConsumerGroupHeartbeat (epoch 0, owning nothing); ``fields``
    override or add to the join defaults."""
    return ConsumerGroupHeartbeatRequest(
        **{
            "group_id": group,
            "member_id": "",
            "member_epoch": 0,
            "rebalance_timeout_ms": 30000,
            "topic_partitions": [],
            **fields,
        }
    )


async def consumer_heartbeat(
    c: RawClient, req: ConsumerGroupHeartbeatRequest, version: int
) -> ConsumerGroupHeartbeatResponse:
    """Sends one ConsumerGroupHeartbeat and returns its typed response."""
    resp = await c.request(req, version)
    assert isinstance(resp, ConsumerGroupHeartbeatResponse)
    return resp


# -- batches --------------------------------------------------------------------------

_V2 = struct.Struct(">qiibIhiqqqhii")
_FIELDS = (
    "base_offset",
    "batch_length",
    "partition_leader_epoch",
    "magic",
    "crc",
    "attributes",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "record_count",
)


def now_ms() -> int:
    return int(time.time() * 1000)


def batch(
    values: list[bytes | None] | int = 1,
    *,
    keys: list[bytes | None] | None = None,
    timestamp: int | None = None,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """A valid v2 batch of records with keys ``k0..`` and values ``v0..`` unless given."""
    if isinstance(values, int):
        values = [b"v%d" % i for i in range(values)]
    if keys is None:
        keys = [b"k%d" % i for i in range(len(values))]
    ts = now_ms() if timestamp is None else timestamp
    return encode_batch(
        [(ts, k, v, ()) for k, v in zip(keys, values, strict=True)],
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
    )


def patch(data: bytes, *, fix_crc: bool = True, **fields: int) -> bytes:
    """Rewrites v2 header fields of the first batch (and its CRC unless ``fix_crc`` is false)."""
    values = dict(zip(_FIELDS, _V2.unpack_from(data, 0), strict=True))
    unknown = set(fields) - set(values)
    if unknown:
        raise TypeError(f"unknown batch header fields {sorted(unknown)}")
    values.update(fields)
    out = bytearray(data)
    _V2.pack_into(out, 0, *(values[f] for f in _FIELDS))
    if fix_crc:
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def refresh_crc(data: bytes | bytearray) -> bytes:
    out = bytearray(data)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def apache_bootstrap() -> str:
    return os.environ.get("AIOKAFKA_LITE_APACHE_BOOTSTRAP", "127.0.0.1:39092")


def _varint(v: int) -> bytes:
    v = (v << 1) ^ (v >> 63)
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def raw_record(
    offset_delta: int, key: bytes | None, value: bytes | None, *, timestamp_delta: int = 0
) -> bytes:
    """One encoded v2 record with the offset delta the caller chooses."""
    body = b"\x00" + _varint(timestamp_delta) + _varint(offset_delta)
    for part in (key, value):
        body += _varint(-1) if part is None else _varint(len(part)) + part
    body += _varint(0)  # no headers
    return _varint(len(body)) + body


def raw_batch(
    records: list[bytes] | bytes,
    *,
    count: int,
    last_offset_delta: int,
    base_timestamp: int | None = None,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    magic: int = 2,
) -> bytes:
    """A v2 batch around already encoded (and, for a codec in ``attributes``, compressed)
    records, with whatever header counts the caller wants; the CRC is right."""
    payload = records if isinstance(records, bytes) else b"".join(records)
    ts = now_ms() if base_timestamp is None else base_timestamp
    header = _V2.pack(
        0,
        _V2.size - 12 + len(payload),
        -1,
        magic,
        0,
        attributes,
        last_offset_delta,
        ts,
        ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    return refresh_crc(header + payload)


def legacy_message(
    magic: int, key: bytes | None, value: bytes | None, *, timestamp: int | None = None
) -> bytes:
    """One uncompressed message set entry of format v0/v1 (CRC-32 over magic..end)."""
    import zlib

    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", now_ms() if timestamp is None else timestamp)
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(msg)) + msg
