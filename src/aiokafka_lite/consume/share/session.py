"""Share sessions (KIP-932): the epoch rules of ShareFetch and ShareAcknowledge, sans-I/O.

A member holds one share session per broker it fetches from. Both requests carry the
session's epoch:

* ``0`` opens the session: a ShareFetch naming every partition to fetch. It may not
  carry acknowledgements (there is no session to tie them to yet), and a
  ShareAcknowledge may never open a session;
* then ``1, 2, ...``: each successful request moves the epoch on by one (after
  ``2**31 - 1`` comes 1 again). ShareFetch is incremental: it names the partitions
  added to the session, those with acknowledgements, and ``ForgottenTopicsData`` for
  the ones removed;
* ``-1`` closes the session; sent as a ShareAcknowledge carrying the last
  acknowledgements, on close.

``SHARE_SESSION_NOT_FOUND`` and ``INVALID_SHARE_SESSION_EPOCH`` (the broker evicted the
session, or a request was lost so the epochs disagree) and a lost connection reset the
session: the next ShareFetch opens a new one. The member's acquired records survive
that (locks belong to the member, not to the session).

At most one request per session is in flight: the driver waits for each answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from aiokafka_lite.consume.share.acks import AckBatch
from aiokafka_lite.consume.share.membership import TopicIdPartition
from aiokafka_lite.wire.messages import ShareAcknowledgeRequest, ShareFetchRequest

__all__ = [
    "CLOSE_EPOCH",
    "INITIAL_EPOCH",
    "SESSION_ERRORS",
    "FetchParams",
    "ShareSession",
    "next_epoch",
]

INITIAL_EPOCH: Final = 0
CLOSE_EPOCH: Final = -1
_MAX_EPOCH: Final = 2**31 - 1
SHARE_SESSION_NOT_FOUND: Final = 122
INVALID_SHARE_SESSION_EPOCH: Final = 123
SESSION_ERRORS: Final = frozenset({SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH})

AcksByPartition = Mapping[TopicIdPartition, list[AckBatch]]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: 0 -> 1 ... 2**31-1 -> 1 (0 and -1 are reserved)."""
    return 1 if epoch >= _MAX_EPOCH or epoch < 0 else epoch + 1


@dataclass(frozen=True, slots=True)
class FetchParams:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int
    batch_size: int
    acquire_mode: int = 0  # 0 batch-optimized, 1 record-limit (v2+)


@dataclass(eq=False)
class ShareSession:
    """The client's side of one broker's share session."""

    group_id: str
    member_id: str
    node_id: int
    epoch: int = INITIAL_EPOCH
    #: Partitions the broker has in the session (as of the last successful request).
    partitions: set[TopicIdPartition] = field(default_factory=set)
    closed: bool = False
    # What the request in flight does to the session, applied on success.
    _pending_partitions: set[TopicIdPartition] | None = None

    @property
    def open(self) -> bool:
        return self.epoch > 0

    def fetch_request(
        self, wanted: Iterable[TopicIdPartition], acks: AcksByPartition, params: FetchParams
    ) -> ShareFetchRequest:
        """A ShareFetch for ``wanted`` partitions carrying ``acks`` (only for partitions in
        ``wanted``, and only when the session is open: the caller checks ``open``)."""
        if self.closed:
            raise RuntimeError("share session is closed")
        want = set(wanted)
        if acks and not self.open:
            raise ValueError("a ShareFetch opening a share session cannot carry acknowledgements")
        stray = set(acks) - want
        if stray:
            raise ValueError(f"acknowledgements for partitions not fetched: {sorted(stray)}")
        if self.open:
            names = (want - self.partitions) | set(acks)
            forgotten = self.partitions - want
        else:
            names = want
            forgotten = set()
        self._pending_partitions = want
        return ShareFetchRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            share_session_epoch=self.epoch,
            max_wait_ms=params.max_wait_ms,
            min_bytes=params.min_bytes,
            max_bytes=params.max_bytes,
            max_records=params.max_records,
            batch_size=params.batch_size,
            share_acquire_mode=params.acquire_mode,
            topics=_fetch_topics(names, acks),
            forgotten_topics_data=[
                ShareFetchRequest.ForgottenTopic(topic_id=tid, partitions=sorted(ps))
                for tid, ps in _by_topic(forgotten).items()
            ],
        )

    def acknowledge_request(self, acks: AcksByPartition, *, close: bool = False) -> ShareAcknowledgeRequest:
        """A ShareAcknowledge in the open session; ``close`` makes it the session's last."""
        if not self.open:
            raise ValueError("a ShareAcknowledge needs an open share session (send a ShareFetch first)")
        self._pending_partitions = None
        return ShareAcknowledgeRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            share_session_epoch=CLOSE_EPOCH if close else self.epoch,
            # KIP-1222: the broker takes RENEW only in a request that says it carries some.
            is_renew_ack=any(4 in b.types for batches in acks.values() for b in batches),
            topics=[
                ShareAcknowledgeRequest.AcknowledgeTopic(
                    topic_id=tid,
                    partitions=[
                        ShareAcknowledgeRequest.AcknowledgePartition(
                            partition_index=p, acknowledgement_batches=_ack_batches(acks[(tid, p)])
                        )
                        for p in sorted(ps)
                    ],
                )
                for tid, ps in _by_topic(acks).items()
            ],
        )

    def succeeded(self, *, closed: bool = False) -> None:
        """The request in flight was answered without a top-level error."""
        if closed:
            self.closed = True
            self.epoch = CLOSE_EPOCH
            self.partitions = set()
            return
        if self._pending_partitions is not None:
            self.partitions = self._pending_partitions
            self._pending_partitions = None
        self.epoch = next_epoch(self.epoch)

    def reset(self) -> None:
        """Session errors, lost connections: the next ShareFetch opens a new session."""
        self.epoch = INITIAL_EPOCH
        self.partitions = set()
        self._pending_partitions = None


def _by_topic(tps: Iterable[TopicIdPartition]) -> dict[uuid.UUID, list[int]]:
    out: dict[uuid.UUID, list[int]] = {}
    for tid, p in sorted(tps):
        out.setdefault(tid, []).append(p)
    return out


def _fetch_batches(batches: list[AckBatch]) -> list[ShareFetchRequest.AcknowledgementBatch]:
    return [
        ShareFetchRequest.AcknowledgementBatch(
            first_offset=b.first_offset, last_offset=b.last_offset, acknowledge_types=list(b.types)
        )
        for b in batches
    ]


def _ack_batches(batches: list[AckBatch]) -> list[ShareAcknowledgeRequest.AcknowledgementBatch]:
    return [
        ShareAcknowledgeRequest.AcknowledgementBatch(
            first_offset=b.first_offset, last_offset=b.last_offset, acknowledge_types=list(b.types)
        )
        for b in batches
    ]


def _fetch_topics(names: set[TopicIdPartition], acks: AcksByPartition) -> list[ShareFetchRequest.FetchTopic]:
    return [
        ShareFetchRequest.FetchTopic(
            topic_id=tid,
            partitions=[
                ShareFetchRequest.FetchPartition(
                    partition_index=p, acknowledgement_batches=_fetch_batches(acks.get((tid, p), []))
                )
                for p in ps
            ],
        )
        for tid, ps in _by_topic(names).items()
    ]
