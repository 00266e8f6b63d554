"""Pick the record hot-loop backend: the ``_crecords`` C extension when it was built,
else the pure-Python twin. ``AIOKAFKA_LITE_NO_EXTENSIONS=1`` forces pure Python."""

from __future__ import annotations

import os
from types import ModuleType

from aiokafka_lite.core.errors import CorruptRecordError
from aiokafka_lite.wire.records._model import Record


def _load_c() -> ModuleType | None:
    if os.environ.get("AIOKAFKA_LITE_NO_EXTENSIONS", "") not in ("", "0"):
        return None
    try:
        from aiokafka_lite.wire.records import _crecords
    except ImportError:
        return None
    try:
        # Checks that Record's slot layout is what the C decoder writes into.
        _crecords.setup(Record, CorruptRecordError)
    except TypeError:  # pragma: no cover - unexpected interpreter layout: stay correct
        return None
    return _crecords


#: The loaded C extension module, or ``None`` when running pure Python.
c_ext: ModuleType | None = _load_c()
