"""Importing the package stays cheap: public names and protocol messages load on first use."""

from __future__ import annotations

import subprocess
import sys


def _loaded_after(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint('\\n'.join(m for m in sys.modules if m.startswith('aiokafka_lite')))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(out.stdout.split())


# Every public name of the package and the module that defines it.
TOP_LEVEL = {
    "AcknowledgeType": "aiokafka_lite.consume.share",
    "Admin": "aiokafka_lite.admin",
    "Client": "aiokafka_lite.net",
    "Consumer": "aiokafka_lite.consume",
    "EmbeddedCluster": "aiokafka_lite.broker",
    "Mirror": "aiokafka_lite.integrations.mirror",
    "NewTopic": "aiokafka_lite.admin",
    "OrderedWorkers": "aiokafka_lite.processing",
    "Producer": "aiokafka_lite.produce",
    "Record": "aiokafka_lite.consume",
    "RecordMetadata": "aiokafka_lite.produce",
    "ShareConsumer": "aiokafka_lite.consume.share",
    "ShareWorkers": "aiokafka_lite.processing",
    "TopicPartition": "aiokafka_lite.core.structs",
    "TransactSession": "aiokafka_lite.processing.transact",
}


def test_package_import_loads_no_client_module() -> None:
    loaded = _loaded_after("import aiokafka_lite")
    heavy = {module for module in TOP_LEVEL.values() if module != "aiokafka_lite.core.structs"}
    assert not {m for m in loaded if m.startswith(tuple(heavy))}


def test_every_public_name_imports_from_the_package() -> None:
    import importlib

    import aiokafka_lite

    assert sorted(aiokafka_lite.__all__) == sorted(TOP_LEVEL)
    for name, module in TOP_LEVEL.items():
        value = getattr(aiokafka_lite, name)
        assert value is getattr(importlib.import_module(module), name), name
        assert name in dir(aiokafka_lite)


def test_share_consumer_import_does_not_load_broker_or_mirror() -> None:
    loaded = _loaded_after("from aiokafka_lite import ShareConsumer, ShareWorkers, AcknowledgeType")
    assert "aiokafka_lite.consume.share.share_consumer" in loaded
    assert not {
        m for m in loaded if m.startswith(("aiokafka_lite.broker", "aiokafka_lite.integrations.mirror"))
    }


def test_producer_import_does_not_load_admin_or_consumer() -> None:
    loaded = _loaded_after("from aiokafka_lite import Producer")
    assert "aiokafka_lite.produce.producer" in loaded
    assert "aiokafka_lite.admin.client" not in loaded
    assert "aiokafka_lite.consume.consumer" not in loaded


def test_message_modules_load_on_first_use() -> None:
    loaded = _loaded_after("from aiokafka_lite.wire import messages as m\nm.REQUESTS[0]\nm.HeartbeatRequest")
    assert "aiokafka_lite.wire.messages.produce_request" in loaded
    assert "aiokafka_lite.wire.messages.heartbeat_request" in loaded
    assert "aiokafka_lite.wire.messages.describe_acls_request" not in loaded
