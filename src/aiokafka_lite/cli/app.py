"""The ``aiokafka-lite`` command tree (typer app)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer

from aiokafka_lite import __version__
from aiokafka_lite.cli import acls, groups, quotas, share_groups, tokens, topics, transactions, users
from aiokafka_lite.cli.broker import broker
from aiokafka_lite.cli.consume import consume
from aiokafka_lite.cli.mirror import mirror
from aiokafka_lite.cli.offsets import offsets
from aiokafka_lite.cli.produce import produce
from aiokafka_lite.cli.replicas import elect_leaders, features_app, log_dirs, quorum_app, reassign

__all__ = ["app", "run"]

app = typer.Typer(
    name="aiokafka-lite",
    help="Work with Kafka from the shell: topics, produce, consume, groups, offsets, and an embedded broker. "
    "Every command takes --bootstrap (default $KAFKA_BOOTSTRAP, else 127.0.0.1:9092).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
)
app.add_typer(topics.app, name="topics")
app.add_typer(groups.app, name="groups")
app.add_typer(share_groups.app, name="share-groups")
app.command("broker")(broker)
app.command("produce")(produce)
app.command("consume")(consume)
app.command("offsets")(offsets)
app.command("mirror")(mirror)
# Operator commands (acls; users, quotas; transactions; reassign, elect-leaders, log-dirs,
# features, quorum) are registered below, one block per family.
# -- acls
app.add_typer(acls.app, name="acls")
# -- users, quotas
app.add_typer(users.app, name="users")
app.add_typer(quotas.app, name="quotas")
app.add_typer(tokens.app, name="tokens")
# -- transactions
app.add_typer(transactions.app, name="transactions")
# -- reassign, elect-leaders, log-dirs, features, quorum
app.command("reassign")(reassign)
app.command("elect-leaders")(elect_leaders)
app.command("log-dirs")(log_dirs)
app.add_typer(features_app, name="features")
app.add_typer(quorum_app, name="quorum")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"aiokafka-lite {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Work with Kafka from the shell."""


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code instead of exiting."""
    command = typer.main.get_command(app)
    try:
        command.main(
            args=list(argv) if argv is not None else None, prog_name="aiokafka-lite", standalone_mode=True
        )
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
