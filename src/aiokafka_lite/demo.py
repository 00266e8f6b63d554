"""The README's main job: a short tour of the wire layer.

Encodes a Produce request carrying an lz4-compressed record batch into a complete
frame, decodes it back as a broker would, and prints what happened at each step.
"""

from __future__ import annotations

import sys
import time

from aiokafka_lite.wire.framing import decode_request, encode_request
from aiokafka_lite.wire.messages import ProduceRequest
from aiokafka_lite.wire.records import BatchBuilder, Compression, decode_batches


def main() -> int:
    records = 1000
    builder = BatchBuilder(compression=Compression.LZ4, max_batch_size=1 << 20)
    now_ms = int(time.time() * 1000)
    for i in range(records):
        builder.append(
            now_ms + i, f"key-{i % 10}".encode(), f"value {i} ".encode() * 8, [("source", b"demo")]
        )
    batch = builder.build(producer_id=1000, producer_epoch=0, base_sequence=0)
    print(f"built a record batch: {records} records, lz4, {len(batch)} bytes")

    request = ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="events", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    version = ProduceRequest.MAX_VERSION - 1  # the newest version that still names topics
    frame = encode_request(request, version, correlation_id=1, client_id="demo")
    print(f"encoded ProduceRequest v{version}: frame of {len(frame)} bytes")

    decoded = decode_request(frame[4:])
    part = decoded.body.topic_data[0].partition_data[0]  # type: ignore[attr-defined]
    assert part.records is not None
    (batch_back,) = decode_batches(part.records)
    back = batch_back.records()
    print(
        f"decoded: api key {decoded.api_key} v{decoded.api_version}, correlation id {decoded.correlation_id}, "
        f"client id {decoded.header.client_id!r}"
    )
    print(
        f"batch: {batch_back.record_count} records, compression {Compression(batch_back.compression).name}, "
        f"producer id {batch_back.producer_id}, CRC ok"
    )
    print(f"first record: key={back[0].key!r} value={back[0].value!r} headers={back[0].headers}")
    if len(back) != records or back[-1].value != f"value {records - 1} ".encode() * 8:
        print("round trip FAILED", file=sys.stderr)
        return 1
    print("round trip ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
