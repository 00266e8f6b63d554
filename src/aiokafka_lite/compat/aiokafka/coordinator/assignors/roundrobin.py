from aiokafka_lite.compat.aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor

__all__ = ["RoundRobinPartitionAssignor"]


class RoundRobinPartitionAssignor(AbstractPartitionAssignor):
    """Selects the native ``roundrobin`` assignor."""

    name = "roundrobin"
