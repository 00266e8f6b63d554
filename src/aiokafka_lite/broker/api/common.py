"""Helpers shared by the API handlers."""

from __future__ import annotations

from typing import Any, Final

from aiokafka_lite.broker.context import RequestContext
from aiokafka_lite.broker.state import Partition
from aiokafka_lite.core.errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from aiokafka_lite.wire.message import Message, Request, Response, Struct
from aiokafka_lite.wire.messages import RESPONSES

__all__ = ["CloseConnection", "check_leader", "error_response"]

NONE: Final = 0
NOT_LEADER: Final = NotLeaderOrFollowerError.code


class CloseConnection(Exception):
    """Raised by a handler to close the connection without a response (Kafka does this
    for acks=0 produce errors and protocol violations)."""


def check_leader(ctx: RequestContext, p: Partition, current_leader_epoch: int = -1) -> int:
    """Error code for serving ``p`` on this broker: NONE, NOT_LEADER_OR_FOLLOWER, or a
    fenced/unknown leader epoch when the client names one."""
    if p.leader_id != ctx.broker_id:
        return NOT_LEADER
    if current_leader_epoch >= 0:
        if current_leader_epoch < p.leader_epoch:
            return FencedLeaderEpochError.code
        if current_leader_epoch > p.leader_epoch:
            return UnknownLeaderEpochError.code
    return NONE


# -- generic error responses -------------------------------------------------------
# A response that fails every item of the request with one error code, built by
# mirroring the request's structure into the response schema (topics -> topics,
# partitions -> partitions, names and indexes copied). Used for fault injection and
# for handler crashes (UNKNOWN_SERVER_ERROR), the way Kafka builds error responses.

_ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "partition_index": ("partition_index", "partition", "index"),
    "partition": ("partition", "partition_index", "index"),
    "index": ("index", "partition_index", "partition"),
    "name": ("name", "topic", "resource_name"),
    "topic": ("topic", "name"),
    "key": ("key",),
}
_MINUS_ONE: Final = frozenset(
    {
        "base_offset",
        "offset",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "end_offset",
        "committed_offset",
        "low_watermark",
        "producer_id",
        "leader_id",
        "node_id",
        "leader_epoch",
    }
)


def _present(spec: Any, v: int) -> bool:
    lo, hi = spec.versions
    return bool(lo <= v <= hi)


def _struct_cls(top: type[Message], type_name: str) -> type[Struct] | None:
    cls = getattr(top, type_name, None)
    return cls if isinstance(cls, type) and issubclass(cls, Struct) else None


def _carries_error(cls: type[Struct], top: type[Message], v: int, depth: int = 0) -> bool:
    for f in cls.FIELDS:
        if not _present(f, v):
            continue
        if f.name == "error_code" or f.name.endswith("_error_code"):
            return True
        if f.type.startswith("[]") and depth < 4:
            sub = _struct_cls(top, f.type[2:])
            if sub is not None and _carries_error(sub, top, v, depth + 1):
                return True
    return False


def _mirror(
    src: Struct | None,
    dst_cls: type[Struct],
    top_req: type[Message],
    top_resp: type[Message],
    v: int,
    code: int,
) -> Struct:
    dst = dst_cls()
    src_specs = {f.name: f for f in src.FIELDS if _present(f, v)} if src is not None else {}
    src_lists = [f for f in src_specs.values() if f.type.startswith("[]")]
    dst_lists = [f for f in dst.FIELDS if _present(f, v) and f.type.startswith("[]")]
    # Pair response lists with request lists: same name first, then in order among the
    # rest (only lists whose items can carry an error).
    pairs: dict[str, str] = {}
    free_src = [f.name for f in src_lists]
    for f in dst_lists:
        if f.name in src_specs and f.name in free_src:
            pairs[f.name] = f.name
            free_src.remove(f.name)
    for f in dst_lists:
        if f.name not in pairs and free_src:
            elem_cls = _struct_cls(top_resp, f.type[2:])
            if elem_cls is not None and _carries_error(elem_cls, top_resp, v):
                pairs[f.name] = free_src.pop(0)
    for f in dst.FIELDS:
        if not _present(f, v):
            continue
        if f.name == "error_code" or f.name.endswith("_error_code"):
            setattr(dst, f.name, code)
        elif f.name == "error_message":
            setattr(dst, f.name, None)
        elif f.type.startswith("[]"):
            elem = f.type[2:]
            elem_cls = _struct_cls(top_resp, elem)
            if elem_cls is None or src is None:
                continue
            src_name = pairs.get(f.name)
            if src_name is None:
                continue
            match = src_specs[src_name]
            items = getattr(src, match.name) or []
            out: list[Struct] = []
            src_elem_cls = _struct_cls(top_req, match.type[2:])
            for item in items:
                if src_elem_cls is not None and isinstance(item, Struct):
                    out.append(_mirror(item, elem_cls, top_req, top_resp, v, code))
                else:
                    # A list of scalars (partition indexes, coordinator keys, group ids): one
                    # entry each, naming what it answers.
                    entry = _mirror(None, elem_cls, top_req, top_resp, v, code)
                    for cand in (
                        "partition_index",
                        "partition",
                        "index",
                        "key",
                        "group_id",
                        "transactional_id",
                        "name",
                    ):
                        if any(s.name == cand for s in entry.FIELDS):
                            setattr(entry, cand, item)
                            break
                    out.append(entry)
            setattr(dst, f.name, out)
        elif src is not None:
            for alias in _ALIASES.get(f.name, (f.name,)):
                s = src_specs.get(alias)
                if s is not None and not s.type.startswith("[]"):
                    val = getattr(src, alias)
                    default = getattr(dst, f.name)
                    if default is None or type(val) is type(default):
                        setattr(dst, f.name, val)
                    break
            else:
                if f.name in _MINUS_ONE:
                    setattr(dst, f.name, -1)
        elif f.name in _MINUS_ONE:
            setattr(dst, f.name, -1)
    return dst


# Fetch errors that concern the whole request (the session), not a partition.
_FETCH_REQUEST_LEVEL: Final = frozenset({70, 71, 106})  # session id not found, bad epoch, session topic id


def error_response(request: Request, version: int, code: int) -> Response:
    """A response of ``request``'s API that reports ``code`` for everything it asked.

    Fetch and Metadata carry the error per partition/topic only (their top-level error
    means something else), except fetch-session errors, which are top-level only.
    """
    resp_cls = RESPONSES[request.API_KEY]
    resp = _mirror(request, resp_cls, type(request), resp_cls, version, code)
    assert isinstance(resp, Response)
    if request.API_KEY == 1:  # Fetch
        if code in _FETCH_REQUEST_LEVEL:
            resp.responses = []  # type: ignore[attr-defined]
        else:
            resp.error_code = 0  # type: ignore[attr-defined]
    elif request.API_KEY == 3:  # Metadata
        resp.error_code = 0  # type: ignore[attr-defined]
    return resp
