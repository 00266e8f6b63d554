"""The embedded broker's client quotas (KIP-546): entity -> quota key -> value,
shared by the brokers of a cluster (``quota_store(state)``, kept in
``ClusterState.extensions``).

An entity is a sorted tuple of (entity type, name) pairs; a ``None`` name is the
default entity of its type. The quotas are stored and described, as Kafka's metadata
has them; the embedded broker does not throttle clients by them.
"""

from __future__ import annotations

from typing import Final, TypeAlias

from aiokafka_lite.broker.state import ClusterState

__all__ = ["ENTITY_TYPES", "QUOTA_KEYS", "Entity", "QuotaStore", "quota_store"]

#: Kafka's entity types.
ENTITY_TYPES: Final = ("user", "client-id", "ip")
#: Kafka's quota keys by the entity types they apply to, and whether they are integers
#: (LONG/INT in Kafka's QuotaConfig: a fractional value is refused).
QUOTA_KEYS: Final[dict[str, tuple[frozenset[str], bool]]] = {
    "producer_byte_rate": (frozenset({"user", "client-id"}), True),
    "consumer_byte_rate": (frozenset({"user", "client-id"}), True),
    "request_percentage": (frozenset({"user", "client-id"}), False),
    "controller_mutation_rate": (frozenset({"user", "client-id"}), False),
    "connection_creation_rate": (frozenset({"ip"}), True),
}
_EXTENSION_KEY: Final = "client_quotas"

Entity: TypeAlias = tuple[tuple[str, str | None], ...]


class QuotaStore:
    """Entity -> key -> value; an entity without keys is not kept."""

    def __init__(self) -> None:
        self.quotas: dict[Entity, dict[str, float]] = {}

    def apply(self, entity: Entity, sets: dict[str, float], removes: set[str]) -> None:
        values = self.quotas.setdefault(entity, {})
        for key in removes:
            values.pop(key, None)
        values.update(sets)
        if not values:
            del self.quotas[entity]


def quota_store(state: ClusterState) -> QuotaStore:
    """The cluster's quota store (created on first use)."""
    store = state.extensions.get(_EXTENSION_KEY)
    if store is None:
        store = state.extensions[_EXTENSION_KEY] = QuotaStore()
    assert isinstance(store, QuotaStore)
    return store
