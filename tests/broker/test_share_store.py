"""The share-state journal (broker.share_store): replay over the snapshot, torn tails,
compaction."""

from __future__ import annotations

from pathlib import Path

from aiokafka_lite.broker.share import store as share_store
from aiokafka_lite.broker.share.store import SavedShareState, ShareStateStore

A = {"start": 0, "next": 2, "runs": [[0, 1, "available", 1]]}
B = {"start": 2, "next": 2, "runs": []}


def test_journal_replays_over_the_snapshot_last_entry_wins(tmp_path: Path) -> None:
    store = ShareStateStore(tmp_path)
    store.compact(SavedShareState({"g": {"share.auto.offset.reset": "earliest"}}, {"g": {"t:0": A}}))
    store.append([{"g": "g", "p": "t:0", "s": B}, {"g": "g", "p": "t:1", "s": A}])
    store.append([{"g": "g", "p": "t:1", "s": None}, {"c": "h", "v": {"share.delivery.count.limit": "3"}}])
    store.append([{"c": "g", "v": None}])
    store.close()  # a kill leaves the same bytes behind: every append is one write()
    saved = ShareStateStore(tmp_path).load()
    assert saved.partitions == {"g": {"t:0": B}}
    assert saved.group_configs == {"h": {"share.delivery.count.limit": "3"}}


def test_a_torn_last_line_is_cut_off(tmp_path: Path) -> None:
    store = ShareStateStore(tmp_path)
    store.append([{"g": "g", "p": "t:0", "s": A}])
    store.close()
    with open(store.journal_path, "ab") as f:
        f.write(b'{"g":"g","p":"t:0","s":{"sta')  # crash mid-write
    saved = ShareStateStore(tmp_path).load()
    assert saved.partitions == {"g": {"t:0": A}}
    assert store.journal_path.read_bytes().endswith(b"}\n")


def test_compaction_writes_a_snapshot_and_empties_the_journal(tmp_path: Path) -> None:
    store = ShareStateStore(tmp_path)
    store.append([{"g": "g", "p": "t:0", "s": A}])
    assert not store.needs_compaction
    store._size = share_store.COMPACT_BYTES + 1
    assert store.needs_compaction
    store.compact(SavedShareState({}, {"g": {"t:0": B}}))
    assert store.journal_path.stat().st_size == 0 and not store.needs_compaction
    store.append([{"g": "g", "p": "t:1", "s": A}])
    store.close()
    assert ShareStateStore(tmp_path).load().partitions == {"g": {"t:0": B, "t:1": A}}
