"""Run an embedded Kafka-compatible cluster as a process.

    python -m aiokafka_lite.broker --host 127.0.0.1 --port 9092 --brokers 1 \\
        [--data-dir DIR] [--topic NAME:PARTITIONS ...]
    python -m aiokafka_lite.broker --bootstrap 127.0.0.1:9092 ...   # as aiokafka-lite broker

Prints ``listening on HOST:PORT[,HOST:PORT...]`` once every broker accepts connections
and shuts down cleanly on SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import ssl
import sys
from collections.abc import Sequence

from aiokafka_lite.broker.cluster import EmbeddedCluster
from aiokafka_lite.broker.state import BrokerConfig


def _topic_arg(text: str) -> tuple[str, int]:
    name, sep, count = text.rpartition(":")
    if not sep:
        return text, 1
    try:
        n = int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad partition count in {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"partition count must be positive in {text!r}")
    return name, n


def parse_listen_address(bootstrap: str) -> tuple[str, int]:
    """The first ``HOST:PORT`` of a bootstrap list as the address to listen on (port 0:
    any free port; IPv6 as ``[::1]:9092``). ``ValueError`` says what is wrong."""
    first = bootstrap.split(",")[0].strip()
    host, sep, port_text = first.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"expected HOST:PORT, got {bootstrap!r}")
    return host, int(port_text)


def _listen_arg(text: str) -> tuple[str, int]:
    try:
        return parse_listen_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _user_arg(text: str) -> tuple[str, str]:
    user, sep, pw = text.partition(":")
    if not sep or not user:
        raise argparse.ArgumentTypeError("expected USER:PASSWORD")
    return user, pw


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m aiokafka_lite.broker", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port",
        type=int,
        default=None,
        help="port of the first broker; broker i uses PORT+i (0: any free port; default 9092)",
    )
    p.add_argument(
        "--bootstrap",
        type=_listen_arg,
        default=None,
        metavar="HOST:PORT",
        help="the bootstrap address clients will use, i.e. --host and --port in one "
        "(as in aiokafka-lite broker)",
    )
    p.add_argument("--brokers", type=int, default=1, help="number of brokers (default 1)")
    p.add_argument("--data-dir", default=None, help="persist logs and metadata here (default: in memory)")
    p.add_argument(
        "--fsync",
        choices=("shutdown", "always", "never"),
        default="shutdown",
        help="fsync policy with --data-dir",
    )
    p.add_argument(
        "--topic",
        action="append",
        type=_topic_arg,
        default=[],
        metavar="NAME:PARTITIONS",
        help="create a topic at start (repeatable)",
    )
    p.add_argument(
        "--partitions", type=int, default=1, help="partitions of auto-created topics (num.partitions)"
    )
    p.add_argument("--no-auto-create", action="store_true", help="disable auto topic creation")
    p.add_argument(
        "--sasl-user",
        action="append",
        type=_user_arg,
        default=[],
        metavar="USER:PASSWORD",
        help="enable SASL (PLAIN, SCRAM-SHA-256/512) with this user (repeatable)",
    )
    p.add_argument("--tls-cert", default=None, help="PEM certificate chain: serve TLS")
    p.add_argument("--tls-key", default=None, help="PEM private key for --tls-cert")
    p.add_argument(
        "--schema-registry",
        action="store_true",
        help="also serve a schema registry (Confluent's REST API; needs the [schemas] extra)",
    )
    p.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")
    args = p.parse_args(argv)
    if args.bootstrap is not None:
        if args.host is not None or args.port is not None:
            p.error("--bootstrap HOST:PORT replaces --host and --port: give one or the other")
        args.host, args.port = args.bootstrap
    args.host = "127.0.0.1" if args.host is None else args.host
    args.port = 9092 if args.port is None else args.port
    if args.brokers < 1:
        p.error("--brokers must be at least 1")
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")
    return args


async def serve(args: argparse.Namespace) -> int:
    ctx = None
    if args.tls_cert:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
    cluster = EmbeddedCluster(
        brokers=args.brokers,
        host=args.host,
        port=args.port,
        topics=dict(args.topic),
        data_dir=args.data_dir,
        fsync=args.fsync,
        ssl_context=ctx,
        sasl_users=dict(args.sasl_user) if args.sasl_user else None,
        config=BrokerConfig(auto_create_topics=not args.no_auto_create, default_partitions=args.partitions),
        schema_registry=args.schema_registry,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await cluster.start()
    except OSError as e:
        print(f"cannot listen: {e}", file=sys.stderr, flush=True)
        return 1
    try:
        print(f"listening on {cluster.bootstrap}", flush=True)
        if args.schema_registry:
            print(f"schema registry on {cluster.schema_registry_url}", flush=True)
        await stop.wait()
    finally:
        await cluster.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
