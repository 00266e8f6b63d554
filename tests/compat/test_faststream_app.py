"""FastStream (installed from PyPI) running on the compat layer against the suite's broker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("faststream.kafka")


def test_faststream_publisher_batch_subscriber_and_manual_ack(kafka_bootstrap: str) -> None:
    script = Path(__file__).with_name("faststream_app.py")
    proc = subprocess.run(
        [sys.executable, str(script), kafka_bootstrap], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("OK"), proc.stdout
