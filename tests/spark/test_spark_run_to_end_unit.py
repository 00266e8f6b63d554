"""``spark_testlib.run_to_end``: a streaming query whose Python worker missed Spark's fixed
10-second connect-back is started once more; every other failure is the test's."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from spark_testlib import run_to_end

_NO_CONNECT = "[STREAM_FAILED] Query terminated with exception: Python worker failed to connect back."


class _Query:
    def __init__(self, error: str | None) -> None:
        self.error = error

    def awaitTermination(self, timeout: float) -> bool:
        if self.error is not None:
            raise StreamingQueryException(message=self.error)
        return True

    def exception(self) -> None:
        return None


def _starts(*errors: str | None) -> tuple[list[_Query], Any]:
    started: list[_Query] = []
    pending = list(errors)

    def start() -> _Query:
        started.append(_Query(pending.pop(0)))
        return started[-1]

    return started, start


def test_a_worker_that_did_not_connect_back_is_started_once_more() -> None:
    started, start = _starts(_NO_CONNECT, None)
    assert run_to_end(start) is started[1]


def test_twice_is_a_failure() -> None:
    started, start = _starts(_NO_CONNECT, _NO_CONNECT)
    with pytest.raises(StreamingQueryException, match="connect back"):
        run_to_end(start)
    assert len(started) == 2


def test_any_other_error_is_not_retried() -> None:
    started, start = _starts("[STREAM_FAILED] UnknownTopicOrPartitionError", None)
    with pytest.raises(StreamingQueryException, match="UnknownTopic"):
        run_to_end(start)
    assert len(started) == 1
