"""The ``async_iterator.py`` tour on trio: the same client code under ``trio.run``.

    python examples/async_iterator_trio.py                       # embedded broker, in a thread
    python examples/async_iterator_trio.py --bootstrap HOST:PORT # any Kafka cluster

Producer, Consumer and Admin run unchanged on trio (through anyio); each client's
background tasks live in a task group it enters at ``async with`` and leaves at exit.
The embedded broker is asyncio code, so here it runs on its own loop in a thread.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import uuid

import trio
from async_iterator import tour  # the same tour as the asyncio example (this directory)

from aiokafka_lite import Admin, NewTopic
from aiokafka_lite.testing.threaded import ThreadedCluster


async def main(bootstrap: str | None) -> None:
    print(f"running on trio {trio.__version__}")
    external = bootstrap is not None
    with contextlib.ExitStack() as stack:
        if bootstrap is None:  # no cluster given: an embedded broker on its own loop and thread
            cluster = ThreadedCluster()
            cluster.start()
            stack.callback(cluster.close)
            bootstrap = cluster.bootstrap
        topic = f"iter-{uuid.uuid4().hex[:6]}"
        async with Admin(bootstrap) as admin:
            (await admin.create_topics([NewTopic(topic, partitions=3)])).raise_errors()
        try:
            await tour(bootstrap, topic)
        finally:
            if external:  # leave a real cluster as we found it
                async with Admin(bootstrap) as admin:
                    await admin.delete_topics([topic])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP") or None,
        help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP, else an embedded broker)",
    )
    trio.run(main, parser.parse_args().bootstrap)
