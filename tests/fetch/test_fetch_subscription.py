"""SubscriptionState: modes, assignment, positions, pause and listener notifications."""

from __future__ import annotations

import pytest

from aiokafka_lite.consume.subscription import OffsetAndMetadata, SubscriptionState
from aiokafka_lite.core.errors import IllegalStateError
from aiokafka_lite.core.structs import TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


class Recorder:
    def __init__(self) -> None:
        self.removed: list[set[TopicPartition]] = []
        self.positions: list[TopicPartition] = []
        self.changed = 0

    def on_partitions_removed(self, tps: set[TopicPartition]) -> None:
        self.removed.append(set(tps))

    def on_position_changed(self, tp: TopicPartition) -> None:
        self.positions.append(tp)

    def on_state_changed(self) -> None:
        self.changed += 1


def test_modes_are_exclusive() -> None:
    s = SubscriptionState()
    s.subscribe(topics=["a"])
    with pytest.raises(IllegalStateError):
        s.assign_manually([TP0])
    s.unsubscribe()
    s.assign_manually([TP0])
    with pytest.raises(IllegalStateError):
        s.subscribe(topics=["a"])
    with pytest.raises(IllegalStateError):
        SubscriptionState().subscribe(topics=["a"], pattern="b.*")
    with pytest.raises(IllegalStateError):
        SubscriptionState().subscribe()
    with pytest.raises(IllegalStateError):
        SubscriptionState().subscribe(topics=["a"], exclude="x")


def test_pattern_with_exclude_and_updates() -> None:
    s = SubscriptionState()
    s.subscribe(pattern=r"ev-.*", exclude=r"ev-internal.*")
    assert s.matches("ev-1") and not s.matches("ev-internal-1") and not s.matches("xev-1")
    v = s.subscription_version
    assert s.update_pattern_matches(["ev-1", "ev-internal-2", "other"])
    assert s.subscribed_topics == {"ev-1"}
    assert s.subscription_version == v + 1
    assert not s.update_pattern_matches(["ev-1", "other"])
    assert s.update_pattern_matches(["ev-1", "ev-2"])
    assert s.subscribed_topics == {"ev-1", "ev-2"}


def test_group_assign_revoke_notifies_before_removal() -> None:
    s = SubscriptionState()
    rec = Recorder()
    seen_assigned: list[bool] = []

    class Checker(Recorder):
        def on_partitions_removed(self, tps: set[TopicPartition]) -> None:
            seen_assigned.append(all(s.is_assigned(tp) for tp in tps))

    s.add_listener(rec)
    s.add_listener(Checker())
    s.subscribe(topics=["t"])
    s.assign_from_group([TP0])
    s.assign_from_group([TP1])  # cooperative: adds
    assert s.assignment() == {TP0, TP1}
    assert s.missing_positions() == {TP0, TP1}
    s.seek(TP0, 5)
    s.revoke([TP0])
    assert rec.removed == [{TP0}]
    assert seen_assigned == [True]
    assert s.assignment() == {TP1}


def test_positions_and_consumed_offsets() -> None:
    s = SubscriptionState()
    rec = Recorder()
    s.add_listener(rec)
    s.assign_manually([TP0, TP1])
    assert s.position(TP0) is None and s.needs_reset(TP0)
    s.seek(TP0, 10)
    assert rec.positions == [TP0]
    assert s.position(TP0) == 10
    assert not s.state(TP0).awaiting_validation
    s.seek(TP1, 3, leader_epoch=7)
    assert s.state(TP1).awaiting_validation
    assert not s.is_fetchable(TP1)
    s.complete_validation(TP1)
    assert s.is_fetchable(TP1)
    assert s.consumed_offsets() == {TP0: OffsetAndMetadata(10), TP1: OffsetAndMetadata(3, "", 7)}
    s.request_reset(TP0)
    assert s.position(TP0) is None and s.state(TP0).reset_requested
    assert s.missing_positions() == {TP0}
    with pytest.raises(ValueError):
        s.seek(TP1, -1)
    with pytest.raises(TypeError):
        s.seek(TP1, "3")  # type: ignore[arg-type]
    with pytest.raises(IllegalStateError):
        s.position(TopicPartition("other", 0))


def test_pause_resume() -> None:
    s = SubscriptionState()
    s.assign_manually([TP0, TP1])
    s.seek(TP0, 0)
    s.seek(TP1, 0)
    s.pause(TP0)
    assert s.paused() == {TP0}
    assert not s.is_fetchable(TP0) and s.is_fetchable(TP1)
    s.resume(TP0)
    assert s.paused() == set()
    with pytest.raises(IllegalStateError):
        s.pause(TopicPartition("x", 0))


def test_manual_reassign_keeps_positions_of_kept_partitions() -> None:
    s = SubscriptionState()
    rec = Recorder()
    s.add_listener(rec)
    s.assign_manually([TP0, TP1])
    s.seek(TP0, 4)
    s.assign_manually([TP0, TopicPartition("t", 2)])
    assert s.position(TP0) == 4
    assert rec.removed == [{TP1}]
    with pytest.raises(TypeError):
        s.assign_manually([("t", "0")])  # type: ignore[list-item]


def test_subscribe_change_drops_partitions_of_old_topics() -> None:
    s = SubscriptionState()
    rec = Recorder()
    s.add_listener(rec)
    s.subscribe(topics=["t", "u"])
    s.assign_from_group([TP0, TopicPartition("u", 0)])
    s.subscribe(topics=["u"])
    assert s.assignment() == {TopicPartition("u", 0)}
    assert rec.removed == [{TP0}]
