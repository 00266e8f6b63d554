"""``aiokafka-lite tokens create|renew|expire|describe``: delegation tokens (KIP-48),
like Kafka's ``kafka-delegation-tokens.sh``.

Kafka issues tokens only over a SASL-authenticated connection (give the SASL options
with ``-X``, e.g. ``-X security_protocol=SASL_SSL -X sasl_mechanism=SCRAM-SHA-512 ...``)
that was not itself authenticated with a token. ``--hmac`` is the token's HMAC in base64,
as ``create`` and ``describe`` print it (and as a token login uses it for the password,
with ``-X sasl_scram_token_auth=true`` and the token id as user name). Periods are in
milliseconds as in Kafka's tool; ``-1`` means the broker's default.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any

import typer

from aiokafka_lite.admin.credentials import DelegationToken
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

app = typer.Typer(
    help="Delegation tokens (like kafka-delegation-tokens.sh): create, renew, expire, describe.",
    no_args_is_help=True,
)

Hmac = Annotated[str, typer.Option("--hmac", help="The token's HMAC in base64.")]
_COLUMNS = (
    "TokenId",
    "Hmac",
    "Owner",
    "Requester",
    "Renewers",
    "IssueTimestamp",
    "ExpiryTimestamp",
    "MaxTimestamp",
)


def _hmac(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise typer.BadParameter("not base64", param_hint="--hmac") from None


def _row(t: DelegationToken) -> dict[str, Any]:
    i = t.token_info
    return {
        "TokenId": i.token_id,
        "Hmac": t.hmac_as_base64,
        "Owner": i.owner,
        "Requester": i.token_requester,
        "Renewers": list(i.renewers),
        "IssueTimestamp": i.issue_timestamp,
        "ExpiryTimestamp": i.expiry_timestamp,
        "MaxTimestamp": i.max_timestamp,
    }


def _print(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return
    stdout_console().print(
        table(_COLUMNS, ([",".join(r[c]) if c == "Renewers" else r[c] for c in _COLUMNS] for r in rows))
    )


@app.command("create")
def create(
    renewer: Annotated[
        list[str] | None, typer.Option("--renewer-principal", help="User:name allowed to renew. Repeatable.")
    ] = None,
    owner: Annotated[
        str | None,
        typer.Option("--owner-principal", help="User:name to own the token (default: the caller)."),
    ] = None,
    max_life_time: Annotated[
        int, typer.Option("--max-life-time-period", help="Max lifetime in ms (-1: the broker's maximum).")
    ] = -1,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Create a delegation token."""

    async def go() -> DelegationToken:
        async with make_admin(bootstrap, option, timeout) as admin:
            return await admin.create_delegation_token(renewer or (), max_life_time, owner)

    _print([_row(run_async(go()))], as_json)


def _change(
    what: str, hmac: str, period: int, bootstrap: str, option: list[str] | None, timeout: float
) -> None:
    mac = _hmac(hmac)

    async def go() -> int:
        async with make_admin(bootstrap, option, timeout) as admin:
            if what == "renew":
                return await admin.renew_delegation_token(mac, period)
            return await admin.expire_delegation_token(mac, period)

    stdout_console().print(f"expiry timestamp: {run_async(go())}")


@app.command("renew")
def renew(
    hmac: Hmac,
    period: Annotated[
        int, typer.Option("--renew-time-period", help="Renew by this many ms (-1: the default).")
    ] = -1,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Renew a token (its owner or a renewer)."""
    _change("renew", hmac, period, bootstrap, option, timeout)


@app.command("expire")
def expire(
    hmac: Hmac,
    period: Annotated[
        int, typer.Option("--expiry-time-period", help="Expire in this many ms (negative: now).")
    ] = -1,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Expire a token (its owner or a renewer)."""
    _change("expire", hmac, period, bootstrap, option, timeout)


@app.command("describe")
def describe(
    owner: Annotated[
        list[str] | None, typer.Option("--owner-principal", help="Only tokens of this owner. Repeatable.")
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Describe the tokens the caller may see."""

    async def go() -> list[DelegationToken]:
        async with make_admin(bootstrap, option, timeout) as admin:
            return await admin.describe_delegation_token(owner or None)

    _print([_row(t) for t in run_async(go())], as_json)
