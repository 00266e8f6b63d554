"""Integrations with other systems, each optional and loaded only when imported:
OpenTelemetry (``otel``), Prometheus text exposition (``prometheus``), the ``logging``
handler (``log_handler``), MirrorMaker-style replication (``mirror``), the Spark source and
sink (``spark``) and Schema Registry serdes (``schema_registry``)."""
