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


def test_package_import_loads_no_client_module() -> None:
    loaded = _loaded_after("import aiokafka_lite")
    assert not {
        m for m in loaded if m.startswith(("aiokafka_lite.admin", "aiokafka_lite.fetch", "aiokafka_lite.net"))
    }


def test_producer_import_does_not_load_admin_or_consumer() -> None:
    loaded = _loaded_after("from aiokafka_lite import Producer")
    assert "aiokafka_lite.produce.producer" in loaded
    assert "aiokafka_lite.admin.client" not in loaded
    assert "aiokafka_lite.fetch.consumer" not in loaded


def test_message_modules_load_on_first_use() -> None:
    loaded = _loaded_after("from aiokafka_lite.wire import messages as m\nm.REQUESTS[0]\nm.HeartbeatRequest")
    assert "aiokafka_lite.wire.messages.produce_request" in loaded
    assert "aiokafka_lite.wire.messages.heartbeat_request" in loaded
    assert "aiokafka_lite.wire.messages.describe_acls_request" not in loaded
