"""Helpers for the tests that run ``examples/``."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` as a module (examples are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses/pydantic look their module up by name
    spec.loader.exec_module(module)
    return module


def run_example(name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``python examples/<name>.py args...`` the way the docs tell users to."""
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )
