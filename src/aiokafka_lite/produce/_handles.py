"""Pick how record handles are made: untracked by the garbage collector through the
``_chandle`` C extension when it was built, else as ordinary (tracked) instances.

Why untracked: see ``_chandle.c``. A handle holds its batch, an int and flags until it
gets a done-callback; only then can it be part of a reference cycle, so that is when
``track`` hands it back to the collector. ``AIOKAFKA_LITE_NO_EXTENSIONS=1`` forces the
pure-Python twin, which behaves the same apart from the collector's bookkeeping.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

H = TypeVar("H")

NewHandle = Callable[[type[H], Any, int], H]


def _py_new(cls: type[H], batch: Any, index: int) -> H:
    handle: Any = object.__new__(cls)
    handle._batch = batch
    handle._index = index
    handle._callbacks = None
    handle._cancelled = False
    handle._cancel_message = None
    handle._asyncio_future_blocking = False
    return handle  # type: ignore[no-any-return]


def _py_track(handle: object) -> None:
    """Handles made by ``_py_new`` are tracked from the start."""


def handle_functions(cls: type[H]) -> tuple[NewHandle[H], Callable[[object], None]]:
    """``(new, track)`` for the handle class ``cls`` (a ``__slots__`` class with the
    slots ``_py_new`` sets): ``new(cls_or_subclass, batch, index)`` makes a pending
    handle, ``track(handle)`` must run before the handle first references a callback."""
    if os.environ.get("AIOKAFKA_LITE_NO_EXTENSIONS", "") in ("", "0"):
        try:
            from aiokafka_lite.produce import _chandle
        except ImportError:
            pass
        else:
            try:
                _chandle.setup(cls)  # checks the slot layout the C code writes into
            except TypeError:  # pragma: no cover - unexpected layout: stay correct
                pass
            else:
                return _chandle.new, _chandle.track
    return _py_new, _py_track
