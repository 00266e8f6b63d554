"""Build hook for the optional C accelerator; all metadata lives in pyproject.toml.

The extension only speeds up record encode/decode loops: if it cannot be compiled
(no compiler, unsupported interpreter) the install still succeeds and the identical
pure-Python code is used. ``AIOKAFKA_LITE_NO_EXTENSIONS=1`` skips building it.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """``build_ext`` that downgrades any failure to a warning."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            print(f"WARNING: optional C extensions not built: {exc}", file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"WARNING: optional C extension {ext.name} not built: {exc}", file=sys.stderr)


ext_modules = []
if os.environ.get("AIOKAFKA_LITE_NO_EXTENSIONS", "") in ("", "0") and sys.implementation.name == "cpython":
    ext_modules.append(
        Extension(
            "aiokafka_lite.wire.records._crecords",
            sources=["src/aiokafka_lite/wire/records/_crecords.c"],
            optional=True,
        )
    )

setup(ext_modules=ext_modules, cmdclass={"build_ext": OptionalBuildExt})
