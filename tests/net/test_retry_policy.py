"""net/retry.py: the one backoff formula and the per-operation retry schedule (sans-I/O)."""

from __future__ import annotations

import pytest

from aiokafka_lite.net.client_config import ClientConfig
from aiokafka_lite.net.retry import Backoff, Retry


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    backoff = Backoff(50, 1000)
    for attempt in range(8):
        expected = min(1000, 50 * 2**attempt)
        for _ in range(50):
            assert expected * 0.8 <= backoff.delay_ms(attempt) <= expected * 1.2
            assert expected * 0.8 / 1000 <= backoff.delay_s(attempt) <= expected * 1.2 / 1000
    assert Backoff(0, 1000).delay_s(3) == 0


def test_backoff_jitter_spreads_clients_apart() -> None:
    # Clients failing together must not retry together: the draws differ.
    draws = {Backoff(100, 1000).delay_ms(2) for _ in range(20)}
    assert len(draws) > 1


def test_backoff_without_jitter_is_exact_and_huge_attempts_stay_capped() -> None:
    backoff = Backoff(100, 5000, jitter=0)
    assert [backoff.delay_ms(n) for n in range(7)] == [100, 200, 400, 800, 1600, 3200, 5000]
    assert backoff.delay_ms(10_000) == 5000
    assert backoff.delay_ms(-1) == 100


def test_backoff_rejects_a_jitter_outside_zero_to_one() -> None:
    for bad in (-0.1, 1.0, 2.0):
        with pytest.raises(ValueError):
            Backoff(100, 1000, jitter=bad)


def test_backoff_from_client_config() -> None:
    cfg = ClientConfig(
        retry_backoff_ms=30, retry_backoff_max_ms=300, reconnect_backoff_ms=70, reconnect_backoff_max_ms=700
    )
    assert Backoff.for_retries(cfg) == Backoff(30, 300)
    assert Backoff.for_reconnects(cfg) == Backoff(70, 700)


def test_retry_counts_attempts_and_grows_the_delay() -> None:
    retry = Retry(Backoff(100, 1000, jitter=0), clock=FakeClock())
    assert [retry.next_delay() for _ in range(5)] == [0.1, 0.2, 0.4, 0.8, 1.0]
    assert retry.attempts == 5
    retry.succeeded()
    assert retry.attempts == 0
    assert retry.next_delay() == 0.1


def test_retry_gives_up_when_the_wait_would_reach_the_deadline() -> None:
    clock = FakeClock(100.0)
    retry = Retry(Backoff(100, 1000, jitter=0), clock=clock, deadline=100.35)
    assert retry.next_delay() == 0.1
    clock.now += 0.1
    assert retry.next_delay() == 0.2
    clock.now += 0.2
    # 100.3 + 0.4 >= 100.35: waiting would pass the deadline, so the caller gives up now.
    assert retry.next_delay() is None
    assert retry.attempts == 3


def test_retry_deadline_bookkeeping() -> None:
    clock = FakeClock(10.0)
    retry = Retry(Backoff(100, 1000), clock=clock, deadline=12.0)
    assert retry.remaining_s() == 2.0
    assert not retry.expired
    clock.now = 12.5
    assert retry.remaining_s() == 0.0
    assert retry.expired
    unbounded = Retry(Backoff(100, 1000), clock=clock)
    assert unbounded.remaining_s() == float("inf")
    assert not unbounded.expired
    assert unbounded.next_delay() is not None


def test_retry_backoff_override_for_one_wait() -> None:
    # e.g. CONCURRENT_TRANSACTIONS clears fast: a shorter base for that error, same counter.
    retry = Retry(Backoff(100, 1000, jitter=0), clock=FakeClock())
    fast = Backoff(20, 1000, jitter=0)
    assert retry.next_delay(fast) == 0.02
    assert retry.next_delay() == 0.2
    assert retry.next_delay(fast) == 0.08
