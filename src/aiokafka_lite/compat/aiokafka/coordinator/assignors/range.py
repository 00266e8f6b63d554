from aiokafka_lite.compat.aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor

__all__ = ["RangePartitionAssignor"]


class RangePartitionAssignor(AbstractPartitionAssignor):
    """Selects the native ``range`` assignor."""

    name = "range"
