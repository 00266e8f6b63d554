"""Committed consumer-group offsets of the embedded broker, with optional persistence.

Kafka keeps committed offsets in the compacted ``__consumer_offsets`` topic. The
embedded broker keeps them in memory (``OffsetStore``) and, when the cluster has a data
directory, appends every change to ``<data dir>/groups/offsets.jsonl``: one JSON object
per line (one line per commit request), replayed on start (last write wins, like
compaction). The file is rewritten compacted at load when it holds mostly superseded
entries. Line shapes: ``{"g": group, "c": [[topic, partition, offset, leader epoch,
metadata, commit timestamp], ...]}`` (commit), ``{"g": group, "d": [[topic, partition],
...]}`` (offsets deleted), ``{"g": group, "D": 1}`` (group deleted).

Transactional offset commits (TxnOffsetCommit) stay *pending* per producer id until the
transaction ends: visible on commit, dropped on abort (``complete_txn``). Only completed
offsets reach the file.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from aiokafka_lite.core.structs import TopicPartition

__all__ = ["CommittedOffset", "OffsetStore"]

log = logging.getLogger("aiokafka_lite.broker")

_COMPACT_RATIO: Final = 4  # rewrite at load when lines > ratio * live entries


@dataclass(slots=True, frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1  # wall-clock ms


class OffsetStore:
    """Offsets per group, pending transactional offsets per (group, producer id)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self._pending: dict[str, dict[int, dict[TopicPartition, CommittedOffset]]] = {}
        self._path = Path(path) if path is not None else None
        self._fd = -1

    # -- persistence -------------------------------------------------------------
    def open(self) -> None:
        """Loads the file (if any) and opens it for appending. No-op without a path."""
        if self._path is None or self._fd >= 0:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        lines = entries = 0
        if self._path.exists():
            with open(self._path, encoding="utf-8") as f:
                for line in f:
                    lines += 1
                    try:
                        entries += self._replay(json.loads(line))
                    except (ValueError, KeyError, TypeError):
                        # A torn last line after a crash, most likely.
                        log.warning("%s: skipping unreadable line %d", self._path, lines)
        live = sum(len(v) for v in self._offsets.values())
        if entries > _COMPACT_RATIO * max(live, 16):
            self._rewrite()
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                os.fsync(self._fd)
            except OSError:
                pass
            os.close(self._fd)
            self._fd = -1

    def _replay(self, rec: dict[str, Any]) -> int:
        """Applies one line; returns how many entries it held."""
        group = str(rec["g"])
        if rec.get("D"):
            self._offsets.pop(group, None)
            return 1
        if "d" in rec:
            offsets = self._offsets.get(group)
            for topic, partition in rec["d"]:
                if offsets is not None:
                    offsets.pop(TopicPartition(str(topic), int(partition)), None)
            if offsets is not None and not offsets:
                del self._offsets[group]
            return len(rec["d"])
        offsets = self._offsets.setdefault(group, {})
        for topic, partition, offset, epoch, metadata, ts in rec["c"]:
            offsets[TopicPartition(str(topic), int(partition))] = CommittedOffset(
                int(offset), int(epoch), str(metadata), int(ts)
            )
        return len(rec["c"])

    def _rewrite(self) -> None:
        assert self._path is not None
        tmp = self._path.with_suffix(".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for group, offsets in self._offsets.items():
                f.write(_commit_line(group, offsets))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)

    def _write(self, text: str) -> None:
        if self._fd < 0 or not text:
            return
        data = text.encode("utf-8")
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    # -- committed offsets ---------------------------------------------------------
    def groups(self) -> Iterable[str]:
        """Groups that have committed (or pending transactional) offsets."""
        return set(self._offsets) | set(self._pending)

    def has_offsets(self, group: str) -> bool:
        return bool(self._offsets.get(group)) or bool(self._pending.get(group))

    def get(self, group: str, tp: TopicPartition) -> CommittedOffset | None:
        offsets = self._offsets.get(group)
        return offsets.get(tp) if offsets is not None else None

    def all(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        return dict(self._offsets.get(group, {}))

    def commit(self, group: str, offsets: dict[TopicPartition, CommittedOffset]) -> None:
        if not offsets:
            return
        self._offsets.setdefault(group, {}).update(offsets)
        if self._fd >= 0:
            self._write(_commit_line(group, offsets))

    def delete(self, group: str, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Removes committed offsets; returns those that existed."""
        offsets = self._offsets.get(group)
        if offsets is None:
            return []
        gone = [tp for tp in tps if offsets.pop(tp, None) is not None]
        if not offsets:
            del self._offsets[group]
        if gone and self._fd >= 0:
            self._write(json.dumps({"g": group, "d": [[tp.topic, tp.partition] for tp in gone]}) + "\n")
        return gone

    def delete_group(self, group: str) -> None:
        had = self._offsets.pop(group, None)
        self._pending.pop(group, None)
        if had:
            self._write(json.dumps({"g": group, "D": 1}) + "\n")

    def delete_topics(self, keep: set[str]) -> None:
        """Drops committed offsets of topics not in ``keep`` (after topic deletion)."""
        for group in list(self._offsets):
            gone = [tp for tp in self._offsets[group] if tp.topic not in keep]
            if gone:
                self.delete(group, gone)

    def topics(self) -> set[str]:
        return {tp.topic for offsets in self._offsets.values() for tp in offsets}

    # -- transactional offsets ----------------------------------------------------------
    def add_pending(
        self, group: str, producer_id: int, offsets: dict[TopicPartition, CommittedOffset]
    ) -> None:
        self._pending.setdefault(group, {}).setdefault(producer_id, {}).update(offsets)

    def is_pending(self, group: str, tp: TopicPartition) -> bool:
        """True while some open transaction holds an offset commit for ``tp`` (KIP-447)."""
        return any(tp in offsets for offsets in self._pending.get(group, {}).values())

    def pending_producers(self, group: str) -> Iterator[int]:
        yield from self._pending.get(group, {})

    def complete_txn(self, group: str, producer_id: int, commit: bool) -> None:
        """Ends ``producer_id``'s transaction for ``group``: its offsets become visible or vanish."""
        by_pid = self._pending.get(group)
        if by_pid is None:
            return
        offsets = by_pid.pop(producer_id, None)
        if not by_pid:
            del self._pending[group]
        if commit and offsets:
            self.commit(group, offsets)


def _commit_line(group: str, offsets: dict[TopicPartition, CommittedOffset]) -> str:
    entries = [
        [tp.topic, tp.partition, c.offset, c.leader_epoch, c.metadata, c.commit_timestamp]
        for tp, c in offsets.items()
    ]
    return json.dumps({"g": group, "c": entries}, separators=(",", ":"), ensure_ascii=False) + "\n"
