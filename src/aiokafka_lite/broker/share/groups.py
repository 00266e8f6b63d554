"""Share groups on the embedded broker (KIP-932): ShareGroupHeartbeat, ShareFetch,
ShareAcknowledge, with Kafka's simple assignor (every member gets every partition of its
subscribed topics). Record state lives in ``share_state``; this module is the shell.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from aiokafka_lite.broker.context import HandlerRegistry, RequestContext
from aiokafka_lite.broker.group_configs import (
    GROUP_CONFIG_DEFAULTS,
    duration_ms,
    group_config_value,
    validate_group_config,
)
from aiokafka_lite.broker.log import PartitionLog
from aiokafka_lite.broker.share.state import (
    RENEW,
    InvalidAcknowledgement,
    SharePartitionState,
    aborted_ranges,
)
from aiokafka_lite.broker.share.store import SharePersistence
from aiokafka_lite.broker.state import ClusterState
from aiokafka_lite.wire.message import Request, Response
from aiokafka_lite.wire.messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

__all__ = ["GROUP_CONFIG_DEFAULTS", "ShareGroups", "register_share_handlers", "validate_group_config"]

NONE, UNKNOWN_MEMBER_ID, INVALID_REQUEST, UNKNOWN_TOPIC_ID = 0, 25, 42, 100
GROUP_ID_NOT_FOUND, FENCED_MEMBER_EPOCH, INVALID_RECORD_STATE = 69, 110, 121
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH = 122, 123
INITIAL_EPOCH, FINAL_EPOCH = 0, -1

_POLL_S = 0.02


@dataclass
class _Member:
    member_id: str
    epoch: int
    topics: list[str]
    last_seen: float
    assignment: dict[uuid.UUID, list[int]] = field(default_factory=dict)


@dataclass
class _WaitingFetch:
    """A ShareFetch waiting for records: ``try_acquire`` acquires for it, ``done`` wakes it."""

    try_acquire: Callable[[], bool]
    done: asyncio.Future[None]


@dataclass
class _Group:
    group_id: str
    epoch: int = 0
    members: dict[str, _Member] = field(default_factory=dict)
    partitions: dict[tuple[uuid.UUID, int], SharePartitionState] = field(default_factory=dict)
    waiting: list[_WaitingFetch] = field(default_factory=list)  # oldest first


@dataclass
class _Session:
    epoch: int
    connection_id: str
    partitions: set[tuple[uuid.UUID, int]] = field(default_factory=set)


class ShareGroups:
    """Every share group of a cluster: membership, share sessions, share-partition state."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.groups: dict[str, _Group] = {}
        self.sessions: dict[tuple[str, str], _Session] = {}  # (group, member) -> session
        self.persistence = SharePersistence(self)

    # -- persistence (a cluster with a data_dir: see share_store) ----------------------
    async def start(self) -> None:
        self.persistence.start()

    async def stop(self) -> None:
        self.persistence.stop()

    def persist(self, group_id: str | None) -> None:
        """Journal what changed in the group (before answering a request that changed it)."""
        self.persistence.persist(group_id)

    # -- configs -----------------------------------------------------------------
    def config(self, group_id: str, name: str) -> str:
        """The group's config, else the broker's (``group.share.*``), else Kafka's default."""
        value, _ = group_config_value(
            name, self.state.group_configs.get(group_id, {}), self.state.config.extra
        )
        return value

    def _int_config(self, group_id: str, name: str) -> int:
        return int(self.config(group_id, name))

    def _group(self, group_id: str) -> _Group:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = _Group(group_id)
        return g

    # -- membership ----------------------------------------------------------------
    def heartbeat(self, req: ShareGroupHeartbeatRequest, now: float) -> ShareGroupHeartbeatResponse:
        interval = self._int_config(req.group_id, "share.heartbeat.interval.ms") if req.group_id else 0
        if not req.group_id:
            return _hb_error(INVALID_REQUEST, "GroupId can't be empty.")
        if not req.member_id:
            return _hb_error(INVALID_REQUEST, "MemberId can't be empty.")
        known = self.groups.get(req.group_id)
        if (
            req.member_epoch == 0
            and not req.subscribed_topic_names
            and (known is None or req.member_id not in known.members)
        ):
            return _hb_error(INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        if req.member_epoch != 0 and known is None:
            return _hb_error(GROUP_ID_NOT_FOUND, f"share group {req.group_id} does not exist")
        g = self._group(req.group_id)
        self._expire_members(g, now)
        if req.member_epoch == -1:
            if g.members.pop(req.member_id, None) is None:
                return _hb_error(UNKNOWN_MEMBER_ID, f"member {req.member_id} is not in group {req.group_id}")
            g.epoch += 1
            self._end_member(g, req.member_id)
            return ShareGroupHeartbeatResponse(member_id=req.member_id, member_epoch=-1)
        m = g.members.get(req.member_id)
        if req.member_epoch == 0:
            if m is None:
                m = g.members[req.member_id] = _Member(
                    req.member_id, 0, list(req.subscribed_topic_names or []), now
                )
                g.epoch += 1
        elif m is None:
            return _hb_error(UNKNOWN_MEMBER_ID, f"member {req.member_id} is not in group {req.group_id}")
        elif req.member_epoch != m.epoch:
            return _hb_error(FENCED_MEMBER_EPOCH, f"member epoch {req.member_epoch} != {m.epoch}")
        m.last_seen = now
        if req.subscribed_topic_names is not None and req.subscribed_topic_names != m.topics:
            m.topics = list(req.subscribed_topic_names)
            g.epoch += 1
        assignment = self._assignment(m.topics)
        # A full heartbeat (subscription given) is answered with the whole assignment, like Kafka.
        send = req.subscribed_topic_names is not None or assignment != m.assignment
        if assignment != m.assignment:
            g.epoch += 1
            m.assignment = assignment
        if send:
            m.epoch = max(g.epoch, 1)
        return ShareGroupHeartbeatResponse(
            member_id=m.member_id,
            member_epoch=m.epoch,
            heartbeat_interval_ms=interval,
            assignment=ShareGroupHeartbeatResponse.Assignment(
                topic_partitions=[
                    ShareGroupHeartbeatResponse.TopicPartitions(topic_id=tid, partitions=ps)
                    for tid, ps in sorted(assignment.items())
                ]
            )
            if send
            else None,
        )

    def _assignment(self, topics: list[str]) -> dict[uuid.UUID, list[int]]:
        # The simple share assignor: every member may consume every partition.
        out = {}
        for name in topics:
            t = self.state.get_topic(name)
            if t is not None:
                out[t.topic_id] = [p.index for p in t.partitions]
        return out

    def _expire_members(self, g: _Group, now: float) -> None:
        timeout = self._int_config(g.group_id, "share.session.timeout.ms") / 1000
        for mid, m in list(g.members.items()):
            if now - m.last_seen > timeout:
                del g.members[mid]
                g.epoch += 1
                self._end_member(g, mid)

    def _end_member(self, g: _Group, member_id: str) -> None:
        self.sessions.pop((g.group_id, member_id), None)
        limit = self._int_config(g.group_id, "share.delivery.count.limit")
        for sp in g.partitions.values():
            sp.release_member(member_id, limit)
        self._offer(g)

    def _offer(self, g: _Group) -> None:
        """Records were acknowledged or released: the fetches already waiting get the first
        go at them, oldest first (Kafka completes its delayed share fetches on the same
        events), before the request that freed them acquires anything. Without this a
        member that acknowledges the oldest records takes the room it frees at once, and
        with a full in-flight window the same few members keep every record."""
        for w in list(g.waiting):
            if not w.done.done() and w.try_acquire():
                w.done.set_result(None)

    def connection_closed(self, connection_id: str) -> None:
        """Kafka releases a member's acquired records when its share session's connection closes."""
        for (group_id, member_id), s in list(self.sessions.items()):
            if s.connection_id == connection_id:
                del self.sessions[(group_id, member_id)]
                g = self.groups.get(group_id)
                if g is not None:
                    limit = self._int_config(group_id, "share.delivery.count.limit")
                    for sp in g.partitions.values():
                        sp.release_member(member_id, limit)
                    self._offer(g)
                    self.persist(group_id)

    # -- share-partitions -------------------------------------------------------------
    def _partition(self, g: _Group, tid: uuid.UUID, index: int) -> SharePartitionState | None:
        topic = self.state.topics_by_id.get(tid)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        sp = g.partitions.get((tid, index))
        plog = topic.partitions[index].log
        if sp is None:
            start = self._reset_offset(g.group_id, plog)
            sp = g.partitions[(tid, index)] = SharePartitionState(start)
        sp.skip_to(plog.log_start_offset)
        return sp

    def _reset_offset(self, group_id: str, plog: PartitionLog) -> int:
        """Where a share-partition starts: share.auto.offset.reset (earliest, latest or
        by_duration:<ISO-8601>, the first record at or after now minus the duration)."""
        reset = self.config(group_id, "share.auto.offset.reset")
        if reset == "earliest":
            return plog.log_start_offset
        if reset.startswith("by_duration:"):
            ms = duration_ms(reset.removeprefix("by_duration:")) or 0
            found = plog.offset_for_timestamp(int(time.time() * 1000) - ms)
            return plog.high_watermark if found is None else found[0]
        return plog.high_watermark

    def _acknowledge(
        self,
        g: _Group,
        member_id: str,
        tid: uuid.UUID,
        index: int,
        batches: list[tuple[int, int, list[int]]],
        renew_ack: bool,
    ) -> tuple[int, str | None]:
        if not renew_ack and any(RENEW in types for _, _, types in batches):
            # Kafka 4.4: RENEW only in a request flagged IsRenewAck.
            return INVALID_REQUEST, "RENEW acknowledgements need IsRenewAck"
        sp = self._partition(g, tid, index)
        if sp is None:
            return UNKNOWN_TOPIC_ID, None
        limit = self._int_config(g.group_id, "share.delivery.count.limit")
        now_ms = time.monotonic() * 1000
        sp.expire_locks(now_ms, limit)
        lock_ms = self._int_config(g.group_id, "share.record.lock.duration.ms")
        code, msg = NONE, None
        for first, last, types in batches:
            try:
                sp.acknowledge(member_id, first, last, types, limit, now_ms=now_ms, lock_ms=lock_ms)
            except InvalidAcknowledgement as e:
                code, msg = (INVALID_REQUEST if e.bad_request else INVALID_RECORD_STATE), str(e)
        return code, msg

    def _session(
        self, group_id: str, member_id: str, epoch: int, connection_id: str
    ) -> tuple[_Session | None, int, str | None]:
        key = (group_id, member_id)
        s = self.sessions.get(key)
        if epoch == INITIAL_EPOCH:
            if s is not None:
                # A new session replaces the member's old one; what the old one held goes back.
                self._end_member(self._group(group_id), member_id)
            s = self.sessions[key] = _Session(1, connection_id)
            return s, NONE, None
        if s is None:
            return None, SHARE_SESSION_NOT_FOUND, f"no share session for member {member_id}"
        if epoch == FINAL_EPOCH:
            return s, NONE, None
        if epoch != s.epoch:
            return None, INVALID_SHARE_SESSION_EPOCH, f"share session epoch {epoch} != {s.epoch}"
        s.epoch = s.epoch + 1 if s.epoch < 2**31 - 1 else 1
        s.connection_id = connection_id
        return s, NONE, None

    async def share_fetch(self, ctx: RequestContext, req: ShareFetchRequest) -> ShareFetchResponse:
        if not req.group_id or not req.member_id:
            return ShareFetchResponse(
                error_code=INVALID_REQUEST, error_message="group id and member id are required"
            )
        group_id, member_id = req.group_id, req.member_id
        epoch = req.share_session_epoch
        if epoch == INITIAL_EPOCH and any(
            p.acknowledgement_batches for t in req.topics for p in t.partitions
        ):
            return ShareFetchResponse(
                error_code=INVALID_REQUEST, error_message="acknowledgements in a ShareFetch opening a session"
            )
        if req.is_renew_ack and (req.max_wait_ms or req.min_bytes or req.max_bytes or req.max_records):
            # A ShareFetch renewing locks only acknowledges (Kafka 4.4 refuses one that would fetch).
            return ShareFetchResponse(
                error_code=INVALID_REQUEST,
                error_message="a ShareFetch with IsRenewAck must have MaxWaitMs, MinBytes, MaxBytes and MaxRecords 0",
            )
        s, code, msg = self._session(group_id, member_id, epoch, ctx.connection_id)
        if s is None:
            return ShareFetchResponse(error_code=code, error_message=msg)
        g = self._group(group_id)
        lock_ms = self._int_config(group_id, "share.record.lock.duration.ms")
        limit = self._int_config(group_id, "share.delivery.count.limit")
        results: dict[tuple[uuid.UUID, int], ShareFetchResponse.PartitionData] = {}
        for t in req.topics:
            for p in t.partitions:
                key = (t.topic_id, p.partition_index)
                if p.acknowledgement_batches:
                    # Kafka answers for a partition only with records, an error or acknowledgement results.
                    pd = results[key] = ShareFetchResponse.PartitionData(partition_index=p.partition_index)
                    pd.acknowledge_error_code, pd.acknowledge_error_message = self._acknowledge(
                        g,
                        member_id,
                        t.topic_id,
                        p.partition_index,
                        [
                            (b.first_offset, b.last_offset, list(b.acknowledge_types))
                            for b in p.acknowledgement_batches
                        ],
                        req.is_renew_ack,
                    )
                s.partitions.add(key)
        for ft in req.forgotten_topics_data:
            for i in ft.partitions:
                s.partitions.discard((ft.topic_id, i))
        if epoch == FINAL_EPOCH:
            self.sessions.pop((group_id, member_id), None)
            for sp in g.partitions.values():
                sp.release_member(member_id, limit)
            self._offer(g)
            return _fetch_response(results, lock_ms)
        if req.is_renew_ack:
            self._offer(g)
            return _fetch_response(results, lock_ms)  # acknowledgements only, nothing fetched
        if results:
            self._offer(g)  # what these acknowledgements freed goes to earlier fetches first
        max_records = req.max_records if req.max_records > 0 else 500
        mode = req.share_acquire_mode
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(req.max_wait_ms, 0) / 1000
        if self._acquire(g, s, member_id, results, max_records, mode, lock_ms, limit):
            return _fetch_response(results, lock_ms)
        waiting = _WaitingFetch(
            # Never for a session that ended meanwhile: the records would sit locked.
            lambda: (
                self.sessions.get((group_id, member_id)) is s
                and self._acquire(g, s, member_id, results, max_records, mode, lock_ms, limit)
            ),
            loop.create_future(),
        )
        g.waiting.append(waiting)
        try:
            # Woken with records by _offer; new records and expired locks are polled for.
            while not waiting.done.done():
                remaining = deadline - loop.time()
                if remaining <= 0 or self.sessions.get((group_id, member_id)) is not s:
                    break
                await asyncio.wait([waiting.done], timeout=min(_POLL_S, remaining))
                if not waiting.done.done() and waiting.try_acquire():
                    break
        finally:
            g.waiting.remove(waiting)
            if not waiting.done.done():
                waiting.done.cancel()
        return _fetch_response(results, lock_ms)

    def _acquire(
        self,
        g: _Group,
        s: _Session,
        member_id: str,
        results: dict[tuple[uuid.UUID, int], ShareFetchResponse.PartitionData],
        max_records: int,
        mode: int,
        lock_ms: int,
        limit: int,
    ) -> bool:
        now_ms = time.monotonic() * 1000
        got = False
        for tid, index in sorted(s.partitions):
            if max_records <= 0:
                break
            sp = self._partition(g, tid, index)
            if sp is None:
                results[(tid, index)] = ShareFetchResponse.PartitionData(
                    partition_index=index, error_code=UNKNOWN_TOPIC_ID
                )
                continue
            topic = self.state.topics_by_id[tid]
            part = topic.partitions[index]
            plog = part.log
            sp.expire_locks(now_ms, limit)
            # read_committed: nothing at or past the last stable offset (open transactions).
            committed = self.config(g.group_id, "share.isolation.level") == "read_committed"
            hwm = plog.last_stable_offset if committed else plog.high_watermark
            batch_end = None
            if mode == 0 and sp.next_offset < hwm:
                # Batch-optimized: new records are acquired to the end of the batch holding the last one.
                last_wanted = min(sp.next_offset + max_records, hwm) - 1
                _, _, batch_end = plog.read(last_wanted, 1, hwm, min_one=True)
            ranges = sp.acquire(
                member_id,
                high_watermark=hwm,
                max_records=max_records,
                now_ms=now_ms,
                lock_ms=lock_ms,
                max_in_flight=self._int_config(g.group_id, "share.partition.max.record.locks"),
                batch_end=batch_end,
                # Records of aborted transactions are archived, never delivered (as Kafka).
                aborted=aborted_ranges(plog, sp.next_offset, hwm) if committed else (),
            )
            if not ranges:
                continue
            got = True
            max_records -= sum(r.last_offset - r.first_offset + 1 for r in ranges)
            first, last = ranges[0].first_offset, ranges[-1].last_offset
            parts, _, _ = plog.read(first, 2**31 - 1, last + 1, min_one=True)
            pd = results.get((tid, index)) or ShareFetchResponse.PartitionData(partition_index=index)
            pd.records = b"".join(bytes(x) for x in parts)
            pd.acquired_records = [
                ShareFetchResponse.AcquiredRecords(
                    first_offset=r.first_offset, last_offset=r.last_offset, delivery_count=r.delivery_count
                )
                for r in ranges
            ]
            pd.current_leader = ShareFetchResponse.LeaderIdAndEpoch(
                leader_id=part.leader_id, leader_epoch=part.leader_epoch
            )
            results[(tid, index)] = pd
        return got

    async def share_acknowledge(
        self, ctx: RequestContext, req: ShareAcknowledgeRequest
    ) -> ShareAcknowledgeResponse:
        if not req.group_id or not req.member_id:
            return ShareAcknowledgeResponse(
                error_code=INVALID_REQUEST, error_message="group id and member id are required"
            )
        group_id, member_id = req.group_id, req.member_id
        if req.share_session_epoch == INITIAL_EPOCH:
            return ShareAcknowledgeResponse(
                error_code=INVALID_SHARE_SESSION_EPOCH,
                error_message="ShareAcknowledge cannot open a share session",
            )
        s, code, msg = self._session(group_id, member_id, req.share_session_epoch, ctx.connection_id)
        if s is None:
            return ShareAcknowledgeResponse(error_code=code, error_message=msg)
        g = self._group(group_id)
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                code, msg = self._acknowledge(
                    g,
                    member_id,
                    t.topic_id,
                    p.partition_index,
                    [
                        (b.first_offset, b.last_offset, list(b.acknowledge_types))
                        for b in p.acknowledgement_batches
                    ],
                    req.is_renew_ack,
                )
                parts.append(
                    ShareAcknowledgeResponse.PartitionData(
                        partition_index=p.partition_index, error_code=code, error_message=msg
                    )
                )
            topics.append(
                ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=parts)
            )
        if req.share_session_epoch == FINAL_EPOCH:
            self.sessions.pop((group_id, member_id), None)
            limit = self._int_config(group_id, "share.delivery.count.limit")
            for sp in g.partitions.values():
                sp.release_member(member_id, limit)
        self._offer(g)
        return ShareAcknowledgeResponse(
            acquisition_lock_timeout_ms=self._int_config(group_id, "share.record.lock.duration.ms"),
            responses=topics,
        )


def _hb_error(code: int, message: str) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(error_code=code, error_message=message)


def _fetch_response(
    results: dict[tuple[uuid.UUID, int], ShareFetchResponse.PartitionData], lock_ms: int
) -> ShareFetchResponse:
    by_topic: dict[uuid.UUID, list[ShareFetchResponse.PartitionData]] = {}
    for (tid, _), pd in sorted(results.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if pd.records is None:
            # Records is nullable in ShareFetch v0 only: Kafka's clients refuse a null from v1
            # on ("non-nullable field records was serialized as null"), so none is empty.
            pd.records = b""
        by_topic.setdefault(tid, []).append(pd)
    return ShareFetchResponse(
        acquisition_lock_timeout_ms=lock_ms,
        responses=[
            ShareFetchResponse.ShareFetchableTopicResponse(topic_id=tid, partitions=ps)
            for tid, ps in by_topic.items()
        ],
    )


def get_share_groups(state: ClusterState) -> ShareGroups:
    sg = state.extensions.get("share_groups")
    if sg is None:
        sg = state.extensions["share_groups"] = ShareGroups(state)
        state.services["share_groups"] = sg
        state.connection_listeners.append(sg.connection_closed)
    assert isinstance(sg, ShareGroups)
    return sg


def register_share_handlers(registry: HandlerRegistry, state: ClusterState) -> None:
    sg = get_share_groups(state)

    async def heartbeat(ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, ShareGroupHeartbeatRequest)
        resp = sg.heartbeat(req, time.monotonic())
        sg.persist(req.group_id)  # members that timed out released their records
        return resp

    async def share_fetch(ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, ShareFetchRequest)
        resp = await sg.share_fetch(ctx, req)
        sg.persist(req.group_id)
        return resp

    async def share_acknowledge(ctx: RequestContext, req: Request) -> Response:
        assert isinstance(req, ShareAcknowledgeRequest)
        resp = await sg.share_acknowledge(ctx, req)
        sg.persist(req.group_id)
        return resp

    registry.register(ShareGroupHeartbeatRequest.API_KEY, heartbeat, 1, 1)
    registry.register(ShareFetchRequest.API_KEY, share_fetch, 1, 2)
    registry.register(ShareAcknowledgeRequest.API_KEY, share_acknowledge, 1, 2)
