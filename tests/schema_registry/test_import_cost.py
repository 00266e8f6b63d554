"""The schema registry package is optional and lazy: the core package does not import it, and importing
it loads none of its dependencies until a name is used."""

from __future__ import annotations

import subprocess
import sys


def _loaded_after(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(out.stdout.split())


HEAVY = (
    "httpx",
    "fastavro",
    "google.protobuf",
    "jsonschema",
    "aiokafka_lite.integrations.schema_registry.client",
)


def test_core_package_does_not_import_the_registry() -> None:
    assert not {
        m
        for m in _loaded_after("import aiokafka_lite")
        if m.startswith("aiokafka_lite.integrations.schema_registry")
    }


def test_registry_package_import_is_lazy() -> None:
    loaded = _loaded_after("import aiokafka_lite.integrations.schema_registry")
    assert not {m for m in loaded if m.startswith(HEAVY)}
    loaded = _loaded_after("from aiokafka_lite.integrations.schema_registry import SchemaRegistryClient")
    assert "httpx" in loaded and "fastavro" not in loaded and "google.protobuf" not in loaded
