"""pytest plugin (registered through the ``pytest11`` entry point).

Options select where integration tests find Kafka; the fixtures arrive with the
embedded broker.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aiokafka_lite", "Kafka for integration tests")
    group.addoption(
        "--kafka",
        choices=("embedded", "container"),
        default="embedded",
        help="where the kafka_bootstrap fixture gets a cluster: the embedded broker (default) or a testcontainers Kafka",
    )
    group.addoption(
        "--kafka-bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="use an external Kafka cluster at these bootstrap servers",
    )
