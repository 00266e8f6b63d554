"""``aiokafka-lite acls list|add|remove``: ACLs, like Kafka's ``kafka-acls.sh``.

The resource options are kafka-acls's: ``--topic``, ``--group``, ``--transactional-id``
(each repeatable) and ``--cluster``, with ``--resource-pattern-type`` (``literal``, the
default, or ``prefixed``; ``list`` and ``remove`` also take ``any`` and ``match``).
``add`` makes one binding per resource, principal (``--allow-principal`` /
``--deny-principal``, e.g. ``User:alice``), host and ``--operation`` (``Read``,
``Write``, ``Describe``, ``All``..., as kafka-acls spells them); ``remove`` deletes the
bindings matching those options (a principal or operation not given matches any).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from aiokafka_lite.admin import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from aiokafka_lite.cli._common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    ClientOptions,
    JsonOutput,
    Timeout,
    fail,
    print_json,
    run_async,
    stdout_console,
)
from aiokafka_lite.cli._format import table
from aiokafka_lite.cli.topics import make_admin
from aiokafka_lite.core.acls import CLUSTER_NAME

app = typer.Typer(help="List, add and remove ACLs (like kafka-acls.sh).", no_args_is_help=True)

Topics = Annotated[list[str] | None, typer.Option("--topic", help="A topic (repeatable; '*' for all).")]
Groups = Annotated[
    list[str] | None, typer.Option("--group", help="A consumer group (repeatable; '*' for all).")
]
TxnIds = Annotated[
    list[str] | None, typer.Option("--transactional-id", help="A transactional id (repeatable; '*' for all).")
]
Cluster = Annotated[bool, typer.Option("--cluster", help="The cluster resource.")]
PatternOpt = Annotated[
    str, typer.Option("--resource-pattern-type", help="literal or prefixed (list/remove: also any, match).")
]
Operations = Annotated[
    list[str] | None,
    typer.Option("--operation", help="Read, Write, Create, Delete, Alter, Describe, All... (repeatable)."),
]
AllowPrincipals = Annotated[
    list[str] | None,
    typer.Option("--allow-principal", help="Principal to allow, e.g. User:alice (repeatable)."),
]
DenyPrincipals = Annotated[
    list[str] | None, typer.Option("--deny-principal", help="Principal to deny, e.g. User:bob (repeatable).")
]
AllowHosts = Annotated[
    list[str] | None, typer.Option("--allow-host", help="Host the allow applies to (default *).")
]
DenyHosts = Annotated[
    list[str] | None, typer.Option("--deny-host", help="Host the deny applies to (default *).")
]


def _operation(text: str) -> AclOperation:
    """kafka-acls spellings (``Read``, ``IdempotentWrite``, ``describe_configs``...)."""
    key = text.replace("_", "").replace("-", "").lower()
    for op in AclOperation:
        if op.name.replace("_", "").lower() == key and op not in (AclOperation.UNKNOWN, AclOperation.ANY):
            return op
    names = ", ".join(op.name.title().replace("_", "") for op in AclOperation if op > AclOperation.ANY)
    fail(f"unknown operation {text!r} (one of {names})")


def _pattern_type(text: str, *, filters: bool) -> PatternType:
    allowed = ("any", "match", "literal", "prefixed") if filters else ("literal", "prefixed")
    if text.lower() not in allowed:
        fail(f"--resource-pattern-type must be one of {', '.join(allowed)}, not {text!r}")
    return PatternType[text.upper()]


def _resources(
    topics: list[str] | None, groups: list[str] | None, txn_ids: list[str] | None, cluster: bool
) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in topics or []]
    out += [(ResourceType.GROUP, g) for g in groups or []]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in txn_ids or []]
    if cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _row(b: AclBinding) -> dict[str, Any]:
    return {
        "resource_type": b.pattern.resource_type.name,
        "name": b.pattern.name,
        "pattern_type": b.pattern.pattern_type.name,
        "principal": b.entry.principal,
        "host": b.entry.host,
        "operation": b.entry.operation.name,
        "permission": b.entry.permission_type.name,
    }


def _print(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return
    cols = ("resource_type", "name", "pattern_type", "principal", "host", "operation", "permission")
    stdout_console().print(table(cols, ([r[c] for c in cols] for r in rows)))


def _sort_key(b: AclBinding) -> tuple[Any, ...]:
    p, e = b.pattern, b.entry
    return (p.resource_type, p.name, p.pattern_type, e.principal, e.host, e.operation, e.permission_type)


@app.command("list")
def list_acls(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    topic: Topics = None,
    group: Groups = None,
    transactional_id: TxnIds = None,
    cluster: Cluster = False,
    resource_pattern_type: PatternOpt = "literal",
    principal: Annotated[str | None, typer.Option("--principal", help="Only this principal's ACLs.")] = None,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """List ACLs (all, or those of the given resources)."""
    resources = _resources(topic, group, transactional_id, cluster)
    pattern_type = _pattern_type(resource_pattern_type, filters=True)
    entry = AccessControlEntryFilter(principal=principal)
    filters = [
        AclBindingFilter(ResourcePatternFilter(rt, n, pattern_type), entry) for rt, n in resources
    ] or [AclBindingFilter(entry_filter=entry)]

    async def go() -> list[AclBinding]:
        found: dict[AclBinding, None] = {}
        async with make_admin(bootstrap, option, timeout) as admin:
            for f in filters:
                found.update(dict.fromkeys(await admin.describe_acls(f)))
        return sorted(found, key=_sort_key)

    _print([_row(b) for b in run_async(go())], as_json)


def _entries(
    allow: list[str] | None,
    deny: list[str] | None,
    allow_hosts: list[str] | None,
    deny_hosts: list[str] | None,
) -> list[tuple[str, str, AclPermissionType]]:
    out = [(p, h, AclPermissionType.ALLOW) for p in allow or [] for h in allow_hosts or ["*"]]
    out += [(p, h, AclPermissionType.DENY) for p in deny or [] for h in deny_hosts or ["*"]]
    for principal, _, _ in out:
        if ":" not in principal:
            fail(f"principal {principal!r} needs a type, e.g. User:{principal}")
    return out


@app.command("add")
def add_acls(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    allow_principal: AllowPrincipals = None,
    deny_principal: DenyPrincipals = None,
    allow_host: AllowHosts = None,
    deny_host: DenyHosts = None,
    operation: Operations = None,
    topic: Topics = None,
    group: Groups = None,
    transactional_id: TxnIds = None,
    cluster: Cluster = False,
    resource_pattern_type: PatternOpt = "literal",
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Add ACLs: each principal x host x operation on each resource."""
    resources = _resources(topic, group, transactional_id, cluster)
    if not resources:
        fail("name a resource: --topic, --group, --transactional-id or --cluster")
    entries = _entries(allow_principal, deny_principal, allow_host, deny_host)
    if not entries:
        fail("name a principal: --allow-principal or --deny-principal")
    if not operation:
        fail("name an operation: --operation (Read, Write, Describe, All...)")
    ops = [_operation(o) for o in operation]
    pattern_type = _pattern_type(resource_pattern_type, filters=False)
    bindings = [
        AclBinding(ResourcePattern(rt, name, pattern_type), AccessControlEntry(p, h, op, perm))
        for rt, name in resources
        for p, h, perm in entries
        for op in ops
    ]

    async def go() -> list[AclBinding]:
        async with make_admin(bootstrap, option, timeout) as admin:
            (await admin.create_acls(bindings)).raise_errors()
        return bindings

    _print([_row(b) for b in run_async(go())], as_json)


@app.command("remove")
def remove_acls(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    allow_principal: AllowPrincipals = None,
    deny_principal: DenyPrincipals = None,
    allow_host: AllowHosts = None,
    deny_host: DenyHosts = None,
    operation: Operations = None,
    topic: Topics = None,
    group: Groups = None,
    transactional_id: TxnIds = None,
    cluster: Cluster = False,
    resource_pattern_type: PatternOpt = "literal",
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Remove the ACLs of the given resources (only the given principals and operations
    when named); prints what was removed."""
    resources = _resources(topic, group, transactional_id, cluster)
    if not resources:
        fail("name a resource: --topic, --group, --transactional-id or --cluster")
    pattern_type = _pattern_type(resource_pattern_type, filters=True)
    ops: list[AclOperation] = [_operation(o) for o in operation or []] or [AclOperation.ANY]
    named = _entries(allow_principal, deny_principal, allow_host, deny_host)
    entry_filters = [
        AccessControlEntryFilter(p, h if (allow_host or deny_host) else None, op, perm)
        for p, h, perm in named
        for op in ops
    ] or [AccessControlEntryFilter(operation=op) for op in ops]
    filters = [
        AclBindingFilter(ResourcePatternFilter(rt, name, pattern_type), ef)
        for rt, name in resources
        for ef in entry_filters
    ]

    async def go() -> list[AclBinding]:
        async with make_admin(bootstrap, option, timeout) as admin:
            res = (await admin.delete_acls(filters)).raise_errors()
        removed = {b: None for r in res.values() for b in r.deleted}
        return sorted(removed, key=_sort_key)

    _print([_row(b) for b in run_async(go())], as_json)
