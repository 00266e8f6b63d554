"""A terminal progress display of a running mirror.

With ``rich`` installed (``pip install 'aiokafka_lite[mirror]'``) and a terminal, a live
table: one row per source partition with its target, records copied, records/s and
lag. Otherwise (no rich, output redirected, ``plain=True``) one summary line per
interval, which logs and CI read well.
"""

from __future__ import annotations

import asyncio
import sys
from typing import IO, Any, Protocol

from aiokafka_lite.integrations.mirror.stats import MirrorStats

__all__ = ["ProgressDisplay", "plain_line"]


class _HasStats(Protocol):
    def stats(self) -> MirrorStats: ...


def plain_line(stats: MirrorStats) -> str:
    """One line summing up the mirror."""
    behind = sum(1 for p in stats.partitions.values() if p.lag)
    return (
        f"mirror: {len(stats.partitions)} partitions, {stats.records} records copied "
        f"({stats.records_per_s:.0f}/s, {stats.bytes_per_s / 1e6:.2f} MB/s), lag {stats.lag} "
        f"({behind} partitions behind), {stats.topics_created} topics created"
    )


def _rich_table(stats: MirrorStats) -> Any:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(plain_line(stats)), title_justify="left", expand=False)
    for name, justify in (
        ("source", "left"),
        ("target", "left"),
        ("copied", "right"),
        ("records/s", "right"),
        ("position", "right"),
        ("lag", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for tp, p in sorted(stats.partitions.items()):
        target = (
            f"{p.target.topic}[{p.target.partition}]" if p.target.partition >= 0 else f"{p.target.topic}[key]"
        )
        lag = "?" if p.lag is None else str(p.lag)
        table.add_row(  # escaped: "[0]" would read as rich markup
            escape(f"{tp.topic}[{tp.partition}]"),
            escape(target),
            str(p.records),
            f"{p.records_per_s:.0f}",
            "-" if p.position is None else str(p.position),
            lag,
        )
    return table


class ProgressDisplay:
    """``async with ProgressDisplay(mirror): await mirror.run()`` shows progress until the
    block ends. ``plain=None`` picks rich on a terminal when it is installed."""

    def __init__(
        self,
        mirror: _HasStats,
        *,
        interval_s: float = 1.0,
        plain: bool | None = None,
        file: IO[str] | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self._mirror = mirror
        self._interval = interval_s
        self._file = file if file is not None else sys.stderr
        if plain is None:
            plain = not (self._file.isatty() and _rich_available())
        elif not plain and not _rich_available():
            plain = True
        self.plain = plain
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ProgressDisplay:
        self._task = asyncio.ensure_future(self._show())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._print_line()  # the final state

    def _print_line(self) -> None:
        print(plain_line(self._mirror.stats()), file=self._file, flush=True)

    async def _show(self) -> None:
        if self.plain:
            while True:
                await asyncio.sleep(self._interval)
                self._print_line()
        from rich.console import Console
        from rich.live import Live

        # Off a terminal (a log file) rich would assume 80 columns and cut the table.
        console = Console(file=self._file, width=None if self._file.isatty() else 140)
        with Live(
            _rich_table(self._mirror.stats()), console=console, auto_refresh=False, transient=False
        ) as live:
            while True:
                await asyncio.sleep(self._interval)
                live.update(_rich_table(self._mirror.stats()), refresh=True)


def _rich_available() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True
