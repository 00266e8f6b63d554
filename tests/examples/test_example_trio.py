"""examples/async_iterator_trio.py: the async_iterator tour, unchanged, on trio."""

from __future__ import annotations

import re

from examples_testlib import run_example


def test_async_iterator_trio_example() -> None:
    proc = run_example("async_iterator_trio")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.startswith("running on trio ")
    assert re.search(r"async for, first 5 records: \['p(\d)-0', 'p\1-1', 'p\1-2', 'p\1-3', 'p\1-4'\]", out), (
        out
    )
    assert "read all 30 records" in out
    assert "paused p0; new records came from: [1, 2]" in out
    assert "resumed p0: ['late-p0']" in out
    assert "seek(p1, 8): ['p1-8', 'p1-9', 'late-p1']" in out
    assert "seek_to_beginning(p2): position 0" in out
    assert "offsets_for_times(p2): offset 10, value late-p2" in out
    assert "end offsets: [11, 11, 11]" in out
