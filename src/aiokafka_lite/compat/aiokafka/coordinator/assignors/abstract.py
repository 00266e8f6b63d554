"""aiokafka's assignor base class. Subclasses that only name a built-in strategy (the
``name`` attribute: ``range``, ``roundrobin``, ``sticky``) select our assignor of that
name; custom assignment logic written against aiokafka's ``assign(cluster, members)``
interface is not supported (our assignors have their own interface)."""

from __future__ import annotations

import abc
from typing import Any


class AbstractPartitionAssignor(abc.ABC):  # noqa: B024
    name: str = ""
    version: int = 0

    @classmethod
    def metadata(cls, topics: Any) -> Any:
        raise NotImplementedError("aiokafka_lite selects its native assignor by name")

    @classmethod
    def assign(cls, cluster: Any, members: Any) -> Any:
        raise NotImplementedError("aiokafka_lite selects its native assignor by name")

    @classmethod
    def on_assignment(cls, assignment: Any) -> None:
        return None
