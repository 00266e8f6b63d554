"""The committed message modules are exactly what the generator makes from the pinned jar.

The jar comes from Maven Central through the repository's own Maven set-up
(``aiokafka_lite.testing.apache.kafka_classpath``), cached after the first run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "tools" / "generate_messages.py"
COMMITTED = ROOT / "src" / "aiokafka_lite" / "wire" / "messages"


def _sources(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.py"))}


def _generate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GENERATOR), *args], capture_output=True, text=True, timeout=900, cwd=ROOT
    )


def test_regenerating_from_the_pinned_jar_reproduces_the_committed_files(tmp_path: Path) -> None:
    out = tmp_path / "messages"
    proc = _generate("--out", str(out))  # the pinned version is the default
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fresh, committed = _sources(out), _sources(COMMITTED)
    assert sorted(fresh) == sorted(committed)
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"out of date (rerun tools/generate_messages.py): {stale}"


def test_a_jar_that_does_not_match_its_pinned_digest_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "kafka-clients-4.4.0.jar"
    fake.write_bytes(b"PK\x05\x06" + b"\x00" * 18)  # an empty zip
    proc = _generate("--jar", str(fake), "--out", str(tmp_path / "out"))
    assert proc.returncode != 0
    assert "pinned at" in proc.stderr and str(fake) in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_schema_folder_missing_a_selected_schema_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ProduceRequest.json").write_text("{}")
    proc = _generate("--schemas", str(tmp_path), "--out", str(tmp_path / "out"))
    assert proc.returncode != 0
    assert "ShareFetchRequest.json" in proc.stderr
    assert not (tmp_path / "out").exists()
