"""A background-job service on a Kafka share group: N workers, retries and a dead-letter topic.

    python examples/job_queue.py                       # embedded broker, in this process
    python examples/job_queue.py --bootstrap HOST:PORT # Kafka 4.2+ (share groups are GA there)
    python examples/job_queue.py --workers 5 --jobs 500

Jobs go to a 2-partition topic. Several workers (share-group members, here tasks of one
process; in production separate processes) consume it together, more of them than there
are partitions: a share group hands each record to one member under a lock and takes its
acknowledgement record by record. Each worker runs ``ShareWorkers`` with 4 handlers.

* a job whose handler returns is accepted: never delivered again;
* a *flaky* job fails on its first delivery: it is released, and the broker delivers it
  again (to any worker) with ``delivery_count`` 2, where it succeeds;
* a *poison* job always fails: after ``MAX_ATTEMPTS`` deliveries it is copied to the
  dead-letter topic, with the error in its headers, and rejected (never delivered
  again). The group's ``share.delivery.count.limit`` is set to the same number, so the
  broker's own poison-record limit agrees with the workers'.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import uuid
from collections import Counter

from aiokafka_lite import Admin, Consumer, NewTopic, Producer, Record
from aiokafka_lite.admin.types import ConfigResource
from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.consume.share import ShareConsumer, ShareRecord
from aiokafka_lite.core.errors import UnsupportedVersionError
from aiokafka_lite.processing import ShareWorkers

PARTITIONS = 2
MAX_ATTEMPTS = 3
HANDLERS_PER_WORKER = 4


class JobFailed(Exception):
    """What a handler raises for a job it cannot do (this time)."""


def make_jobs(count: int) -> list[dict[str, object]]:
    """Jobs with a kind: mostly fine, every 40th flaky, every 67th poison (from job 13 on)."""
    jobs: list[dict[str, object]] = []
    for n in range(count):
        kind = "poison" if n % 67 == 13 else "flaky" if n % 40 == 7 else "ok"
        jobs.append({"id": n, "kind": kind, "payload": f"thumbnail {n}.png"})
    return jobs


async def main(bootstrap: str | None, workers: int, job_count: int) -> None:
    external = bootstrap is not None
    async with contextlib.AsyncExitStack() as stack:
        if bootstrap is None:  # no cluster given: run an embedded broker in this process
            bootstrap = (await stack.enter_async_context(EmbeddedCluster())).bootstrap
        topic = f"jobs-{uuid.uuid4().hex[:6]}"
        dead_letters = f"{topic}.dlt"
        group = f"{topic}-workers"
        admin = await stack.enter_async_context(Admin(bootstrap))
        probe = (await admin.describe_share_groups([group]))[group].error
        if isinstance(probe, UnsupportedVersionError):
            raise SystemExit(
                f"this Kafka has no share groups ({probe}): job_queue needs Apache Kafka 4.2 "
                "or later (or the embedded broker)"
            )
        (
            await admin.create_topics(
                [NewTopic(topic, partitions=PARTITIONS), NewTopic(dead_letters, partitions=1)]
            )
        ).raise_errors()
        # A share group starts at the latest offset by default, and its poison limit is 5.
        (
            await admin.incremental_alter_configs(
                {
                    ConfigResource.group(group): {
                        "share.auto.offset.reset": "earliest",
                        "share.delivery.count.limit": str(MAX_ATTEMPTS),
                    }
                }
            )
        ).raise_errors()

        jobs = make_jobs(job_count)
        kinds = Counter(str(j["kind"]) for j in jobs)
        async with Producer(bootstrap) as producer:
            await producer.send_batch(
                topic, [json.dumps(j).encode() for j in jobs], keys=[b"%d" % int(str(j["id"])) for j in jobs]
            )
        print(
            f"submitted {job_count} jobs to {topic} ({PARTITIONS} partitions): "
            f"{kinds['flaky']} flaky, {kinds['poison']} poison"
        )

        done: Counter[int] = Counter()  # job id -> times completed
        deliveries_when_done: dict[int, int] = {}
        finished = asyncio.Event()
        all_workers: list[ShareWorkers] = []

        def check_finished() -> None:
            dead = sum(w.stats.dead_lettered for w in all_workers)
            if len(done) + dead >= job_count:
                finished.set()

        async def handle(record: ShareRecord) -> None:
            job = json.loads(record.value)
            await asyncio.sleep(random.uniform(0.001, 0.005))  # "render the thumbnail"
            if job["kind"] == "poison":
                raise JobFailed(f"cannot decode {job['payload']}")
            if job["kind"] == "flaky" and record.delivery_count == 1:
                raise JobFailed(f"storage timeout for {job['payload']}")
            done[job["id"]] += 1
            deliveries_when_done[job["id"]] = record.delivery_count

        async def worker(name: str) -> None:
            consumer = ShareConsumer(
                bootstrap,
                group_id=group,
                topics=[topic],
                acknowledgement_mode="explicit",  # ShareWorkers acknowledges each job itself
                max_poll_records=10,
                share_acquire_mode="record_limit",  # small acquisitions spread the jobs over workers
                client_id=name,
            )
            async with consumer, Producer(bootstrap, client_id=f"{name}-dlt") as dlt_producer:
                workers_ = ShareWorkers(
                    consumer,
                    handle,
                    concurrency=HANDLERS_PER_WORKER,
                    max_attempts=MAX_ATTEMPTS,
                    dead_letter_topic=dead_letters,
                    producer=dlt_producer,
                )
                all_workers.append(workers_)
                run = asyncio.create_task(workers_.run())
                while not finished.is_set():
                    check_finished()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(finished.wait(), 0.1)
                workers_.stop()  # finish the jobs in hand, acknowledge them
                await run
                s = workers_.stats
                print(
                    f"{name}: accepted {s.accepted}, released {s.released}, "
                    f"rejected {s.rejected}, dead-lettered {s.dead_lettered}"
                )

        async with asyncio.timeout(120):
            await asyncio.gather(*(worker(f"worker-{i}") for i in range(workers)))

        twice = sum(n - 1 for n in done.values())
        print(f"completed {len(done)} distinct jobs, {twice} more than once")
        flaky_ids = [int(str(j["id"])) for j in jobs if j["kind"] == "flaky"]
        retried = Counter(deliveries_when_done.get(i, 0) for i in flaky_ids)
        print(f"flaky jobs completed on delivery: {dict(sorted(retried.items()))}")

        # The dead letters, read back with a plain consumer.
        letters: list[Record] = []
        async with Consumer(bootstrap, topics=dead_letters, auto_offset_reset="earliest") as reader:
            async with asyncio.timeout(30):
                while len(letters) < kinds["poison"]:
                    for batch in (await reader.getmany(timeout_ms=500)).values():
                        letters += batch
        print(f"dead-letter topic {dead_letters}: {len(letters)} jobs")
        for r in sorted(letters, key=lambda r: json.loads(r.value)["id"]):
            h = {k: (v or b"").decode() for k, v in r.headers}
            print(
                f"  job {json.loads(r.value)['id']}: {h['dlt.error.type']}: {h['dlt.error']} "
                f"(after {h['dlt.delivery.count']} deliveries, from {h['dlt.topic']}-{h['dlt.partition']}"
                f"@{h['dlt.offset']})"
            )
        if external:  # leave a real cluster as we found it
            await admin.delete_groups([group])
            await admin.delete_topics([topic, dead_letters])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP") or None,
        help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP, else an embedded broker)",
    )
    parser.add_argument("--workers", type=int, default=3, help="share-group members (default 3)")
    parser.add_argument("--jobs", type=int, default=200, help="jobs to submit (default 200)")
    args = parser.parse_args()
    asyncio.run(main(args.bootstrap, args.workers, args.jobs))
