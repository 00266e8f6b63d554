"""broker.group_configs: the checks Kafka 4.4 makes on GROUP resource configs, with its messages."""

from __future__ import annotations

import pytest

from aiokafka_lite.broker.group_configs import GROUP_CONFIGS, validate_group_config

BAD_INT = "Invalid value {v} for configuration {n}: Not a number of type INT"


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("share.delivery.count.limit", "five", BAD_INT.format(v="five", n="share.delivery.count.limit")),
        (
            "share.delivery.count.limit",
            "1",
            "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2",
        ),
        (
            "share.delivery.count.limit",
            "11",
            "share.delivery.count.limit must be in the range 2 to 10 inclusive.",
        ),
        ("share.delivery.count.limit", " 10 ", None),
        # ConfigDef's lower bound (1000) first, then the broker's range (15000..60000).
        (
            "share.record.lock.duration.ms",
            "999",
            "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000",
        ),
        (
            "share.record.lock.duration.ms",
            "1000",
            "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.",
        ),
        (
            "consumer.session.timeout.ms",
            "60001",
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
        ),
        (
            "consumer.heartbeat.interval.ms",
            "4999",
            "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive.",
        ),
        (
            "consumer.assignment.interval.ms",
            "15001",
            "consumer.assignment.interval.ms must be in the range 0 to 15000 inclusive.",
        ),
        ("streams.num.standby.replicas", "3", "streams.num.standby.replicas must be less than or equal to 2"),
        (
            "streams.num.standby.replicas",
            "-1",
            "Invalid value -1 for configuration streams.num.standby.replicas: Value must be at least 0",
        ),
        ("streams.initial.rebalance.delay.ms", "99999999", None),
        (
            "share.renew.acknowledge.enable",
            "yes",
            "Invalid value yes for configuration share.renew.acknowledge.enable: "
            "Expected value to be either true or false",
        ),
        ("share.renew.acknowledge.enable", " FALSE", None),
        (
            "share.isolation.level",
            "READ_COMMITTED",
            "Invalid value READ_COMMITTED for configuration share.isolation.level: "
            "String must be one of: read_committed, read_uncommitted",
        ),
        (
            "share.auto.offset.reset",
            "by_duration:-PT1H",
            "Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: The value must be "
            "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
        ),
        ("share.auto.offset.reset", "by_duration:P1DT2H", None),
        (
            "streams.assignor.name",
            "range",
            "streams.assignor.name 'range' is not a registered task assignor. Registered assignors are: [sticky].",
        ),
        (
            "errors.deadletterqueue.topic.name",
            "__dlq",
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'",
        ),
        ("errors.deadletterqueue.topic.name", "_dlq", None),
        ("streams.rack.aware.assignment.tags", "zone,rack", None),
        ("no.such.config", "1", "Unknown group config name: no.such.config"),
        ("no.such.config", None, None),  # a DELETE is accepted for any name
    ],
)
def test_checks_and_messages(name: str, value: str | None, problem: str | None) -> None:
    assert validate_group_config(name, value) == problem


def test_broker_configs_move_the_range() -> None:
    broker = {
        "group.share.min.record.lock.duration.ms": "1000",
        "group.share.max.record.lock.duration.ms": "90000",
        "group.streams.max.standby.replicas": "5",
        "group.consumer.max.assignment.interval.ms": " 20000 ",
        "group.share.max.delivery.count.limit": "many",  # not a number: the default bound holds
    }
    assert validate_group_config("share.record.lock.duration.ms", "1000", broker) is None
    assert validate_group_config("share.record.lock.duration.ms", "90001", broker) == (
        "share.record.lock.duration.ms must be in the range 1000 to 90000 inclusive."
    )
    assert validate_group_config("streams.num.standby.replicas", "5", broker) is None
    assert validate_group_config("streams.num.standby.replicas", "6", broker) == (
        "streams.num.standby.replicas must be less than or equal to 5"
    )
    assert validate_group_config("consumer.assignment.interval.ms", "20000", broker) is None
    assert validate_group_config("share.delivery.count.limit", "11", broker) == (
        "share.delivery.count.limit must be in the range 2 to 10 inclusive."
    )


def test_every_default_passes_its_own_checks() -> None:
    for name, config in GROUP_CONFIGS.items():
        assert validate_group_config(name, config.default) is None, name
