"""Authentication tests on the embedded broker. Tests marked ``anyio`` run on asyncio and on
trio (the broker runs on its own loop in a thread): the anyio plumbing of
``tests/anyio_backends`` is reused here."""

from __future__ import annotations

from anyio_backends.conftest import anyio_backend, pytest_pycollect_makeitem

__all__ = ["anyio_backend", "pytest_pycollect_makeitem"]
