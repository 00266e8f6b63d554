"""Persistence (--data-dir) and running the broker as a process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from aiokafka_lite.broker import EmbeddedCluster
from aiokafka_lite.testing.rawclient import RawClient
from aiokafka_lite.wire.messages import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DeleteRecordsRequest,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from aiokafka_lite.wire.records import decode_batches, encode_batch


async def produce(
    c: RawClient, records: bytes, partition: int = 0, txn_id: str | None = None
) -> ProduceResponse.PartitionProduceResponse:
    resp = await c.request(
        ProduceRequest(
            transactional_id=txn_id,
            acks=-1,
            timeout_ms=1000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name="t",
                    partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)],
                )
            ],
        ),
        9,
    )
    assert isinstance(resp, ProduceResponse)
    return resp.responses[0].partition_responses[0]


async def fetch_values(c: RawClient, offset: int = 0, isolation: int = 0) -> list[tuple[int, bytes | None]]:
    resp = await c.request(
        FetchRequest(
            max_wait_ms=0,
            isolation_level=isolation,
            topics=[
                FetchRequest.FetchTopic(
                    topic="t",
                    partitions=[
                        FetchRequest.FetchPartition(
                            partition=0, fetch_offset=offset, partition_max_bytes=1_000_000
                        )
                    ],
                )
            ],
        ),
        12,
    )
    assert isinstance(resp, FetchResponse)
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0, p
    return [
        (r.offset, r.value) for b in decode_batches(p.records or b"") if not b.is_control for r in b.records()
    ]


async def test_data_dir_survives_restart(tmp_path: Path) -> None:
    pid = 0
    async with EmbeddedCluster(data_dir=tmp_path) as cluster:
        topic = cluster.create_topic("t", 2, configs={"retention.ms": "123"})
        topic_id, cluster_id = topic.topic_id, cluster.state.cluster_id
        pid = cluster.state.allocate_producer_id()
        async with await RawClient.connect(cluster.bootstrap) as c:
            await produce(c, encode_batch([(1, None, b"a", []), (2, None, b"b", [])]))  # 0-1
            assert (
                await produce(
                    c, encode_batch([(3, None, b"c", [])], producer_id=pid, producer_epoch=0, base_sequence=0)
                )
            ).base_offset == 2
            # A transactional producer (the next producer id) with the partition in its
            # transaction, as Kafka requires before appending its batches.
            init = await c.request(
                InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4
            )
            assert isinstance(init, InitProducerIdResponse) and init.producer_id == pid + 1
            added = await c.request(
                AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id="tx",
                    v3_and_below_producer_id=pid + 1,
                    v3_and_below_producer_epoch=0,
                    v3_and_below_topics=[
                        AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[0])
                    ],
                ),
                3,
            )
            assert isinstance(added, AddPartitionsToTxnResponse)
            assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
            opened = await produce(
                c,
                encode_batch(
                    [(4, None, b"t1", [])],
                    producer_id=pid + 1,
                    producer_epoch=0,
                    base_sequence=0,
                    is_transactional=True,
                ),
                txn_id="tx",
            )  # 3, left open
            assert opened.error_code == 0, opened
            await produce(c, encode_batch([(5, None, b"d", [])]))  # 4
            await c.request(
                DeleteRecordsRequest(
                    timeout_ms=100,
                    topics=[
                        DeleteRecordsRequest.DeleteRecordsTopic(
                            name="t",
                            partitions=[
                                DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=1)
                            ],
                        )
                    ],
                ),
                2,
            )
    async with EmbeddedCluster(data_dir=tmp_path) as cluster:
        t = cluster.topic("t")
        assert (t.topic_id, cluster.state.cluster_id, t.configs) == (
            topic_id,
            cluster_id,
            {"retention.ms": "123"},
        )
        plog = t.partitions[0].log
        assert (plog.log_start_offset, plog.high_watermark, plog.last_stable_offset) == (1, 5, 3)
        assert cluster.state.allocate_producer_id() > pid + 1  # never reused
        async with await RawClient.connect(cluster.bootstrap) as c:
            assert await fetch_values(c, 1) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"t1"), (4, b"d")]
            # Producer state was rebuilt: the retry is recognised, the next sequence accepted.
            dup = await produce(
                c, encode_batch([(3, None, b"c", [])], producer_id=pid, producer_epoch=0, base_sequence=0)
            )
            assert (dup.error_code, dup.base_offset) == (0, 2)
            nxt = await produce(
                c, encode_batch([(6, None, b"e", [])], producer_id=pid, producer_epoch=0, base_sequence=1)
            )
            assert (nxt.error_code, nxt.base_offset) == (0, 5)
            plog.write_control_batch(pid + 1, 0, False, 0)  # abort the open transaction
    async with EmbeddedCluster(data_dir=tmp_path) as cluster:
        plog = cluster.topic("t").partitions[0].log
        assert plog.last_stable_offset == plog.high_watermark == 7
        assert [(a.producer_id, a.first_offset, a.last_offset) for a in plog.aborted] == [(pid + 1, 3, 6)]


async def test_torn_tail_is_cut(tmp_path: Path) -> None:
    async with EmbeddedCluster(data_dir=tmp_path, topics={"t": 1}) as cluster:
        topic_id = cluster.topic("t").topic_id
        async with await RawClient.connect(cluster.bootstrap) as c:
            await produce(c, encode_batch([(1, None, b"a", [])]))
    log_file = tmp_path / "logs" / str(topic_id) / "0.log"
    good = log_file.stat().st_size
    log_file.write_bytes(log_file.read_bytes() + encode_batch([(1, None, b"torn" * 10, [])])[:30])
    async with EmbeddedCluster(data_dir=tmp_path) as cluster:
        assert log_file.stat().st_size == good
        async with await RawClient.connect(cluster.bootstrap) as c:
            assert (await produce(c, encode_batch([(2, None, b"b", [])]))).base_offset == 1
            assert await fetch_values(c) == [(0, b"a"), (1, b"b")]


def _start(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiokafka_lite.broker", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        pytest.fail(f"unexpected first line {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}")
    return proc, line.removeprefix("listening on ")


def kcat_metadata(addrs: str) -> str:
    """``kcat -L`` against the broker process: an independent client's view of the cluster."""
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.fail(
            "kcat is not installed, and this test reads the broker's metadata with it: "
            "apt-get install kcat (Debian/Ubuntu; scripts/test.sh does this), or brew install kcat",
            pytrace=False,
        )
    r = subprocess.run([kcat, "-b", addrs, "-L"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_process(tmp_path: Path, sig: signal.Signals) -> None:
    proc, addrs = _start(
        [
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--brokers",
            "2",
            "--topic",
            "a:3",
            "--data-dir",
            str(tmp_path),
        ]
    )
    try:
        hosts = addrs.split(",")
        assert len(hosts) == 2 and all(h.startswith("127.0.0.1:") for h in hosts)
        out = kcat_metadata(addrs)
        assert "2 brokers" in out and 'topic "a" with 3 partitions' in out
        proc.send_signal(sig)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    # The topic persisted in the data dir.
    proc, addrs = _start(["--port", "0", "--data-dir", str(tmp_path)])
    try:
        assert 'topic "a" with 3 partitions' in kcat_metadata(addrs)
    finally:
        proc.terminate()
        assert proc.wait(15) == 0


def test_cli_rejects_bad_arguments() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "aiokafka_lite.broker", "--topic", "x:zero"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ},
    )
    assert r.returncode == 2 and "partition count" in r.stderr


@pytest.mark.parametrize("fsync", ["always", "never"])
async def test_fsync_policies(tmp_path: Path, fsync: str) -> None:
    async with EmbeddedCluster(data_dir=tmp_path, fsync=fsync, topics={"t": 1}) as cluster:  # type: ignore[arg-type]
        async with await RawClient.connect(cluster.bootstrap) as c:
            await produce(c, encode_batch([(1, None, b"kept", [])]))
    async with EmbeddedCluster(data_dir=tmp_path, fsync=fsync) as cluster:  # type: ignore[arg-type]
        async with await RawClient.connect(cluster.bootstrap) as c:
            assert await fetch_values(c) == [(0, b"kept")]
