"""Test support: the pytest plugin and helpers for testing against Kafka."""
