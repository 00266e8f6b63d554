"""A protobuf wire-format reader for the tests' checks of OTLP payloads (independent of the
client's encoder)."""

from __future__ import annotations

import struct
from typing import Any

# Independent of the encoder: parses the wire format into {field number: [values]}.


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def pb(buf: bytes) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(buf, i)
        elif wire == 1:
            value, i = buf[i : i + 8], i + 8
        elif wire == 2:
            n, i = _read_varint(buf, i)
            value, i = buf[i : i + n], i + n
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def decode_metrics(data: bytes) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """(resource attributes, {metric name: {"kind", "temporality", "points": [(attrs, value)]}})."""
    (rm,) = pb(data)[1]
    rm_f = pb(rm)
    resource = {}
    for kv in pb(rm_f[1][0]).get(1, []):
        f = pb(kv)
        resource[f[1][0].decode()] = pb(f[2][0])[1][0].decode()
    metrics: dict[str, dict[str, Any]] = {}
    for sm in rm_f[2]:
        for m in pb(sm).get(2, []):
            mf = pb(m)
            name = mf[1][0].decode()
            if 7 in mf:
                kind, body = "sum", pb(mf[7][0])
            else:
                kind, body = "gauge", pb(mf[5][0])
            points = []
            for dp in body.get(1, []):
                d = pb(dp)
                attrs = {}
                for kv in d.get(7, []):
                    f = pb(kv)
                    attrs[f[1][0].decode()] = pb(f[2][0])[1][0].decode()
                if 6 in d:
                    value: float = struct.unpack("<q", d[6][0])[0]
                else:
                    value = struct.unpack("<d", d[4][0])[0]
                points.append(
                    (attrs, value, struct.unpack("<Q", d[2][0])[0], struct.unpack("<Q", d[3][0])[0])
                )
            metrics[name] = {
                "kind": kind,
                "temporality": body.get(2, [0])[0],
                "monotonic": body.get(3, [0])[0],
                "points": points,
            }
    return resource, metrics
