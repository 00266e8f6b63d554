"""Fetch: long polling, byte limits (KIP-74), fetch sessions (KIP-227), isolation levels.

The response is encoded by hand: the stored batch buffers are handed to the transport
as they are (``EncodedResponse.parts``), so serving costs no per-record and almost no
per-byte work.

Fetch sessions: each broker keeps a bounded cache of sessions (``max.incremental.fetch.
session.cache.slots``). A full fetch with epoch 0 creates one (if the cache has room,
evicting the least recently used session idle for at least ``fetch_session_min_evict_ms``,
else the response carries session id 0 and the client stays sessionless); incremental
fetches name only changed partitions and get back only partitions with news (records,
a changed high watermark / last stable offset / log start offset, or an error).
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from aiokafka_lite.broker.api.common import NOT_LEADER, check_leader
from aiokafka_lite.broker.context import EncodedResponse, HandlerRegistry, RequestContext
from aiokafka_lite.broker.log import AbortedTxn, PartitionLog
from aiokafka_lite.broker.state import BrokerConfig, ClusterState, Partition
from aiokafka_lite.core.errors import (
    FencedLeaderEpochError,
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
    OffsetOutOfRangeError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from aiokafka_lite.wire.message import Request
from aiokafka_lite.wire.messages import FetchRequest

__all__ = ["FetchSessionCache", "encode_fetch_response", "register"]

READ_COMMITTED: Final = 1
MAX_WAIT_CAP: Final = 300.0  # seconds; nothing waits forever
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_PART_HEAD: Final = struct.Struct(">ihqq")  # partition, error, high watermark, last stable offset
_I64: Final = struct.Struct(">q")
_AB: Final = struct.Struct(">qq")
_TOP_V7: Final = struct.Struct(">ihi")  # throttle, error, session id

Key = tuple[object, int]  # (topic name or topic id, partition)


def register(registry: HandlerRegistry, state: ClusterState) -> None:
    caches: dict[int, FetchSessionCache] = {}

    async def fetch(ctx: RequestContext, req: Request) -> EncodedResponse:
        assert isinstance(req, FetchRequest)
        cache = caches.get(ctx.broker_id)
        if cache is None:
            cache = caches[ctx.broker_id] = FetchSessionCache(ctx.cluster.config)
        return await handle_fetch(ctx, req, cache)

    registry.register(FetchRequest.API_KEY, fetch, FetchRequest.MIN_VERSION, FetchRequest.MAX_VERSION)
    state.extensions["fetch_sessions"] = caches


# -- sessions --------------------------------------------------------------------------
@dataclass(slots=True)
class SessionPartition:
    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    # What the client was last told, to decide whether an incremental response includes it.
    hw: int = -1
    lso: int = -1
    log_start: int = -1


@dataclass(slots=True)
class FetchSession:
    id: int
    epoch: int  # the next epoch expected from the client
    by_id: bool  # v13+: partitions keyed by topic id
    partitions: dict[Key, SessionPartition] = field(default_factory=dict)
    last_used: float = field(default_factory=time.monotonic)


class FetchSessionCache:
    """Per-broker cache of incremental fetch sessions, bounded in size."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.sessions: dict[int, FetchSession] = {}  # LRU order: least recently used first
        self.evictions = 0

    def get(self, sid: int) -> FetchSession | None:
        s = self.sessions.get(sid)
        if s is not None:
            self.sessions[sid] = self.sessions.pop(sid)  # move to MRU end
            s.last_used = time.monotonic()
        return s

    def remove(self, sid: int) -> None:
        self.sessions.pop(sid, None)

    def create(self, by_id: bool) -> FetchSession | None:
        limit = self.config.fetch_session_cache_slots
        if limit <= 0:
            return None
        if len(self.sessions) >= limit:
            oldest_id = next(iter(self.sessions))
            oldest = self.sessions[oldest_id]
            if (time.monotonic() - oldest.last_used) * 1000 < self.config.fetch_session_min_evict_ms:
                return None
            del self.sessions[oldest_id]
            self.evictions += 1
        sid = random.randint(1, 2**31 - 1)
        while sid in self.sessions:
            sid = random.randint(1, 2**31 - 1)
        s = FetchSession(sid, 1, by_id)
        self.sessions[sid] = s
        return s


# -- reading ---------------------------------------------------------------------------
@dataclass(slots=True)
class PartResult:
    key: Key
    topic: str
    topic_id: uuid.UUID
    partition: int
    error: int = 0
    hw: int = -1
    lso: int = -1
    log_start: int = -1
    aborted: list[AbortedTxn] | None = None
    parts: list[bytes | bytearray | memoryview] = field(default_factory=list)
    size: int = 0
    next_offset: int = -1
    leader: tuple[int, int] | None = None  # (leader id, epoch) for NOT_LEADER answers


@dataclass(slots=True)
class _Want:
    key: Key
    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int


def _resolve(state: ClusterState, w: _Want, by_id: bool) -> tuple[Partition | None, int, str]:
    if by_id:
        t = state.topics_by_id.get(w.topic_id)
        if t is None:
            return None, UnknownTopicIdError.code, ""
    else:
        t = state.topics.get(w.topic)
        if t is None:
            return None, UnknownTopicOrPartitionError.code, w.topic
    if not 0 <= w.partition < len(t.partitions):
        return None, UnknownTopicOrPartitionError.code, t.name
    return t.partitions[w.partition], 0, t.name


def _read_all(
    ctx: RequestContext, wants: Sequence[_Want], by_id: bool, max_bytes: int, isolation: int
) -> tuple[list[PartResult], int, bool, list[PartitionLog]]:
    """One pass over the wanted partitions: (results, bytes, any error, logs read)."""
    state = ctx.cluster
    results: list[PartResult] = []
    total = 0
    errors = False
    logs: list[PartitionLog] = []
    min_one = True
    for w in wants:
        r = PartResult(w.key, w.topic, w.topic_id, w.partition)
        results.append(r)
        p, err, name = _resolve(state, w, by_id)
        if p is None:
            r.error = err
            errors = True
            continue
        r.topic = name
        plog = p.log
        err = check_leader(ctx, p, w.current_leader_epoch)
        if err:
            r.error = err
            errors = True
            if err in (NOT_LEADER, FencedLeaderEpochError.code) and state.is_alive(p.leader_id):
                # KIP-951: Kafka names the current leader with both errors (a fenced
                # epoch may come from the leader itself, naming its newer epoch).
                r.leader = (p.leader_id, p.leader_epoch)
            continue
        logs.append(plog)
        hw = plog.high_watermark
        r.hw = hw
        r.lso = plog.last_stable_offset
        r.log_start = plog.log_start_offset
        off = w.fetch_offset
        if off < plog.log_start_offset or off > hw:
            r.error = OffsetOutOfRangeError.code
            r.hw = r.lso = r.log_start = -1  # Kafka reports no offsets with this error
            errors = True
            continue
        upper = r.lso if isolation == READ_COMMITTED else hw
        limit = min(w.max_bytes, max_bytes - total)
        if limit <= 0 and not min_one:
            r.next_offset = off
            continue
        parts, size, nxt = plog.read(off, max(limit, 0), upper, min_one=min_one)
        r.parts = parts
        r.size = size
        r.next_offset = nxt
        if size:
            total += size
            min_one = False
        if isolation == READ_COMMITTED:
            r.aborted = plog.aborted_in_range(off, nxt) if size else []
    return results, total, errors, logs


async def handle_fetch(ctx: RequestContext, req: FetchRequest, cache: FetchSessionCache) -> EncodedResponse:
    v = ctx.api_version
    by_id = v >= 13
    sid, sepoch = req.session_id, req.session_epoch
    session: FetchSession | None = None
    incremental = False
    # Sessionless or new session: the request lists everything.
    if sepoch <= 0:
        if sid != 0:
            cache.remove(sid)
        if sepoch == 0:
            session = cache.create(by_id)
    else:
        session = cache.get(sid)
        if session is None:
            return encode_fetch_response(v, FetchSessionIdNotFoundError.code, 0, [], ctx.cluster)
        if session.epoch != sepoch:
            return encode_fetch_response(v, InvalidFetchSessionEpochError.code, 0, [], ctx.cluster)
        incremental = True

    wants: list[_Want] = []
    if incremental:
        assert session is not None
        for ft in req.forgotten_topics_data:
            tkey: object = ft.topic_id if by_id else ft.topic
            for pi in ft.partitions:
                session.partitions.pop((tkey, pi), None)
    for t in req.topics:
        tkey = t.topic_id if by_id else t.topic
        for fp in t.partitions:
            key = (tkey, fp.partition)
            if session is not None:
                sp = session.partitions.get(key)
                if sp is None:
                    session.partitions[key] = SessionPartition(
                        t.topic,
                        t.topic_id,
                        fp.partition,
                        fp.fetch_offset,
                        fp.partition_max_bytes,
                        fp.current_leader_epoch,
                    )
                else:
                    sp.fetch_offset = fp.fetch_offset
                    sp.max_bytes = fp.partition_max_bytes
                    sp.current_leader_epoch = fp.current_leader_epoch
            else:
                wants.append(
                    _Want(
                        key,
                        t.topic,
                        t.topic_id,
                        fp.partition,
                        fp.fetch_offset,
                        fp.partition_max_bytes,
                        fp.current_leader_epoch,
                    )
                )
    if session is not None:
        wants = [
            _Want(
                k, sp.topic, sp.topic_id, sp.partition, sp.fetch_offset, sp.max_bytes, sp.current_leader_epoch
            )
            for k, sp in session.partitions.items()
        ]

    max_bytes = req.max_bytes if req.max_bytes > 0 else 0
    isolation = req.isolation_level
    deadline = time.monotonic() + min(max(req.max_wait_ms, 0) / 1000.0, MAX_WAIT_CAP)
    loop = asyncio.get_running_loop()
    while True:
        results, total, errors, logs = _read_all(ctx, wants, by_id, max_bytes, isolation)
        if incremental and not errors and total < max(req.min_bytes, 1):
            # An incremental response also reports metadata changes (high watermark ...).
            assert session is not None
            if any(_changed(session.partitions.get(r.key), r) for r in results):
                break
        if errors or total >= req.min_bytes or not logs:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        fut: asyncio.Future[None] = loop.create_future()
        for lg in logs:
            lg.add_waiter(fut)
        try:
            await asyncio.wait_for(fut, remaining)
        except TimeoutError:
            pass
        finally:
            for lg in logs:
                lg.remove_waiter(fut)

    out_sid = 0
    if session is not None:
        out_sid = session.id
        if incremental:
            session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
            results = [r for r in results if _changed(session.partitions.get(r.key), r)]
        else:
            session.epoch = 1
        moved: list[Key] = []
        for r in results:
            sp = session.partitions.get(r.key)
            if sp is not None:
                sp.hw, sp.lso, sp.log_start = r.hw, r.lso, r.log_start
                if r.size:
                    moved.append(r.key)
        # Partitions that returned data go to the back, so others get their turn when
        # the response limit is reached.
        for k in moved:
            session.partitions[k] = session.partitions.pop(k)
    return encode_fetch_response(v, 0, out_sid, results, ctx.cluster)


def _changed(sp: SessionPartition | None, r: PartResult) -> bool:
    if sp is None:
        return True
    return bool(r.size or r.error or r.hw != sp.hw or r.lso != sp.lso or r.log_start != sp.log_start)


# -- encoding --------------------------------------------------------------------------
def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_fetch_response(
    v: int, error_code: int, session_id: int, results: Sequence[PartResult], state: ClusterState
) -> EncodedResponse:
    """FetchResponse v4+ body with the record buffers as separate parts (not copied)."""
    flex = v >= 12
    parts: list[bytes | bytearray | memoryview] = []
    buf = bytearray()
    if v >= 7:
        buf += _TOP_V7.pack(0, error_code, session_id)
    else:
        buf += _I32.pack(0)
    # Group partitions by topic, in order of first appearance.
    groups: dict[object, list[PartResult]] = {}
    for r in results:
        groups.setdefault(r.topic_id if v >= 13 else r.topic, []).append(r)
    buf += _uvarint(len(groups) + 1) if flex else _I32.pack(len(groups))
    leaders: set[int] = set()
    for rs in groups.values():
        first = rs[0]
        if v >= 13:
            buf += first.topic_id.bytes
        else:
            name = first.topic.encode()
            buf += _uvarint(len(name) + 1) if flex else _I16.pack(len(name))
            buf += name
        buf += _uvarint(len(rs) + 1) if flex else _I32.pack(len(rs))
        for r in rs:
            buf += _PART_HEAD.pack(r.partition, r.error, r.hw, r.lso)
            if v >= 5:
                buf += _I64.pack(r.log_start)
            ab = r.aborted
            if ab is None:
                buf += b"\x00" if flex else b"\xff\xff\xff\xff"
            else:
                buf += _uvarint(len(ab) + 1) if flex else _I32.pack(len(ab))
                for a in ab:
                    buf += _AB.pack(a.producer_id, a.first_offset)
                    if flex:
                        buf.append(0)
            if v >= 11:
                buf += b"\xff\xff\xff\xff"  # preferred read replica: none
            buf += _uvarint(r.size + 1) if flex else _I32.pack(r.size)
            if r.size:
                parts.append(buf)
                parts.extend(r.parts)
                buf = bytearray()
            if flex:
                if r.leader is not None:
                    leaders.add(r.leader[0])
                    # one tagged field: tag 1 (current leader), 9 bytes: id, epoch, no tags
                    buf += b"\x01\x01\x09" + struct.pack(">ii", *r.leader) + b"\x00"
                else:
                    buf.append(0)
        if flex:
            buf.append(0)
    if flex:
        known = [state.brokers[bid] for bid in sorted(leaders) if bid in state.brokers]
        if v >= 16 and known:
            ep = bytearray(_uvarint(len(known) + 1))
            for b in known:
                host = b.host.encode()
                ep += _I32.pack(b.node_id) + _uvarint(len(host) + 1) + host + _I32.pack(b.port)
                rack = b.rack.encode() if b.rack is not None else None
                ep += b"\x00" if rack is None else _uvarint(len(rack) + 1) + rack
                ep.append(0)
            buf += b"\x01\x00" + _uvarint(len(ep)) + ep
        else:
            buf.append(0)
    parts.append(buf)
    size = sum(len(p) for p in parts)
    return EncodedResponse(parts, size)
