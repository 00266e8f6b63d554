"""The README's main job runs and succeeds."""

from __future__ import annotations

import subprocess
import sys


def test_demo_runs_and_round_trips() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "aiokafka_lite.demo"], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "round trip ok" in proc.stdout
