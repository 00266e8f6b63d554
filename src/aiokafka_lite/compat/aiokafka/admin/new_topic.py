"""aiokafka's ``NewTopic`` (positional ``name, num_partitions, replication_factor``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiokafka_lite.admin import NewTopic as NativeNewTopic

__all__ = ["NewTopic"]


class NewTopic:
    def __init__(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        replica_assignments: Mapping[int, list[int]] | None = None,
        topic_configs: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.replica_assignments = dict(replica_assignments or {})
        self.topic_configs = dict(topic_configs or {})

    def to_native(self) -> NativeNewTopic:
        return NativeNewTopic(
            self.name,
            self.num_partitions,
            self.replication_factor,
            configs=self.topic_configs,
            replica_assignment=self.replica_assignments or None,
        )

    def __repr__(self) -> str:
        return f"NewTopic(name={self.name!r}, num_partitions={self.num_partitions}, replication_factor={self.replication_factor})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, NewTopic) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]
