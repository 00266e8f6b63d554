"""Operator commands for replicas, leaders, log dirs, features and the KRaft quorum,
shaped after Kafka's own tools:

* ``reassign FILE`` / ``--verify FILE`` / ``--cancel FILE`` / ``--list``
  (``kafka-reassign-partitions.sh``; FILE is its JSON: ``{"version": 1, "partitions":
  [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}``). Executing prints the current
  assignment first, in the same format, to roll back with;
* ``elect-leaders`` (``kafka-leader-election.sh``): ``--election-type preferred|unclean``
  with ``--topic``/``--partition`` or ``--all-topic-partitions``;
* ``log-dirs`` (``kafka-log-dirs.sh --describe``): the same JSON document;
* ``features describe|upgrade|downgrade`` (``kafka-features.sh``): ``--feature
  name=level`` (repeatable), ``--unsafe`` downgrades, ``--dry-run`` validates only;
* ``quorum describe --status|--replication`` (``kafka-metadata-quorum.sh``).

Exit codes as every command: 0 done, 1 a Kafka error (a failed partition or feature
too), 2 bad usage.
"""

from __future__ import annotations

import base64
import json
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from aiokafka_lite.admin import (
    Admin,
    ElectionType,
    FeatureUpdate,
    QuorumInfo,
    QuorumReplicaState,
    UpgradeType,
)
from aiokafka_lite.cli._common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    ClientOptions,
    JsonOutput,
    Timeout,
    print_json,
    run_async,
    stdout_console,
)
from aiokafka_lite.cli._format import table
from aiokafka_lite.cli.topics import make_admin
from aiokafka_lite.core.errors import ElectionNotNeededError, KafkaError
from aiokafka_lite.core.structs import TopicPartition

__all__ = [
    "elect_leaders",
    "features_app",
    "log_dirs",
    "quorum_app",
    "reassign",
]


# ---------------------------------------------------------------------------- reassign


def _read_plan(path: Path) -> dict[TopicPartition, list[int]]:
    """Kafka's reassignment JSON -> {partition: replicas}; a bad file is a usage error."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"cannot read {path}: {exc}", param_hint="FILE") from None
    parts = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(parts, list) or not parts:
        raise typer.BadParameter(
            'expected {"version": 1, "partitions": [{"topic": ..., "partition": ..., "replicas": [...]}]}',
            param_hint="FILE",
        )
    plan: dict[TopicPartition, list[int]] = {}
    for entry in parts:
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("topic"), str)
            and isinstance(entry.get("partition"), int)
            and isinstance(entry.get("replicas"), list)
            and all(isinstance(r, int) for r in entry["replicas"])
        )
        if not ok:
            raise typer.BadParameter(f"bad partition entry {entry!r}", param_hint="FILE")
        if entry.get("log_dirs") not in (None, []) and any(d != "any" for d in entry["log_dirs"]):
            raise typer.BadParameter(
                f"log_dirs of {entry['topic']}-{entry['partition']}: moving replicas between "
                "log dirs is alter_replica_log_dirs; use 'any' here",
                param_hint="FILE",
            )
        tp = TopicPartition(entry["topic"], entry["partition"])
        if tp in plan:
            raise typer.BadParameter(f"{tp.topic}-{tp.partition} appears twice", param_hint="FILE")
        plan[tp] = list(entry["replicas"])
    return plan


def _plan_json(assignment: dict[TopicPartition, list[int]]) -> dict[str, Any]:
    return {
        "version": 1,
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": r, "log_dirs": ["any"] * len(r)}
            for tp, r in sorted(assignment.items())
        ],
    }


async def _current(admin: Admin, tps: list[TopicPartition]) -> dict[TopicPartition, list[int]]:
    described = await admin.describe_topics(sorted({tp.topic for tp in tps}))
    out: dict[TopicPartition, list[int]] = {}
    for tp in tps:
        d = described.get(tp.topic)
        if d is None or d.error is not None:
            continue
        for p in d.partitions:
            if p.partition == tp.partition:
                out[tp] = list(p.replicas)
    return out


def reassign(
    file: Annotated[
        Path | None, typer.Argument(help="Kafka's reassignment JSON (kafka-reassign-partitions.sh format).")
    ] = None,
    verify: Annotated[
        bool, typer.Option("--verify", help="Check whether the reassignment of FILE is done.")
    ] = False,
    cancel: Annotated[bool, typer.Option("--cancel", help="Cancel the reassignments of FILE.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the reassignments in flight.")] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Move partitions to new replicas (execute FILE), or --verify, --cancel, --list."""
    if sum((verify, cancel, list_)) > 1:
        raise typer.BadParameter("choose one of --verify, --cancel, --list")
    if list_:
        if file is not None:
            raise typer.BadParameter("--list takes no FILE")
        _list_reassignments(bootstrap, option, timeout, as_json)
        return
    if file is None:
        raise typer.BadParameter("give the reassignment JSON FILE (or --list)")
    plan = _read_plan(file)
    if verify:
        _verify(plan, bootstrap, option, timeout, as_json)
    elif cancel:
        _alter(plan, True, bootstrap, option, timeout, as_json)
    else:
        _alter(plan, False, bootstrap, option, timeout, as_json)


def _list_reassignments(bootstrap: str, option: list[str] | None, timeout: float, as_json: bool) -> None:
    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            ongoing = await admin.list_partition_reassignments()
        return [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": list(r.replicas),
                "adding": list(r.adding_replicas),
                "removing": list(r.removing_replicas),
            }
            for tp, r in sorted(ongoing.items())
        ]

    rows = run_async(go())
    if as_json:
        print_json(rows)
        return
    if not rows:
        stdout_console().print("No partition reassignments found.")
        return
    stdout_console().print(
        table(
            ("topic", "partition", "replicas", "adding", "removing"),
            ([r["topic"], r["partition"], r["replicas"], r["adding"], r["removing"]] for r in rows),
        )
    )


def _alter(
    plan: dict[TopicPartition, list[int]],
    cancel: bool,
    bootstrap: str,
    option: list[str] | None,
    timeout: float,
    as_json: bool,
) -> None:
    async def go() -> tuple[dict[TopicPartition, list[int]], dict[TopicPartition, KafkaError | None]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            current = {} if cancel else await _current(admin, list(plan))
            request: dict[TopicPartition, list[int] | None] = (
                dict.fromkeys(plan, None) if cancel else dict(plan.items())
            )
            res = await admin.alter_partition_reassignments(request)
        return current, {tp: r.error for tp, r in res.items()}

    current, errors = run_async(go())
    failed = {tp: e for tp, e in errors.items() if e is not None}
    if as_json:
        print_json(
            {
                "current": _plan_json(current) if not cancel else None,
                "results": [
                    {"topic": tp.topic, "partition": tp.partition, "error": None if e is None else str(e)}
                    for tp, e in sorted(errors.items())
                ],
            }
        )
    else:
        out = stdout_console()
        if not cancel:
            out.print("Current partition replica assignment\n")
            out.print(json.dumps(_plan_json(current)), markup=False)
            out.print("\nSave this to use as the --reassignment-json-file option during rollback")
        done = sorted(tp for tp, e in errors.items() if e is None)
        if done:
            what = "cancelled" if cancel else "started"
            names = ",".join(f"{tp.topic}-{tp.partition}" for tp in done)
            out.print(f"Successfully {what} partition reassignment(s) for {names}", markup=False)
        for tp, e in sorted(failed.items()):
            out.print(f"Error for {tp.topic}-{tp.partition}: {type(e).__name__}: {e}", markup=False)
    if failed:
        raise typer.Exit(1)


def _verify(
    plan: dict[TopicPartition, list[int]],
    bootstrap: str,
    option: list[str] | None,
    timeout: float,
    as_json: bool,
) -> None:
    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            ongoing = await admin.list_partition_reassignments(list(plan))
            current = await _current(admin, list(plan))
        rows = []
        for tp, target in sorted(plan.items()):
            if tp in ongoing:
                state = "in progress"
            elif current.get(tp) == target:
                state = "complete"
            elif tp not in current:
                state = "unknown partition"
            else:
                state = "not started"  # neither in flight nor done: cancelled, or never executed
            rows.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "target": target,
                    "current": current.get(tp),
                    "state": state,
                }
            )
        return rows

    rows = run_async(go())
    if as_json:
        print_json(rows)
    else:
        out = stdout_console()
        out.print("Status of partition reassignment:")
        for r in rows:
            name = f"{r['topic']}-{r['partition']}"
            if r["state"] == "complete":
                out.print(f"Reassignment of partition {name} is completed.", markup=False)
            elif r["state"] == "in progress":
                out.print(f"Reassignment of partition {name} is still in progress.", markup=False)
            else:
                out.print(
                    f"There is no active reassignment of partition {name}, but replica set is "
                    f"{r['current']} rather than {r['target']}.",
                    markup=False,
                )
    if any(r["state"] != "complete" for r in rows):
        raise typer.Exit(1)


# ---------------------------------------------------------------------------- elect-leaders


def elect_leaders(
    election_type: Annotated[
        str, typer.Option("--election-type", help="preferred or unclean.", case_sensitive=False)
    ],
    topic: Annotated[str | None, typer.Option("--topic", help="The topic of the partition(s).")] = None,
    partition: Annotated[
        list[int] | None,
        typer.Option("--partition", help="A partition of --topic (repeatable; default all)."),
    ] = None,
    all_partitions: Annotated[
        bool, typer.Option("--all-topic-partitions", help="Every partition of the cluster.")
    ] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Elect preferred (or, unclean, any live) replicas as partition leaders."""
    kind = election_type.lower()
    if kind not in ("preferred", "unclean"):
        raise typer.BadParameter("preferred or unclean", param_hint="--election-type")
    if all_partitions == (topic is not None):
        raise typer.BadParameter("give --topic (with --partition) or --all-topic-partitions")
    if partition and topic is None:
        raise typer.BadParameter("--partition needs --topic")
    etype = ElectionType.PREFERRED if kind == "preferred" else ElectionType.UNCLEAN

    async def go() -> dict[TopicPartition, KafkaError | None]:
        async with make_admin(bootstrap, option, timeout) as admin:
            tps: list[TopicPartition] | None = None
            if topic is not None:
                if partition:
                    tps = [TopicPartition(topic, p) for p in partition]
                else:
                    desc = (await admin.describe_topics([topic])).raise_errors()[topic]
                    tps = [TopicPartition(topic, p.partition) for p in desc.partitions]
            res = await admin.elect_leaders(etype, tps)
        return {tp: r.error for tp, r in res.items()}

    errors = run_async(go())

    elected = sorted(tp for tp, e in errors.items() if e is None)
    not_needed = sorted(tp for tp, e in errors.items() if isinstance(e, ElectionNotNeededError))
    failed = {
        tp: e for tp, e in errors.items() if e is not None and not isinstance(e, ElectionNotNeededError)
    }
    if as_json:
        print_json(
            [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "result": "elected"
                    if e is None
                    else "not needed"
                    if isinstance(e, ElectionNotNeededError)
                    else f"{type(e).__name__}: {e}",
                }
                for tp, e in sorted(errors.items())
            ]
        )
    else:
        out = stdout_console()

        def names(tps: list[TopicPartition]) -> str:
            return ", ".join(f"{tp.topic}-{tp.partition}" for tp in tps)

        if elected:
            out.print(
                f"Successfully completed leader election ({kind.upper()}) for partitions {names(elected)}"
            )
        if not_needed:
            out.print(f"Valid replica already elected for partitions {names(not_needed)}")
        if not elected and not not_needed and not failed:
            out.print("No partition needed a leader election.")
        for tp, e in sorted(failed.items()):
            out.print(
                f"Error completing leader election for {tp.topic}-{tp.partition}: {type(e).__name__}: {e}"
            )
    if failed:
        raise typer.Exit(1)


# ---------------------------------------------------------------------------- log-dirs


def log_dirs(
    broker_list: Annotated[
        str | None, typer.Option("--broker-list", help="Broker ids, 1,2,3 (default: every broker).")
    ] = None,
    topic_list: Annotated[
        str | None, typer.Option("--topic-list", help="Only these topics, t1,t2 (default: all).")
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Each broker's log dirs and replicas, as kafka-log-dirs.sh --describe prints them (JSON)."""
    try:
        brokers = [int(b) for b in broker_list.split(",") if b.strip()] if broker_list else None
    except ValueError:
        raise typer.BadParameter("broker ids are integers: 1,2,3", param_hint="--broker-list") from None
    topics = {t.strip() for t in topic_list.split(",") if t.strip()} if topic_list else None

    async def go() -> dict[str, Any]:
        async with make_admin(bootstrap, option, timeout) as admin:
            ids = brokers
            if ids is None:
                ids = sorted(b.node_id for b in (await admin.describe_cluster()).brokers)
            described = await admin.describe_log_dirs(ids)
        out = []
        for b in ids:
            d = described[b]
            if d.error is not None:
                raise d.error
            out.append(
                {
                    "broker": b,
                    "logDirs": [
                        {
                            "error": None if ld.error is None else type(ld.error).__name__,
                            "logDir": path,
                            "partitions": [
                                {
                                    "partition": f"{tp.topic}-{tp.partition}",
                                    "size": info.size,
                                    "offsetLag": info.offset_lag,
                                    "isFuture": info.is_future,
                                }
                                for tp, info in sorted(ld.replicas.items())
                                if topics is None or tp.topic in topics
                            ],
                        }
                        for path, ld in sorted(d.dirs.items())
                    ],
                }
            )
        return {"brokers": out, "version": 1}

    doc = run_async(go())
    print_json(doc)


# ---------------------------------------------------------------------------- features

features_app = typer.Typer(
    help="Describe, upgrade and downgrade feature levels (like kafka-features.sh).", no_args_is_help=True
)


@features_app.command("describe")
def features_describe(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Supported and finalized levels of every feature, with the finalized epoch."""

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            meta = await admin.describe_features()
        rows = []
        for name in sorted(set(meta.supported_features) | set(meta.finalized_features)):
            sup = meta.supported_features.get(name)
            fin = meta.finalized_features.get(name)
            rows.append(
                {
                    "feature": name,
                    "supported_min_version": None if sup is None else sup.min_version,
                    "supported_max_version": None if sup is None else sup.max_version,
                    "finalized_version_level": 0 if fin is None else fin.max_version_level,
                    "epoch": meta.finalized_features_epoch,
                }
            )
        return rows

    rows = run_async(go())
    if as_json:
        print_json(rows)
        return
    for r in rows:  # tab-separated, as kafka-features.sh prints it
        sys.stdout.write(
            f"Feature: {r['feature']}\tSupportedMinVersion: {r['supported_min_version']}\t"
            f"SupportedMaxVersion: {r['supported_max_version']}\t"
            f"FinalizedVersionLevel: {r['finalized_version_level']}\t"
            f"Epoch: {'-' if r['epoch'] is None else r['epoch']}\n"
        )


def _parse_features(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        name, sep, level = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"expected NAME=LEVEL, got {item!r}", param_hint="--feature")
        try:
            out[name.strip()] = int(level)
        except ValueError:
            raise typer.BadParameter(
                f"the level of {name} must be an integer", param_hint="--feature"
            ) from None
    if not out:
        raise typer.BadParameter("give at least one --feature NAME=LEVEL", param_hint="--feature")
    return out


def _update_features(
    levels: dict[str, int],
    kind: UpgradeType,
    dry_run: bool,
    bootstrap: str,
    option: list[str] | None,
    timeout: float,
    as_json: bool,
) -> None:
    async def go() -> dict[str, KafkaError | None]:
        async with make_admin(bootstrap, option, timeout) as admin:
            res = await admin.update_features(
                {n: FeatureUpdate(level, kind) for n, level in levels.items()}, validate_only=dry_run
            )
        return {n: r.error for n, r in res.items()}

    errors = run_async(go())
    verb = "upgraded" if kind is UpgradeType.UPGRADE else "downgraded"
    if as_json:
        print_json(
            [
                {"feature": n, "level": levels[n], "dry_run": dry_run, "error": None if e is None else str(e)}
                for n, e in errors.items()
            ]
        )
    else:
        out = stdout_console()
        for n, e in errors.items():
            if e is None:
                prefix = f"{n} can be {verb}" if dry_run else f"{n} was {verb}"
                out.print(f"{prefix} to {levels[n]}.", markup=False)
            else:
                out.print(f"Could not {verb[:-1] if verb.endswith('ed') else verb} {n}. {e}", markup=False)
    if any(e is not None for e in errors.values()):
        raise typer.Exit(1)


@features_app.command("upgrade")
def features_upgrade(
    feature: Annotated[list[str], typer.Option("--feature", help="NAME=LEVEL to upgrade to (repeatable).")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate only; change nothing.")] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Raise finalized feature levels (all or none)."""
    _update_features(
        _parse_features(feature), UpgradeType.UPGRADE, dry_run, bootstrap, option, timeout, as_json
    )


@features_app.command("downgrade")
def features_downgrade(
    feature: Annotated[list[str], typer.Option("--feature", help="NAME=LEVEL to downgrade to (repeatable).")],
    unsafe: Annotated[
        bool, typer.Option("--unsafe", help="Allow a downgrade that loses metadata (unsafe).")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate only; change nothing.")] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Lower finalized feature levels (all or none); level 0 disables a feature."""
    kind = UpgradeType.UNSAFE_DOWNGRADE if unsafe else UpgradeType.SAFE_DOWNGRADE
    _update_features(_parse_features(feature), kind, dry_run, bootstrap, option, timeout, as_json)


# ---------------------------------------------------------------------------- quorum

quorum_app = typer.Typer(
    help="Describe the KRaft metadata quorum (like kafka-metadata-quorum.sh).", no_args_is_help=True
)


def _lag_summary(info: QuorumInfo) -> tuple[int, int]:
    """Kafka's MaxFollowerLag and MaxFollowerLagTimeMs of the voters."""
    leader = next((v for v in info.voters if v.replica_id == info.leader_id), None)
    if leader is None or not info.voters:
        return 0, -1
    laggard = min(info.voters, key=lambda v: v.log_end_offset)
    lag = leader.log_end_offset - laggard.log_end_offset
    if laggard is leader:
        return lag, 0
    if leader.last_caught_up_timestamp is not None and laggard.last_caught_up_timestamp is not None:
        return lag, leader.last_caught_up_timestamp - laggard.last_caught_up_timestamp
    return lag, -1


def _directory_id(value: uuid.UUID) -> str:
    """A directory id as Kafka prints it: 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def _replica_row(info: QuorumInfo, r: QuorumReplicaState, status: str) -> dict[str, Any]:
    leader = next((v for v in info.voters if v.replica_id == info.leader_id), None)
    leo = leader.log_end_offset if leader is not None else info.high_watermark
    return {
        "node_id": r.replica_id,
        "directory_id": _directory_id(r.replica_directory_id),
        "log_end_offset": r.log_end_offset,
        "lag": max(leo - r.log_end_offset, 0),
        "last_fetch_timestamp": r.last_fetch_timestamp,
        "last_caught_up_timestamp": r.last_caught_up_timestamp,
        "status": status,
    }


@quorum_app.command("describe")
def quorum_describe(
    status: Annotated[bool, typer.Option("--status", help="The quorum's leader, epoch and lag.")] = False,
    replication: Annotated[
        bool, typer.Option("--replication", help="Each voter's and observer's replica of the metadata log.")
    ] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """The metadata quorum: --status (summary) or --replication (one row a replica)."""
    if status == replication:
        raise typer.BadParameter("give exactly one of --status, --replication")

    async def go() -> tuple[QuorumInfo, str | None]:
        async with make_admin(bootstrap, option, timeout) as admin:
            info = await admin.describe_metadata_quorum()
            cluster = await admin.describe_cluster()
        return info, cluster.cluster_id

    info, cluster_id = run_async(go())
    out = stdout_console()
    if status:
        lag, lag_ms = _lag_summary(info)

        def node(r: QuorumReplicaState) -> dict[str, Any]:
            n = info.nodes.get(r.replica_id)
            out: dict[str, Any] = {"id": r.replica_id}
            if r.replica_directory_id.int:  # a static quorum's voters have none (Kafka omits it)
                out["directoryId"] = _directory_id(r.replica_directory_id)
            if n is not None:
                out["endpoints"] = [str(e) for e in n.endpoints]
            return out

        doc = {
            "ClusterId": cluster_id,
            "LeaderId": info.leader_id,
            "LeaderEpoch": info.leader_epoch,
            "HighWatermark": info.high_watermark,
            "MaxFollowerLag": lag,
            "MaxFollowerLagTimeMs": lag_ms,
            "CurrentVoters": [node(v) for v in info.voters],
            "CurrentObservers": [node(o) for o in info.observers],
        }
        if as_json:
            print_json(doc)
            return
        for key, value in doc.items():
            text = json.dumps(value) if isinstance(value, list) else str(value)
            out.print(f"{key + ':':<24}{text}", markup=False)
        return
    rows = [
        _replica_row(info, v, "Leader" if v.replica_id == info.leader_id else "Follower") for v in info.voters
    ]
    rows += [_replica_row(info, o, "Observer") for o in info.observers]
    if as_json:
        print_json(rows)
        return
    out.print(
        table(
            (
                "NodeId",
                "DirectoryId",
                "LogEndOffset",
                "Lag",
                "LastFetchTimestamp",
                "LastCaughtUpTimestamp",
                "Status",
            ),
            (
                [
                    r["node_id"],
                    r["directory_id"],
                    r["log_end_offset"],
                    r["lag"],
                    "-" if r["last_fetch_timestamp"] is None else r["last_fetch_timestamp"],
                    "-" if r["last_caught_up_timestamp"] is None else r["last_caught_up_timestamp"],
                    r["status"],
                ]
                for r in rows
            ),
        )
    )
