"""aiokafka_lite: an asyncio-native Apache Kafka client.

The public names below load on first use (PEP 562), so ``from aiokafka_lite import
Producer`` does not pay for the consumer, admin or broker modules, and ``import
aiokafka_lite`` alone loads none of them.
"""

from __future__ import annotations

import importlib
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from aiokafka_lite.admin import Admin, NewTopic
    from aiokafka_lite.broker import EmbeddedCluster
    from aiokafka_lite.consume import Consumer, Record
    from aiokafka_lite.consume.share import AcknowledgeType, ShareConsumer
    from aiokafka_lite.core.structs import TopicPartition
    from aiokafka_lite.integrations.mirror import Mirror
    from aiokafka_lite.net import Client
    from aiokafka_lite.processing import OrderedWorkers, ShareWorkers
    from aiokafka_lite.processing.transact import TransactSession
    from aiokafka_lite.produce import Producer, RecordMetadata

_EXPORTS: dict[str, str] = {
    "Admin": "aiokafka_lite.admin",
    "NewTopic": "aiokafka_lite.admin",
    "EmbeddedCluster": "aiokafka_lite.broker",
    "Consumer": "aiokafka_lite.consume",
    "Record": "aiokafka_lite.consume",
    "OrderedWorkers": "aiokafka_lite.processing",
    "Mirror": "aiokafka_lite.integrations.mirror",
    "Client": "aiokafka_lite.net",
    "Producer": "aiokafka_lite.produce",
    "RecordMetadata": "aiokafka_lite.produce",
    "AcknowledgeType": "aiokafka_lite.consume.share",
    "ShareConsumer": "aiokafka_lite.consume.share",
    "ShareWorkers": "aiokafka_lite.processing",
    "TopicPartition": "aiokafka_lite.core.structs",
    "TransactSession": "aiokafka_lite.processing.transact",
}

__all__ = [
    "AcknowledgeType",
    "Admin",
    "Client",
    "Consumer",
    "EmbeddedCluster",
    "Mirror",
    "NewTopic",
    "OrderedWorkers",
    "Producer",
    "Record",
    "RecordMetadata",
    "ShareConsumer",
    "ShareWorkers",
    "TopicPartition",
    "TransactSession",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


# Modules moved, by their old name (the layered layout of 0.2: core/, consume/, processing/,
# integrations/, broker/share/). Importing an old name imports the new module and binds the
# old name to that same object, so ``isinstance`` checks, ``mock.patch`` strings and
# ``dictConfig`` "class" strings written against the old paths keep working. Old paths of
# internal modules warn (DeprecationWarning) and go in the next release; the public homes
# below (``aiokafka_lite.share``, ``aiokafka_lite.errors``, the integrations) stay.
# ``aiokafka_lite/logging.py`` also made a Python started inside the package folder import
# it as the standard library's ``logging``.
_RENAMED_MODULES: dict[str, str] = {
    "aiokafka_lite._backend": "aiokafka_lite.core.concurrency",
    "aiokafka_lite.broker.share_admin": "aiokafka_lite.broker.share.admin",
    "aiokafka_lite.broker.share_groups": "aiokafka_lite.broker.share.groups",
    "aiokafka_lite.broker.share_state": "aiokafka_lite.broker.share.state",
    "aiokafka_lite.broker.share_store": "aiokafka_lite.broker.share.store",
    "aiokafka_lite.config": "aiokafka_lite.core.options",
    "aiokafka_lite.demo": "aiokafka_lite.cli.demo",
    "aiokafka_lite.errors": "aiokafka_lite.core.errors",
    "aiokafka_lite.fetch": "aiokafka_lite.consume",
    "aiokafka_lite.fetch.buffer": "aiokafka_lite.consume.fetch.buffer",
    "aiokafka_lite.fetch.config": "aiokafka_lite.consume.consumer_config",
    "aiokafka_lite.fetch.consumer": "aiokafka_lite.consume.consumer",
    "aiokafka_lite.fetch.decode": "aiokafka_lite.consume.fetch.decode",
    "aiokafka_lite.fetch.fairness": "aiokafka_lite.consume.fairness",
    "aiokafka_lite.fetch.fetcher": "aiokafka_lite.consume.fetch.fetcher",
    "aiokafka_lite.fetch.offsets": "aiokafka_lite.consume.fetch.offset_lookup",
    "aiokafka_lite.fetch.record": "aiokafka_lite.consume.record",
    "aiokafka_lite.fetch.session": "aiokafka_lite.consume.fetch.session",
    "aiokafka_lite.fetch.subscription": "aiokafka_lite.consume.subscription",
    "aiokafka_lite.groups": "aiokafka_lite.consume.groups",
    "aiokafka_lite.groups.assignors": "aiokafka_lite.consume.groups.assignors",
    "aiokafka_lite.groups.assignors.base": "aiokafka_lite.consume.groups.assignors.base",
    "aiokafka_lite.groups.assignors.simple": "aiokafka_lite.consume.groups.assignors.simple",
    "aiokafka_lite.groups.assignors.sticky": "aiokafka_lite.consume.groups.assignors.sticky",
    "aiokafka_lite.groups.assignors.userdata": "aiokafka_lite.consume.groups.assignors.userdata",
    "aiokafka_lite.groups.consumer_coordinator": "aiokafka_lite.consume.groups.consumer_coordinator",
    "aiokafka_lite.groups.consumer_membership": "aiokafka_lite.consume.groups.consumer_membership",
    "aiokafka_lite.groups.coordinator": "aiokafka_lite.consume.groups.coordinator",
    "aiokafka_lite.groups.listener": "aiokafka_lite.consume.groups.listener",
    "aiokafka_lite.groups.membership": "aiokafka_lite.consume.groups.membership",
    "aiokafka_lite.groups.protocol": "aiokafka_lite.consume.groups.protocol",
    "aiokafka_lite.groups.workers": "aiokafka_lite.processing.ordered_workers",
    "aiokafka_lite.handler_failures": "aiokafka_lite.processing.failures",
    "aiokafka_lite.health": "aiokafka_lite.core.health",
    "aiokafka_lite.integrations.mirror.core": "aiokafka_lite.integrations.mirror.mirror",
    "aiokafka_lite.integrations.spark.offsets": "aiokafka_lite.integrations.spark.offset_ranges",
    "aiokafka_lite.integrations.spark.options": "aiokafka_lite.integrations.spark.datasource_options",
    "aiokafka_lite.log_handler": "aiokafka_lite.integrations.log_handler",
    "aiokafka_lite.logging": "aiokafka_lite.integrations.log_handler",
    "aiokafka_lite.mirror": "aiokafka_lite.integrations.mirror",
    "aiokafka_lite.mirror.core": "aiokafka_lite.integrations.mirror.mirror",
    "aiokafka_lite.mirror.naming": "aiokafka_lite.integrations.mirror.naming",
    "aiokafka_lite.mirror.progress": "aiokafka_lite.integrations.mirror.progress",
    "aiokafka_lite.mirror.stats": "aiokafka_lite.integrations.mirror.stats",
    "aiokafka_lite.mirror.topics": "aiokafka_lite.integrations.mirror.topics",
    "aiokafka_lite.net.config": "aiokafka_lite.net.client_config",
    "aiokafka_lite.observability": "aiokafka_lite.core.client_metrics",
    "aiokafka_lite.otel": "aiokafka_lite.integrations.otel",
    "aiokafka_lite.otel._active": "aiokafka_lite.core.tracing_hook",
    "aiokafka_lite.otel.metrics": "aiokafka_lite.integrations.otel.metrics",
    "aiokafka_lite.otel.tracing": "aiokafka_lite.integrations.otel.tracing",
    "aiokafka_lite.produce.config": "aiokafka_lite.produce.producer_config",
    "aiokafka_lite.prometheus": "aiokafka_lite.integrations.prometheus",
    "aiokafka_lite.schema_registry": "aiokafka_lite.integrations.schema_registry",
    "aiokafka_lite.schema_registry._http": "aiokafka_lite.integrations.schema_registry._http",
    "aiokafka_lite.schema_registry.avro": "aiokafka_lite.integrations.schema_registry.avro",
    "aiokafka_lite.schema_registry.client": "aiokafka_lite.integrations.schema_registry.client",
    "aiokafka_lite.schema_registry.compat_avro": "aiokafka_lite.integrations.schema_registry.compat_avro",
    "aiokafka_lite.schema_registry.compat_json": "aiokafka_lite.integrations.schema_registry.compat_json",
    "aiokafka_lite.schema_registry.compat_protobuf": "aiokafka_lite.integrations.schema_registry.compat_protobuf",
    "aiokafka_lite.schema_registry.embedded": "aiokafka_lite.integrations.schema_registry.embedded",
    "aiokafka_lite.schema_registry.errors": "aiokafka_lite.integrations.schema_registry.errors",
    "aiokafka_lite.schema_registry.json_schema": "aiokafka_lite.integrations.schema_registry.json_schema",
    "aiokafka_lite.schema_registry.proto_text": "aiokafka_lite.integrations.schema_registry.proto_text",
    "aiokafka_lite.schema_registry.protobuf": "aiokafka_lite.integrations.schema_registry.protobuf",
    "aiokafka_lite.schema_registry.serde": "aiokafka_lite.integrations.schema_registry.serde",
    "aiokafka_lite.share": "aiokafka_lite.consume.share",
    "aiokafka_lite.share.acks": "aiokafka_lite.consume.share.acks",
    "aiokafka_lite.share.config": "aiokafka_lite.consume.share.share_config",
    "aiokafka_lite.share.consumer": "aiokafka_lite.consume.share.share_consumer",
    "aiokafka_lite.share.membership": "aiokafka_lite.consume.share.membership",
    "aiokafka_lite.share.record": "aiokafka_lite.consume.share.record",
    "aiokafka_lite.share.session": "aiokafka_lite.consume.share.session",
    "aiokafka_lite.share.workers": "aiokafka_lite.processing.share_workers",
    "aiokafka_lite.spark": "aiokafka_lite.integrations.spark",
    "aiokafka_lite.spark.connector": "aiokafka_lite.integrations.spark.connector",
    "aiokafka_lite.spark.datasource": "aiokafka_lite.integrations.spark.datasource",
    "aiokafka_lite.spark.kafka_io": "aiokafka_lite.integrations.spark.kafka_io",
    "aiokafka_lite.spark.offsets": "aiokafka_lite.integrations.spark.offset_ranges",
    "aiokafka_lite.spark.options": "aiokafka_lite.integrations.spark.datasource_options",
    "aiokafka_lite.spark.standalone": "aiokafka_lite.integrations.spark.standalone",
    "aiokafka_lite.spark.workers": "aiokafka_lite.integrations.spark.workers",
    "aiokafka_lite.structs": "aiokafka_lite.core.structs",
    "aiokafka_lite.transact": "aiokafka_lite.processing.transact",
    "aiokafka_lite.wire.records._backend": "aiokafka_lite.wire.records._c_extension",
}
_STABLE_OLD_PATHS = (
    "aiokafka_lite.errors",
    "aiokafka_lite.log_handler",
    "aiokafka_lite.mirror",
    "aiokafka_lite.otel",
    "aiokafka_lite.prometheus",
    "aiokafka_lite.schema_registry",
    "aiokafka_lite.share",
    "aiokafka_lite.spark",
    "aiokafka_lite.structs",
    "aiokafka_lite.transact",
    "aiokafka_lite.logging",
)


def _warns(old: str) -> bool:
    return not any(old == stable or old.startswith(stable + ".") for stable in _STABLE_OLD_PATHS)


if TYPE_CHECKING:
    from importlib.abc import Loader as _Loader
else:
    _Loader = object  # importlib.abc costs ~30 ms to import; the import system needs no base


class _RenamedModuleFinder(_Loader):
    """Import hook (on ``sys.meta_path``) answering only for the old names above: importing
    one imports the new module, on first use, and binds the old name to that same module."""

    @staticmethod
    def find_spec(fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if fullname not in _RENAMED_MODULES:
            return None
        return ModuleSpec(fullname, _RenamedModuleFinder())

    @staticmethod
    def create_module(spec: ModuleSpec) -> None:
        return None  # a placeholder module; exec_module swaps in the real one

    @staticmethod
    def exec_module(module: ModuleType) -> None:
        # The import system returns whatever sys.modules holds under the name after
        # exec_module, so the old name becomes the new module itself, untouched.
        old = module.__name__
        new = _RENAMED_MODULES[old]
        if _warns(old):
            import warnings

            warnings.warn(
                f"{old} moved to {new}; the old path goes in the next release",
                DeprecationWarning,
                stacklevel=2,
            )
        sys.modules[old] = importlib.import_module(new)


# First on the path: the standard finder would otherwise load ``aiokafka_lite.fetch.fetcher``
# a second time, as a new module, from the aliased package's folder.
if not any(isinstance(finder, _RenamedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RenamedModuleFinder())
