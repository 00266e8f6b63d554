from aiokafka_lite.compat.aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor

__all__ = ["StickyPartitionAssignor"]


class StickyPartitionAssignor(AbstractPartitionAssignor):
    """Selects the native ``sticky`` assignor."""

    name = "sticky"
