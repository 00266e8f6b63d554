"""Share-group state on disk (a cluster with a data dir): what Kafka keeps in its
``__share_group_state`` topic, kept here as a snapshot plus a journal.

Layout under ``<data dir>/share/``::

    state.json     full snapshot: group configs and every share-partition's state
    journal.jsonl  one JSON object per line, appended as things change since the snapshot:
                   {"g": group, "p": "<topic id>:<partition>", "s": state or null (dropped)}
                   {"c": group, "v": {config: value} or null (no configs)}

Every change is one ``write()`` of whole lines, before the broker answers the request
that made it, so it survives a crash (kill -9) of the broker process like the logs do;
``fsync`` follows the cluster's policy (``"always"`` syncs every write). Loading replays
the journal over the snapshot, the last line for a key winning; a torn last line (crash
mid-write) is cut off. A clean stop, and a journal grown past ``COMPACT_BYTES``, write a
new snapshot atomically and empty the journal.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from aiokafka_lite.broker.share.state import SharePartitionState

if TYPE_CHECKING:
    from aiokafka_lite.broker.share.groups import ShareGroups

__all__ = ["COMPACT_BYTES", "SavedShareState", "SharePersistence", "ShareStateStore"]

log = logging.getLogger("aiokafka_lite.broker")

COMPACT_BYTES: Final = 8 * 1024 * 1024


@dataclass
class SavedShareState:
    """What a data dir holds: group configs and share-partition snapshots by group."""

    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    partitions: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)


class ShareStateStore:
    def __init__(self, directory: Path, *, fsync_always: bool = False, sync_on_close: bool = True) -> None:
        self.dir = directory
        self.fsync_always = fsync_always
        self.sync_on_close = sync_on_close
        self._fd = -1
        self._size = 0

    @property
    def snapshot_path(self) -> Path:
        return self.dir / "state.json"

    @property
    def journal_path(self) -> Path:
        return self.dir / "journal.jsonl"

    def load(self) -> SavedShareState:
        saved = SavedShareState()
        if self.snapshot_path.exists():
            snap = json.loads(self.snapshot_path.read_text())
            saved.group_configs = {g: dict(c) for g, c in snap.get("group_configs", {}).items()}
            saved.partitions = {g: dict(ps) for g, ps in snap.get("partitions", {}).items()}
        if self.journal_path.exists():
            data = self.journal_path.read_bytes()
            valid = 0
            for line in data.splitlines(keepends=True):
                if not line.endswith(b"\n"):
                    break  # torn by a crash mid-write
                try:
                    entry = json.loads(line)
                except ValueError:
                    break
                _apply(saved, entry)
                valid += len(line)
            if valid < len(data):
                log.warning("%s: cutting a torn tail of %d bytes", self.journal_path, len(data) - valid)
                os.truncate(self.journal_path, valid)
        return saved

    def append(self, entries: Iterable[dict[str, Any]]) -> None:
        """Journal ``entries`` (one write); the caller compacts when ``needs_compaction``."""
        buf = b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in entries)
        if not buf:
            return
        if self._fd < 0:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._size = os.fstat(self._fd).st_size
        view = memoryview(buf)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        self._size += len(buf)
        if self.fsync_always:
            os.fsync(self._fd)

    @property
    def needs_compaction(self) -> bool:
        return self._size > COMPACT_BYTES

    def compact(self, saved: SavedShareState) -> None:
        """Replace the snapshot with ``saved`` (atomically), then empty the journal."""
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.snapshot_path.with_suffix(".json.tmp")
        with open(tmp, "w") as f:
            json.dump({"group_configs": saved.group_configs, "partitions": saved.partitions}, f)
            if self.fsync_always or self.sync_on_close:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, self.snapshot_path)
        # The snapshot holds everything the journal said: a crash from here on replays
        # the old journal over the new snapshot, which changes nothing.
        if self._fd >= 0:
            os.ftruncate(self._fd, 0)
            self._size = 0
        elif self.journal_path.exists():
            os.truncate(self.journal_path, 0)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                if self.sync_on_close:
                    os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = -1


def _apply(saved: SavedShareState, entry: dict[str, Any]) -> None:
    if "c" in entry:
        if entry["v"] is None:
            saved.group_configs.pop(entry["c"], None)
        else:
            saved.group_configs[entry["c"]] = dict(entry["v"])
        return
    parts = saved.partitions.setdefault(entry["g"], {})
    if entry["s"] is None:
        parts.pop(entry["p"], None)
        if not parts:
            del saved.partitions[entry["g"]]
    else:
        parts[entry["p"]] = entry["s"]


class SharePersistence:
    """The share coordinator's side: loads the saved state into ``ShareGroups`` at start,
    journals each group's changes (``persist``) and writes a snapshot at stop."""

    def __init__(self, groups: ShareGroups) -> None:
        self.groups = groups
        self._store: ShareStateStore | None = None
        # As journaled: the state object and its version (a state replaced by the admin
        # API is a new object, whatever its version).
        self._versions: dict[str, dict[tuple[uuid.UUID, int], tuple[SharePartitionState, int]]] = {}
        self._configs: dict[str, dict[str, str]] = {}  # as journaled

    def start(self) -> None:
        state = self.groups.state
        storage = state.storage
        if storage is None:
            return
        self._store = ShareStateStore(
            storage.dir / "share",
            fsync_always=storage.fsync == "always",
            sync_on_close=storage.fsync != "never",
        )
        saved = self._store.load()
        for group_id, configs in saved.group_configs.items():
            state.group_configs.setdefault(group_id, dict(configs))
        self._configs = {g: dict(c) for g, c in state.group_configs.items()}
        for group_id, parts in saved.partitions.items():
            g = self.groups._group(group_id)
            versions = self._versions.setdefault(group_id, {})
            for key, snap in parts.items():
                tid, _, index = key.rpartition(":")
                sp = SharePartitionState.from_snapshot(snap)
                g.partitions[(uuid.UUID(tid), int(index))] = sp
                versions[(uuid.UUID(tid), int(index))] = (sp, sp.version)

    def stop(self) -> None:
        if self._store is None:
            return
        try:
            self._store.compact(self._saved_state())
        finally:
            self._store.close()
            self._store = None

    def _saved_state(self) -> SavedShareState:
        return SavedShareState(
            group_configs={g: dict(c) for g, c in self.groups.state.group_configs.items()},
            partitions={
                g.group_id: {f"{tid}:{index}": sp.snapshot() for (tid, index), sp in g.partitions.items()}
                for g in self.groups.groups.values()
                if g.partitions
            },
        )

    def persist(self, group_id: str | None) -> None:
        """Journals what changed in ``group_id`` (share-partitions created, changed or
        dropped, the group's configs) since it was last journaled; a no-op without a data
        dir. Called before answering each request that may change the group, so what a
        client was told survives a crash of the broker."""
        if self._store is None or not group_id:
            return
        entries: list[dict[str, Any]] = []
        configs = self.groups.state.group_configs.get(group_id)
        if configs != self._configs.get(group_id):
            entries.append({"c": group_id, "v": None if configs is None else dict(configs)})
            if configs is None:
                self._configs.pop(group_id, None)
            else:
                self._configs[group_id] = dict(configs)
        g = self.groups.groups.get(group_id)
        live = g.partitions if g is not None else {}
        versions = self._versions.setdefault(group_id, {})
        for key, sp in live.items():
            saved = versions.get(key)
            if saved is None or saved[0] is not sp or saved[1] != sp.version:
                entries.append({"g": group_id, "p": f"{key[0]}:{key[1]}", "s": sp.snapshot()})
                versions[key] = (sp, sp.version)
        for key in [k for k in versions if k not in live]:
            entries.append({"g": group_id, "p": f"{key[0]}:{key[1]}", "s": None})
            del versions[key]
        if not versions:
            del self._versions[group_id]
        if not entries:
            return
        self._store.append(entries)
        if self._store.needs_compaction:
            self._store.compact(self._saved_state())
