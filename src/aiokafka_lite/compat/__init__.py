"""Compatibility layers: other clients' APIs on aiokafka_lite's native clients.

``install()`` makes ``import aiokafka`` (and every ``aiokafka.*`` submodule) resolve to
:mod:`aiokafka_lite.compat.aiokafka`, for code that cannot be edited (FastStream,
libraries). Call it once at start-up, before anything imports aiokafka.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

from aiokafka_lite.core.errors import IllegalStateError

__all__ = ["install", "uninstall"]

_ALIAS = "aiokafka"
_TARGET = "aiokafka_lite.compat.aiokafka"


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self._target = target

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(self._target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The target module is already executed; the import system replaced its
        ``__spec__`` with the alias's: give it back its own."""
        module.__spec__ = self._spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Resolves ``aiokafka`` and ``aiokafka.x.y`` to the same modules of the compat layer:
    ``sys.modules['aiokafka.producer'] is aiokafka_lite.compat.aiokafka.producer``."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != _ALIAS and not fullname.startswith(_ALIAS + "."):
            return None
        real = _TARGET + fullname[len(_ALIAS) :]
        if importlib.util.find_spec(real) is None:
            return None
        spec = importlib.util.spec_from_loader(fullname, _AliasLoader(real))
        target_module = importlib.import_module(real)
        if spec is not None and hasattr(target_module, "__path__"):
            spec.submodule_search_locations = list(target_module.__path__)
        return spec


_finder = _AliasFinder()


def install() -> None:
    """Make ``import aiokafka`` load :mod:`aiokafka_lite.compat.aiokafka`. Idempotent.

    Raises ``IllegalStateError`` when the real aiokafka is already imported: objects of
    both would be mixed (its classes in ``except`` clauses and ``isinstance`` checks)."""
    loaded = sys.modules.get(_ALIAS)
    if loaded is not None and not (loaded.__name__ == _TARGET or loaded is sys.modules.get(_TARGET)):
        raise IllegalStateError(
            "the real aiokafka is already imported; call aiokafka_lite.compat.install() before "
            "anything imports aiokafka (first lines of the program, a conftest.py or sitecustomize)"
        )
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    """Undo ``install()``: remove the finder and the ``aiokafka`` aliases from sys.modules."""
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    for name in [n for n in sys.modules if n == _ALIAS or n.startswith(_ALIAS + ".")]:
        if sys.modules[name].__name__.startswith(_TARGET):
            del sys.modules[name]
