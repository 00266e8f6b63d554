"""RebootstrapPolicy: when the client goes back to its bootstrap servers (pure)."""

from __future__ import annotations

from aiokafka_lite.net.rebootstrap import REBOOTSTRAP_REQUIRED, RebootstrapPolicy


def test_every_known_broker_failed_triggers() -> None:
    p = RebootstrapPolicy(enabled=True, trigger_s=300)
    p.attempt_started(0.0)
    assert p.after_failure(1.0, known_brokers={1, 2, 3}, failed={1, 2}) is None
    assert p.after_failure(1.0, known_brokers={1, 2, 3}, failed={1, 2, 3}) is not None


def test_trigger_time_counts_from_the_first_failing_attempt() -> None:
    p = RebootstrapPolicy(enabled=True, trigger_s=10)
    p.attempt_started(100.0)
    p.attempt_started(105.0)  # still failing: the clock keeps its start
    assert p.after_failure(109.9, known_brokers={1, 2}, failed={1}) is None
    assert p.after_failure(110.0, known_brokers={1, 2}, failed={1}) is not None
    p.succeeded()
    p.attempt_started(200.0)
    assert p.after_failure(205.0, known_brokers={1, 2}, failed={1}) is None


def test_rebootstrap_required_triggers_even_with_brokers_left() -> None:
    p = RebootstrapPolicy(enabled=True, trigger_s=300)
    p.attempt_started(0.0)
    assert p.after_failure(0.0, known_brokers={1, 2}, failed={1}, error_code=REBOOTSTRAP_REQUIRED)


def test_nothing_to_rebootstrap_from_while_only_bootstrap_servers_are_known() -> None:
    p = RebootstrapPolicy(enabled=True, trigger_s=0)
    p.attempt_started(0.0)
    assert p.after_failure(50.0, known_brokers=set(), failed={-1}) is None


def test_none_never_rebootstraps() -> None:
    p = RebootstrapPolicy(enabled=False, trigger_s=0)
    p.attempt_started(0.0)
    assert p.after_failure(9e9, known_brokers={1}, failed={1}, error_code=REBOOTSTRAP_REQUIRED) is None


def test_a_rebootstrap_restarts_the_trigger_period() -> None:
    p = RebootstrapPolicy(enabled=True, trigger_s=10)
    p.attempt_started(0.0)
    p.rebootstrapped(20.0)
    assert p.count == 1
    assert p.after_failure(25.0, known_brokers={1, 2}, failed={1}) is None
    assert p.after_failure(30.0, known_brokers={1, 2}, failed={1}) is not None
