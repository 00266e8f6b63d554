"""tools/griffe_rst.py: docstring reStructuredText habits become Markdown in the API reference."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("griffe_rst", ROOT / "tools" / "griffe_rst.py")
assert spec is not None and spec.loader is not None
griffe_rst = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = griffe_rst
spec.loader.exec_module(griffe_rst)
convert = griffe_rst.rst_to_markdown


def test_literal_block_becomes_a_fenced_block() -> None:
    text = "Use it like this::\n\n    p = Producer(x)\n        nested()\n\nThen more text."
    assert (
        convert(text)
        == "Use it like this:\n\n```python\np = Producer(x)\n    nested()\n```\n\nThen more text."
    )


def test_lone_double_colon_and_shell_blocks() -> None:
    text = "Run:\n\n::\n\n    python -m aiokafka_lite.broker --port 0\n"
    assert convert(text) == "Run:\n\n\n```bash\npython -m aiokafka_lite.broker --port 0\n```\n"


def test_roles_become_inline_code() -> None:
    text = "See :class:`~aiokafka_lite.net.ClientConfig`, :meth:`Producer.send` and :py:func:`title <a.b>`."
    assert convert(text) == "See `ClientConfig`, `Producer.send` and `title`."


def test_text_without_rst_is_unchanged() -> None:
    text = "Plain text: a colon, ``literal``, and a list:\n\n* one\n* two"
    assert convert(text) == text


def test_a_trailing_double_colon_without_a_block_is_kept() -> None:
    assert convert("ends with::") == "ends with::"
