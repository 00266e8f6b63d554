"""``aiokafka-lite quotas describe|alter``: client quotas (KIP-546), like Kafka's
``kafka-configs.sh --entity-type users|clients|ips --describe|--alter``.

An entity is given by ``--user NAME``, ``--client-id NAME``, ``--ip ADDRESS`` and
``--default TYPE`` (``user``, ``client-id`` or ``ip``: that type's default entity, as
``--entity-default``). ``describe`` with no entity lists every quota; with some, the
entities that have them (``--strict``: exactly them). ``alter`` sets ``--add k=v`` and
removes ``--delete k`` (``--validate-only`` checks without applying).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from aiokafka_lite.admin import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
)
from aiokafka_lite.cli._common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    ClientOptions,
    JsonOutput,
    Timeout,
    parse_key_values,
    print_json,
    run_async,
    stdout_console,
)
from aiokafka_lite.cli._format import table
from aiokafka_lite.cli.topics import make_admin

app = typer.Typer(
    help="Client quotas (like kafka-configs.sh --entity-type users|clients|ips): describe, alter.",
    no_args_is_help=True,
)

User = Annotated[str | None, typer.Option("--user", help="User principal name.")]
ClientId = Annotated[str | None, typer.Option("--client-id", help="Client id.")]
Ip = Annotated[str | None, typer.Option("--ip", help="IP address.")]
Default = Annotated[
    list[str] | None,
    typer.Option("--default", help="The default entity of this type: user, client-id or ip. Repeatable."),
]
_TYPES = ("user", "client-id", "ip")


def _parts(
    user: str | None, client_id: str | None, ip: str | None, default: list[str] | None
) -> dict[str, str | None]:
    parts: dict[str, str | None] = {}
    for kind, name in (("user", user), ("client-id", client_id), ("ip", ip)):
        if name is not None:
            parts[kind] = name
    for kind in default or ():
        if kind not in _TYPES:
            raise typer.BadParameter(
                f"expected one of {', '.join(_TYPES)}, got {kind!r}", param_hint="--default"
            )
        if kind in parts:
            raise typer.BadParameter(f"{kind} is given both by name and as --default", param_hint="--default")
        parts[kind] = None
    return parts


def _label(entity: ClientQuotaEntity) -> str:
    return str(entity)


@app.command("describe")
def describe(
    user: User = None,
    client_id: ClientId = None,
    ip: Ip = None,
    default: Default = None,
    strict: Annotated[bool, typer.Option("--strict", help="Only entities of exactly these types.")] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Describe client quotas."""
    parts = _parts(user, client_id, ip, default)
    components = [
        ClientQuotaFilterComponent.of_default_entity(kind)
        if name is None
        else ClientQuotaFilterComponent.of_entity(kind, name)
        for kind, name in parts.items()
    ]
    flt = ClientQuotaFilter(tuple(components), strict)

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            quotas = await admin.describe_client_quotas(flt)
        return [
            {"Entity": dict(entity), "Key": key, "Value": value}
            for entity, values in quotas.items()
            for key, value in sorted(values.items())
        ]

    rows = run_async(go())
    if as_json:
        print_json(rows)
        return
    stdout_console().print(
        table(
            ("Entity", "Key", "Value"),
            ([_label(ClientQuotaEntity(r["Entity"])), r["Key"], r["Value"]] for r in rows),
        )
    )


@app.command("alter")
def alter(
    user: User = None,
    client_id: ClientId = None,
    ip: Ip = None,
    default: Default = None,
    add: Annotated[
        list[str] | None,
        typer.Option("--add", metavar="KEY=VALUE", help="Set a quota, e.g. producer_byte_rate=1048576."),
    ] = None,
    delete: Annotated[
        list[str] | None, typer.Option("--delete", metavar="KEY", help="Remove a quota.")
    ] = None,
    validate_only: Annotated[bool, typer.Option("--validate-only", help="Check without applying.")] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Set or remove quotas of one entity."""
    parts = _parts(user, client_id, ip, default)
    if not parts:
        raise typer.BadParameter(
            "name an entity: --user, --client-id, --ip or --default", param_hint="--user"
        )
    ops: list[ClientQuotaAlteration.Op] = []
    for key, text in parse_key_values(add, "--add"):
        try:
            ops.append(ClientQuotaAlteration.Op(key, float(text)))
        except ValueError:
            raise typer.BadParameter(f"{key}: {text!r} is not a number", param_hint="--add") from None
    ops += [ClientQuotaAlteration.Op(key, None) for key in delete or ()]
    if not ops:
        raise typer.BadParameter(
            "nothing to change: give --add KEY=VALUE or --delete KEY", param_hint="--add"
        )
    entity = ClientQuotaEntity(parts)

    async def go() -> Exception | None:
        async with make_admin(bootstrap, option, timeout) as admin:
            res = await admin.alter_client_quotas(
                [ClientQuotaAlteration(entity, ops)], validate_only=validate_only
            )
        return res[entity].error

    error = run_async(go())
    if error is not None:
        typer.echo(f"{_label(entity)}: {type(error).__name__}: {error}", err=True)
        raise typer.Exit(1)
    stdout_console().print(f"{_label(entity)}: {'valid' if validate_only else 'ok'}")
