"""Optional on-disk persistence of an embedded cluster (``--data-dir``).

Layout under the data directory::

    cluster.json                     cluster id, producer-id reservation, topics, configs, layout
    logs/<topic id>/<partition>.log  stored batches, appended exactly as served (Kafka's format)
    logs/<topic id>/<partition>.start  log start offset (DeleteRecords/retention), when > 0

Every append is one ``write()`` of the stored batch to the partition's file, so data
reaches the OS as soon as it is acknowledged and survives a crash of the broker
process. ``fsync`` policy: ``"shutdown"`` (default) syncs every file at clean shutdown
only, so a machine crash may lose the last writes; ``"always"`` syncs after every
append (slow, durable); ``"never"`` leaves it to the OS. ``cluster.json`` is replaced
atomically (write + rename). On load, a torn batch at the end of a log (crash mid-write)
is cut off. Producer ids are reserved in blocks so a restarted cluster never reuses one.

Committed offsets and transaction state are whatever their coordinators store in
(internal) topics, so they persist the same way.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Final, Literal

from aiokafka_lite.broker.log import PartitionLog
from aiokafka_lite.broker.state import ClusterState, Partition, Topic

__all__ = ["FsyncPolicy", "Storage"]

log = logging.getLogger("aiokafka_lite.broker")

FsyncPolicy = Literal["shutdown", "always", "never"]
_PID_BLOCK: Final = 1000


class _LogFile:
    __slots__ = ("fd", "fsync_always", "path", "start_path")

    def __init__(self, path: Path, fsync_always: bool) -> None:
        self.path = path
        self.start_path = path.with_suffix(".start")
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.fsync_always = fsync_always

    def write(self, buf: bytes | bytearray | memoryview) -> None:
        view = memoryview(buf)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        if self.fsync_always:
            os.fsync(self.fd)

    def write_start(self, offset: int) -> None:
        tmp = self.start_path.with_suffix(".start.tmp")
        tmp.write_text(str(offset))
        os.replace(tmp, self.start_path)

    def close(self, sync: bool) -> None:
        if self.fd < 0:
            return
        try:
            if sync:
                os.fsync(self.fd)
        finally:
            os.close(self.fd)
            self.fd = -1


class Storage:
    """Persists one ``ClusterState`` under ``data_dir``."""

    def __init__(self, data_dir: str | os.PathLike[str], fsync: FsyncPolicy = "shutdown") -> None:
        self.dir = Path(data_dir)
        self.fsync: FsyncPolicy = fsync
        self._files: dict[tuple[uuid.UUID, int], _LogFile] = {}
        self._reserved_pid = 0
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "logs").mkdir(exist_ok=True)

    @property
    def meta_path(self) -> Path:
        return self.dir / "cluster.json"

    # -- load --------------------------------------------------------------------
    def load(self, state: ClusterState) -> None:
        """Restores topics and logs into an empty ``state`` (no-op for a fresh directory)."""
        if not self.meta_path.exists():
            self.save_metadata(state)
            return
        meta: dict[str, Any] = json.loads(self.meta_path.read_text())
        state.cluster_id = meta["cluster_id"]
        # Resume above the reserved block: ids handed out before a crash are never reused.
        state._next_producer_id = max(state._next_producer_id, int(meta.get("next_producer_id", 0)))
        self._reserved_pid = state._next_producer_id
        for t in meta.get("topics", []):
            topic = Topic(
                t["name"], uuid.UUID(t["topic_id"]), [], dict(t.get("configs", {})), bool(t.get("internal"))
            )
            for i, pm in enumerate(t["partitions"]):
                epoch = int(pm.get("leader_epoch", 0))
                plog = PartitionLog(leader_epoch=0)
                p = Partition(
                    topic.name, i, plog, int(pm["leader"]), epoch, list(pm["replicas"]), list(pm["replicas"])
                )
                self._load_log(topic, p)
                plog.set_leader_epoch(epoch)
                topic.partitions.append(p)
            state.apply_topic_configs(topic)
            state.topics[topic.name] = topic
            state.topics_by_id[topic.topic_id] = topic
        state.storage = self
        self.save_metadata(state)
        log.info("loaded %d topics from %s", len(state.topics), self.dir)

    def _load_log(self, topic: Topic, p: Partition) -> None:
        path = self._path(topic.topic_id, p.index)
        if path.exists():
            data = path.read_bytes()
            valid = p.log.append_stored(data)
            if valid < len(data):
                log.warning("%s: cutting a torn tail of %d bytes", path, len(data) - valid)
                os.truncate(path, valid)
            start_path = path.with_suffix(".start")
            if start_path.exists():
                try:
                    p.log.delete_records_before(int(start_path.read_text().strip() or 0))
                except ValueError:
                    log.warning("%s: unreadable log start offset, ignored", start_path)

    # -- writes ------------------------------------------------------------------
    def _path(self, topic_id: uuid.UUID, index: int) -> Path:
        return self.dir / "logs" / str(topic_id) / f"{index}.log"

    def _attach(self, topic: Topic, p: Partition) -> None:
        key = (topic.topic_id, p.index)
        if key in self._files:
            return
        path = self._path(topic.topic_id, p.index)
        path.parent.mkdir(parents=True, exist_ok=True)
        f = _LogFile(path, self.fsync == "always")
        self._files[key] = f
        p.log.on_append = f.write
        p.log.on_log_start = f.write_start

    def save_metadata(self, state: ClusterState) -> None:
        """Writes cluster.json atomically and attaches files to any new partitions."""
        for topic in state.topics.values():
            for p in topic.partitions:
                self._attach(topic, p)
        snap = state.snapshot()
        snap["next_producer_id"] = max(self._reserved_pid, state._next_producer_id)
        tmp = self.meta_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(snap, indent=1))
        if self.fsync != "never":
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp, self.meta_path)

    def topic_created(self, state: ClusterState, topic: Topic) -> None:
        self.save_metadata(state)

    def topic_deleted(self, state: ClusterState, topic: Topic) -> None:
        for p in topic.partitions:
            f = self._files.pop((topic.topic_id, p.index), None)
            if f is not None:
                f.close(sync=False)
            p.log.on_append = None
            p.log.on_log_start = None
        shutil.rmtree(self.dir / "logs" / str(topic.topic_id), ignore_errors=True)
        self.save_metadata(state)

    def producer_id_allocated(self, state: ClusterState, pid: int) -> None:
        if pid >= self._reserved_pid:
            self._reserved_pid = pid + _PID_BLOCK
            self.save_metadata(state)

    def close(self) -> None:
        sync = self.fsync != "never"
        for f in self._files.values():
            try:
                f.close(sync)
            except OSError as e:
                log.warning("closing %s: %s", f.path, e)
        self._files.clear()
