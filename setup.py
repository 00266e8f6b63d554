"""Build hook for the optional C accelerator; all metadata lives in pyproject.toml.

The extensions only speed up record encode/decode loops and make producer record
handles the garbage collector does not track: if it cannot be compiled
(no compiler, unsupported interpreter) the install still succeeds and the identical
pure-Python code is used. ``AIOKAFKA_LITE_NO_EXTENSIONS=1`` skips building it.

``AIOKAFKA_LITE_REQUIRE_EXTENSIONS=1`` (set by CI) turns that leniency off: a build
failure, or an interpreter that cannot build it, fails the install loudly, so the
C-backend tests cannot silently vanish.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


REQUIRE_EXTENSIONS = _flag("AIOKAFKA_LITE_REQUIRE_EXTENSIONS")
SKIP_EXTENSIONS = _flag("AIOKAFKA_LITE_NO_EXTENSIONS")

if REQUIRE_EXTENSIONS and SKIP_EXTENSIONS:
    sys.exit(
        "error: AIOKAFKA_LITE_REQUIRE_EXTENSIONS=1 and AIOKAFKA_LITE_NO_EXTENSIONS=1 contradict each other: "
        "unset one of them"
    )
if REQUIRE_EXTENSIONS and sys.implementation.name != "cpython":
    sys.exit(
        f"error: AIOKAFKA_LITE_REQUIRE_EXTENSIONS=1 but the C extension only builds on CPython "
        f"(this is {sys.implementation.name})"
    )


class OptionalBuildExt(build_ext):
    """``build_ext`` that downgrades any failure to a warning, unless extensions are required."""

    def run(self) -> None:
        if REQUIRE_EXTENSIONS:
            super().run()  # build_extension below already reported the failing extension
            return
        try:
            super().run()
        except Exception as exc:
            self._failed("C extensions", exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._failed(f"C extension {ext.name}", exc)

    def _failed(self, what: str, exc: Exception) -> None:
        if REQUIRE_EXTENSIONS:
            print(
                f"ERROR: {what} failed to build and AIOKAFKA_LITE_REQUIRE_EXTENSIONS=1 requires them: {exc}\n"
                "       (a C compiler and the Python headers are needed, e.g. apt-get install gcc python3-dev)",
                file=sys.stderr,
            )
            raise exc
        print(f"WARNING: optional {what} not built: {exc}", file=sys.stderr)


ext_modules = []
if not SKIP_EXTENSIONS and sys.implementation.name == "cpython":
    ext_modules.append(
        Extension(
            "aiokafka_lite.wire.records._crecords",
            sources=["src/aiokafka_lite/wire/records/_crecords.c"],
            # optional=True makes setuptools itself swallow compile errors; required builds must not.
            optional=not REQUIRE_EXTENSIONS,
        )
    )
    ext_modules.append(
        Extension(
            "aiokafka_lite.produce._chandle",
            sources=["src/aiokafka_lite/produce/_chandle.c"],
            optional=not REQUIRE_EXTENSIONS,
        )
    )

setup(ext_modules=ext_modules, cmdclass={"build_ext": OptionalBuildExt})
