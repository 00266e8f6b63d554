"""Committed offsets of groups (the store itself is ``broker.committed_offsets``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from aiokafka_lite.broker.committed_offsets import CommittedOffset
from aiokafka_lite.broker.groups.classic_group import Group, GroupState
from aiokafka_lite.broker.groups.codes import (
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    NON_EMPTY_GROUP,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSTABLE_OFFSET_COMMIT,
    UNSUPPORTED_VERSION,
)
from aiokafka_lite.broker.groups.consumer_group import ConsumerGroup
from aiokafka_lite.broker.groups.mixed import MixedGroupCoordinator
from aiokafka_lite.core.structs import TopicPartition

log = logging.getLogger("aiokafka_lite.broker.groups")


class OffsetCoordinator(MixedGroupCoordinator):
    """Committed offsets of groups: commit, transactional commit, fetch, delete."""

    # -- offsets ---------------------------------------------------------------------------
    @staticmethod
    def _validate_consumer_group_commit(
        group: ConsumerGroup,
        member_epoch: int,
        member_id: str,
        instance_id: str | None,
        transactional: bool,
        api_version: int,
    ) -> int:
        """Kafka's checks of a commit to a consumer group (KIP-848): the member epoch."""
        if member_epoch < 0 and not group.members:
            return NONE  # admin or manual commits to an empty group
        if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            return NONE  # TxnOffsetCommit without group metadata (before v3, or a plain producer)
        member = group.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        classic = member.classic is not None
        if not transactional and not classic and api_version < 9:
            # Members of the new protocol commit with OffsetCommit v9+ (member epochs).
            return UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            # Classic members commit with their generation; TxnOffsetCommit has no
            # STALE_MEMBER_EPOCH either: both get ILLEGAL_GENERATION, as on Kafka.
            return ILLEGAL_GENERATION if transactional or classic else STALE_MEMBER_EPOCH
        return NONE

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9+ from a consumer group member: its epoch must be current."""
        group = self.consumer_groups.get(group_id)
        if group is None or member_epoch == -1:
            return NONE
        member = group.members.get(member_id or "")
        if member is None:
            return UNKNOWN_MEMBER_ID
        return NONE if member_epoch == member.member_epoch else STALE_MEMBER_EPOCH

    def _validate_offset_commit(
        self, group: Group, generation_id: int, member_id: str, instance_id: str | None, transactional: bool
    ) -> int:
        if group.state is GroupState.DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            if group.is_static_fenced(instance_id, member_id):
                return FENCED_INSTANCE_ID
            if member_id != "" and member_id not in group.members:
                return UNKNOWN_MEMBER_ID
            if generation_id >= 0 and generation_id != group.generation_id:
                return ILLEGAL_GENERATION
            return NONE
        if not transactional and group.state is not GroupState.EMPTY:
            # Only members may commit to an active group (simple commits need an empty one).
            return UNKNOWN_MEMBER_ID
        return NONE

    def _partition_errors(
        self, offsets: dict[TopicPartition, CommittedOffset]
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, CommittedOffset]]:
        """Per-partition pre-checks: unknown partitions, oversized metadata."""
        errs: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, CommittedOffset] = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, c in offsets.items():
            if self.cluster.get_partition(tp.topic, tp.partition) is None:
                errs[tp] = UNKNOWN_TOPIC_OR_PARTITION
            elif len(c.metadata.encode("utf-8")) > limit:
                errs[tp] = OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = c
        return errs, valid

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, CommittedOffset],
        *,
        unknown_group_error: int = ILLEGAL_GENERATION,
        api_version: int = 9,
    ) -> dict[TopicPartition, int]:
        """OffsetCommit after the coordinator check; per-partition error codes."""
        errs, valid = self._partition_errors(offsets)
        cgroup = self.consumer_groups.get(group_id)
        if cgroup is not None:
            err = self._validate_consumer_group_commit(
                cgroup, generation_id, member_id, group_instance_id, False, api_version
            )
            if err:
                return {tp: errs.get(tp, err) for tp in offsets}
            self.offsets.commit(group_id, valid)
            return {tp: errs.get(tp, NONE) for tp in offsets}
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return {tp: unknown_group_error if tp not in errs else errs[tp] for tp in offsets}
            group = self._get_or_create(group_id)
        err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id, False)
        if err == NONE and group.state is GroupState.COMPLETING_REBALANCE:
            err = REBALANCE_IN_PROGRESS
        if err:
            return {tp: errs.get(tp, err) for tp in offsets}
        member = group.members.get(member_id)
        if member is not None and group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self._heartbeat(group, member)
        self.offsets.commit(group_id, valid)
        return {tp: errs.get(tp, NONE) for tp in offsets}

    def txn_commit_offsets(
        self,
        *,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, CommittedOffset],
        version: int = 3,
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: offsets stay pending until the producer's transaction ends.

        v5+ (Transactions V2) adds the group to the transaction itself (no
        AddOffsetsToTxn); v4 calls a group outside the transaction TRANSACTION_ABORTABLE.
        """
        errs, valid = self._partition_errors(offsets)
        cgroup = self.consumer_groups.get(group_id)
        if cgroup is not None:
            err = self._validate_consumer_group_commit(
                cgroup, generation_id, member_id, group_instance_id, True, 9
            )
        else:
            group = self._get_or_create(group_id)
            err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id, True)
        if err == NONE:
            txn = self._txn_coordinator()
            if txn is not None:
                err = txn.check_offset_commit(
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    group_id,
                    implicit_add=version >= 5,
                    abortable=version == 4,
                )
        if err:
            return {tp: errs.get(tp, err) for tp in offsets}
        self.offsets.add_pending(group_id, producer_id, valid)
        return {tp: errs.get(tp, NONE) for tp in offsets}

    def complete_txn(self, producer_id: int, group_ids: Iterable[str], commit: bool) -> None:
        """Called by the transaction coordinator when a transaction with offsets ends."""
        for group_id in group_ids:
            self.offsets.complete_txn(group_id, producer_id, commit)

    def fetch_offsets(
        self, group_id: str, tps: Sequence[TopicPartition] | None, require_stable: bool
    ) -> dict[TopicPartition, tuple[CommittedOffset | None, int]]:
        """OffsetFetch after the coordinator check: (offset or None, error) per partition."""
        group = self.groups.get(group_id)
        if group_id not in self.consumer_groups and (group is None or group.state is GroupState.DEAD):
            return {tp: (None, NONE) for tp in tps or ()}
        wanted = list(tps) if tps is not None else sorted(self.offsets.all(group_id))
        out: dict[TopicPartition, tuple[CommittedOffset | None, int]] = {}
        for tp in wanted:
            if require_stable and self.offsets.is_pending(group_id, tp):
                out[tp] = (None, UNSTABLE_OFFSET_COMMIT)
            else:
                out[tp] = (self.offsets.get(group_id, tp), NONE)
        return out

    def delete_offsets(
        self, group_id: str, tps: Sequence[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete after the coordinator check: (group error, per-partition errors)."""
        out: dict[TopicPartition, int] = {}
        cgroup = self.consumer_groups.get(group_id)
        if cgroup is not None:
            in_use: set[str] = set()
            for m in cgroup.members.values():
                in_use |= self._subscribed_topics(cgroup, m)
            for tp in tps:
                out[tp] = GROUP_SUBSCRIBED_TO_TOPIC if tp.topic in in_use else NONE
            self.offsets.delete(group_id, [tp for tp, e in out.items() if e == NONE])
            return NONE, out
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return GROUP_ID_NOT_FOUND, {}
        eligible: list[TopicPartition] = []
        if group.state is GroupState.EMPTY:
            eligible = list(tps)
        elif group.protocol_type == "consumer":
            subscribed = group.subscribed_topics()
            for tp in tps:
                if subscribed is None or tp.topic in subscribed:
                    out[tp] = GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return NON_EMPTY_GROUP, {}
        self.offsets.delete(group_id, eligible)
        for tp in eligible:
            out[tp] = NONE
        return NONE, out
