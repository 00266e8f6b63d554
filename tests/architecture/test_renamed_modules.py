"""The old module paths of the layered layout (``_RENAMED_MODULES`` in the package's
``__init__``) keep working: each names a module that exists, importing it gives that very
module, internal old paths warn and the public ones do not. The table stays sorted, as
every slice appends to it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aiokafka_lite

PACKAGE = Path(aiokafka_lite.__file__).resolve().parent


def _source_of(module: str) -> Path | None:
    parts = module.split(".")[1:]
    for candidate in (PACKAGE.joinpath(*parts).with_suffix(".py"), PACKAGE.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def test_every_old_path_names_a_module_that_exists() -> None:
    renamed = aiokafka_lite._RENAMED_MODULES
    missing = {old: new for old, new in renamed.items() if _source_of(new) is None}
    assert not missing, f"old paths pointing at no module: {missing}"
    still_there = [old for old in renamed if _source_of(old) is not None]
    assert not still_there, (
        f"old paths that are real modules again (the alias would hide them): {still_there}"
    )


def test_the_table_is_sorted() -> None:
    names = list(aiokafka_lite._RENAMED_MODULES)
    assert names == sorted(names), "keep _RENAMED_MODULES sorted"


_PROBE = """
import importlib, json, sys, warnings
import aiokafka_lite
out = {}
for old, new in aiokafka_lite._RENAMED_MODULES.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module = importlib.import_module(old)
        except ImportError as exc:  # an optional dependency of the module (pyspark, httpx...)
            if (exc.name or "").startswith("aiokafka_lite"):
                raise
            out[old] = "optional"
            continue
    moved = [w for w in caught if issubclass(w.category, DeprecationWarning) and old in str(w.message)]
    out[old] = {"same": module is sys.modules[new], "warned": bool(moved), "warns": aiokafka_lite._warns(old)}
print(json.dumps(out))
"""


def test_old_paths_import_the_new_module_and_internal_ones_warn() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.splitlines()[-1])
    checked = {old: r for old, r in found.items() if r != "optional"}
    assert checked, "no old path could be imported"
    wrong = {old: r for old, r in checked.items() if not r["same"] or r["warned"] != r["warns"]}
    assert not wrong, f"old paths that are not the new module, or warn wrongly: {wrong}"
