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
    from aiokafka_lite.fetch import Consumer, Record
    from aiokafka_lite.groups import OrderedWorkers
    from aiokafka_lite.mirror import Mirror
    from aiokafka_lite.net import Client
    from aiokafka_lite.produce import Producer, RecordMetadata
    from aiokafka_lite.share import AcknowledgeType, ShareConsumer, ShareWorkers
    from aiokafka_lite.structs import TopicPartition
    from aiokafka_lite.transact import TransactSession

_EXPORTS: dict[str, str] = {
    "Admin": "aiokafka_lite.admin",
    "NewTopic": "aiokafka_lite.admin",
    "EmbeddedCluster": "aiokafka_lite.broker",
    "Consumer": "aiokafka_lite.fetch",
    "Record": "aiokafka_lite.fetch",
    "OrderedWorkers": "aiokafka_lite.groups",
    "Mirror": "aiokafka_lite.mirror",
    "Client": "aiokafka_lite.net",
    "Producer": "aiokafka_lite.produce",
    "RecordMetadata": "aiokafka_lite.produce",
    "AcknowledgeType": "aiokafka_lite.share",
    "ShareConsumer": "aiokafka_lite.share",
    "ShareWorkers": "aiokafka_lite.share",
    "TopicPartition": "aiokafka_lite.structs",
    "TransactSession": "aiokafka_lite.transact",
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


# Modules renamed, by their old name. ``aiokafka_lite/logging.py`` made a Python started
# inside the package folder import it as the standard library's ``logging``; the old
# dotted path stays valid (imports, ``dictConfig`` "class" strings) without such a file.
_RENAMED_MODULES: dict[str, str] = {"aiokafka_lite.logging": "aiokafka_lite.log_handler"}


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
        sys.modules[module.__name__] = importlib.import_module(_RENAMED_MODULES[module.__name__])


if not any(isinstance(finder, _RenamedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.append(_RenamedModuleFinder())
