"""Record batch codec benchmark: aiokafka_lite vs aiokafka (C) vs kafka-python.

Workload: one batch of 10,000 records (10-byte key, 100-byte value, one header),
uncompressed and lz4. "encode" = builder + append x N + build; "decode" = parse the
batch, verify its CRC and materialise all record objects (what a consumer does with
check_crcs on). Prints records/s (best of several interleaved runs) and ours/aiokafka ratios.

Run: /work/venv/bin/python bench/codec.py [--records N] [--repeat R]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from aiokafka_lite.wire.compression import Compression
from aiokafka_lite.wire.records import _pyimpl, _v2
from aiokafka_lite.wire.records import decode_batches as lite_decode_batches

Workload = list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]]


def make_workload(n: int, unique_headers: bool = False) -> Workload:
    base_ts = 1_700_000_000_000
    return [
        (
            base_ts + i,
            b"key-%06d" % i,
            (b"value-%08d-" % i).ljust(100, b"x"),
            [("trace-id", b"%016x" % (i * 0x9E3779B1) if unique_headers else b"abcdef0123456789")],
        )
        for i in range(n)
    ]


def interleaved_best(fns: list[Callable[[], Any]], repeat: int) -> list[float]:
    """Best time of each function, running them round-robin so that background load
    (this machine is shared) hits every implementation alike."""
    for fn in fns:
        fn()  # warm up
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            gc.collect()
            t0 = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - t0
            del result  # freeing the records is the caller's later cost, not part of decoding
            best[i] = min(best[i], elapsed)
    return best


# ---------------------------------------------------------------- aiokafka_lite


def lite_encoder(builder_cls: type, codec: Compression, work: Workload) -> Callable[[], bytes]:
    def run() -> bytes:
        b = builder_cls(compression=codec, max_batch_size=1 << 30)
        append = b.append
        for ts, k, v, h in work:
            append(ts, k, v, h)
        return bytes(b.build(producer_id=-1, producer_epoch=-1, base_sequence=-1))

    return run


def lite_decoder(data: bytes, n: int) -> Callable[[], Any]:
    def run() -> Any:
        out = []
        for batch in lite_decode_batches(data):  # CRC checked by default
            out.extend(batch.records())
        assert len(out) == n
        return out

    return run


def py_decoder(data: bytes, n: int) -> Callable[[], Any]:
    """Same as lite_decoder with the pure-Python record loop swapped in."""
    inner = lite_decoder(data, n)

    def run() -> Any:
        saved = _v2.decode_records
        _v2.decode_records = _pyimpl.decode_records
        try:
            return inner()
        finally:
            _v2.decode_records = saved

    return run


# ---------------------------------------------------------------- aiokafka


def aiokafka_impls() -> tuple[Any, Any] | None:
    try:
        from aiokafka.record._crecords import DefaultRecordBatch, DefaultRecordBatchBuilder
    except ImportError:
        return None
    return DefaultRecordBatchBuilder, DefaultRecordBatch


def ak_encoder(builder_cls: Any, codec: Compression, work: Workload) -> Callable[[], bytes]:
    def run() -> bytes:
        b = builder_cls(2, int(codec), 0, -1, -1, -1, 1 << 30)
        append = b.append
        for i, (ts, k, v, h) in enumerate(work):
            append(i, ts, k, v, h)
        return bytes(b.build())

    return run


def ak_decoder(batch_cls: Any, data: bytes, n: int) -> Callable[[], Any]:
    def run() -> Any:
        batch = batch_cls(data)
        batch.validate_crc()
        out = list(batch)
        assert len(out) == n
        return out

    return run


# ---------------------------------------------------------------- kafka-python


def kp_encoder(codec: Compression, work: Workload) -> Callable[[], bytes]:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    def run() -> bytes:
        b = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 30)
        append = b.append
        for i, (ts, k, v, h) in enumerate(work):
            append(i, ts, k, v, h)
        return bytes(b.build())

    return run


def kp_decoder(data: bytes, n: int) -> Callable[[], Any]:
    from kafka.record.default_records import DefaultRecordBatch

    def run() -> Any:
        batch = DefaultRecordBatch(data)
        batch.validate_crc()
        out = list(batch)
        assert len(out) == n
        return out

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--unique-headers",
        action="store_true",
        help="a different header value per record (defeats value sharing)",
    )
    args = parser.parse_args()
    n, repeat = args.records, args.repeat
    work = make_workload(n, args.unique_headers)
    ak = aiokafka_impls()

    rows: list[tuple[str, str, str, float]] = []
    for codec in (Compression.NONE, Compression.LZ4):
        name = codec.name.lower()
        ref = lite_encoder(_v2.PyBatchBuilder, codec, work)()
        impls: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = []
        if _v2.CBatchBuilder is not None:
            impls.append(
                ("aiokafka_lite (C)", lite_encoder(_v2.CBatchBuilder, codec, work), lite_decoder(ref, n))
            )
        impls.append(
            ("aiokafka_lite (pure Python)", lite_encoder(_v2.PyBatchBuilder, codec, work), py_decoder(ref, n))
        )
        if ak is not None:
            impls.append(("aiokafka (C)", ak_encoder(ak[0], codec, work), ak_decoder(ak[1], ref, n)))
        impls.append(("kafka-python", kp_encoder(codec, work), kp_decoder(ref, n)))
        for op in ("encode", "decode"):
            fns = [enc if op == "encode" else dec for _, enc, dec in impls]
            times = interleaved_best(fns, repeat)
            rows.extend((name, op, impl[0], n / t) for impl, t in zip(impls, times, strict=True))

    headers = "unique" if args.unique_headers else "repeated"
    print(f"\n{n} records/batch, 10 B keys, 100 B values, 1 header ({headers} value); best of {repeat}\n")
    print(f"{'codec':<6} {'op':<7} {'implementation':<28} {'records/s':>14} {'vs aiokafka C':>14}")
    print("-" * 73)
    for codec_name, op, label, rate in rows:
        base = next(
            (r for c, o, lab, r in rows if c == codec_name and o == op and lab == "aiokafka (C)"), None
        )
        ratio = f"{rate / base:.2f}x" if base else "n/a"
        print(f"{codec_name:<6} {op:<7} {label:<28} {rate:>14,.0f} {ratio:>14}")


if __name__ == "__main__":
    main()
