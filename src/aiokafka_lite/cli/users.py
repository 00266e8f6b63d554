"""``aiokafka-lite users list|set|delete``: SCRAM credentials (KIP-554), like Kafka's
``kafka-configs.sh --entity-type users --alter --add-config
'SCRAM-SHA-256=[iterations=8192,password=...]'`` / ``--delete-config SCRAM-SHA-256``.

The password is never an argument (it would land in the shell history and in ``ps``):
``set`` reads it from ``--password-env VAR``, from stdin with ``--password-stdin``, or
asks for it (twice, hidden) on a terminal. The client salts and hashes it
(``Admin.alter_user_scram_credentials``); only the salted password is sent. Kafka takes
one alteration per user and request, so several ``--mechanism`` are sent one at a time.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer

from aiokafka_lite.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from aiokafka_lite.admin.credentials import DEFAULT_SCRAM_ITERATIONS
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
from aiokafka_lite.core import errors as E

app = typer.Typer(
    help="SCRAM users (like kafka-configs.sh --entity-type users): list, set, delete.",
    no_args_is_help=True,
)

Mechanisms = Annotated[
    list[str] | None,
    typer.Option(
        "--mechanism", "-m", help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default SCRAM-SHA-256)."
    ),
]


def _mechanisms(names: list[str] | None) -> list[ScramMechanism]:
    out = []
    for name in names or ["SCRAM-SHA-256"]:
        try:
            mech = ScramMechanism.parse(name)
        except E.ConfigError as exc:
            raise typer.BadParameter(str(exc), param_hint="--mechanism") from None
        if mech is ScramMechanism.UNKNOWN:
            raise typer.BadParameter(f"unknown SCRAM mechanism {name!r}", param_hint="--mechanism")
        out.append(mech)
    return list(dict.fromkeys(out))


@app.command("list")
def list_users(
    users: Annotated[list[str] | None, typer.Argument(help="Users to describe (default: all).")] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: JsonOutput = False,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """List users' SCRAM mechanisms and iterations (never secrets)."""

    async def go() -> list[dict[str, Any]]:
        async with make_admin(bootstrap, option, timeout) as admin:
            described = await admin.describe_user_scram_credentials(users or None)
        rows: list[dict[str, Any]] = []
        for user, d in described.items():
            if d.error is not None:
                rows.append(
                    {"User": user, "Mechanism": None, "Iterations": None, "Error": type(d.error).__name__}
                )
            for info in d.credential_infos:
                rows.append(
                    {
                        "User": user,
                        "Mechanism": info.mechanism.mechanism_name,
                        "Iterations": info.iterations,
                        "Error": None,
                    }
                )
        return rows

    rows = run_async(go())
    if as_json:
        print_json(rows)
    else:
        columns = ("User", "Mechanism", "Iterations", "Error")
        stdout_console().print(table(columns, ([r[c] for c in columns] for r in rows)))
    if any(r["Error"] for r in rows):  # e.g. a named user without credentials
        raise typer.Exit(1)


def _read_password(password_env: str | None, password_stdin: bool) -> str:
    if password_env is not None:
        value = os.environ.get(password_env)
        if value is None:
            fail(f"environment variable {password_env} is not set")
        return value
    if password_stdin:
        value = sys.stdin.readline().rstrip("\r\n")
        if not value:
            fail("no password on stdin")
        return value
    if not sys.stdin.isatty():
        fail("give the password with --password-env VAR or --password-stdin (stdin is not a terminal)")
    return str(typer.prompt("Password", hide_input=True, confirmation_prompt=True))


def _alter(bootstrap: str, option: list[str] | None, timeout: float, alterations: list[Any]) -> None:
    async def go() -> list[tuple[str, str | None]]:
        out = []
        async with make_admin(bootstrap, option, timeout) as admin:
            for alteration in alterations:  # one per request: Kafka refuses a user twice
                res = await admin.alter_user_scram_credentials([alteration])
                err = res[alteration.user].error
                what = getattr(alteration, "info", alteration)
                mech = getattr(what, "mechanism", None)
                label = mech.mechanism_name if isinstance(mech, ScramMechanism) else str(mech)
                out.append((label, None if err is None else f"{type(err).__name__}: {err}"))
        return out

    failed = False
    for label, error in run_async(go()):
        if error is None:
            stdout_console().print(f"{alterations[0].user}: {label} ok")
        else:
            failed = True
            typer.echo(f"{alterations[0].user}: {label} failed: {error}", err=True)
    if failed:
        raise typer.Exit(1)


@app.command("set")
def set_user(
    user: Annotated[str, typer.Argument(help="User name.")],
    mechanism: Mechanisms = None,
    iterations: Annotated[
        int, typer.Option("--iterations", help="PBKDF2 iterations (Kafka accepts 4096..16384).")
    ] = DEFAULT_SCRAM_ITERATIONS,
    password_env: Annotated[
        str | None, typer.Option("--password-env", help="Read the password from this environment variable.")
    ] = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from the first line of stdin.")
    ] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Create or replace a user's SCRAM credential (the client salts and hashes the password)."""
    mechs = _mechanisms(mechanism)
    password = _read_password(password_env, password_stdin)
    _alter(
        bootstrap,
        option,
        timeout,
        [UserScramCredentialUpsertion(user, ScramCredentialInfo(m, iterations), password) for m in mechs],
    )


@app.command("delete")
def delete_user(
    user: Annotated[str, typer.Argument(help="User name.")],
    mechanism: Mechanisms = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    option: ClientOptions = None,
    timeout: Timeout = 30.0,
) -> None:
    """Delete a user's SCRAM credential for the given mechanisms."""
    _alter(bootstrap, option, timeout, [UserScramCredentialDeletion(user, m) for m in _mechanisms(mechanism)])
