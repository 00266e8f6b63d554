"""``aiokafka-lite``: a command-line tool for Kafka clusters (and the embedded broker).

Commands: ``broker``, ``topics list|create|delete|describe``, ``produce``, ``consume``,
``groups list|describe``, ``offsets``. Every command takes ``--bootstrap`` (default
``$KAFKA_BOOTSTRAP``, else ``127.0.0.1:9092``) and ``--help``. Needs the ``cli`` extra
(``pip install 'aiokafka_lite[cli]'``: typer and rich).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aiokafka-lite`` console script; returns the exit code."""
    try:
        from aiokafka_lite.cli.app import run
    except ImportError as exc:  # the cli extra is not installed
        print(
            f"aiokafka-lite needs the 'cli' extra: pip install 'aiokafka_lite[cli]' ({exc})",
            file=sys.stderr,
        )
        return 1
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
