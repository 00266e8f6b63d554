"""The built documentation site: the API reference covers every public name, and what a
browser would show wrong can be checked without one (code wider than the text column,
table cells splitting names, a picture whose tooltips cannot work).

The site is built once for the module with ``mkdocs build --strict`` (as
``scripts/test.sh`` does) into a temporary folder."""

from __future__ import annotations

import html
import importlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import aiokafka_lite
from aiokafka_lite.core import errors

ROOT = Path(__file__).resolve().parents[2]

#: Modules whose ``__all__`` the API reference covers in full (with the top-level
#: package's). Not here: ``cli`` (a command, documented on its own page), ``wire`` and
#: ``testing`` (no ``__all__``; the protocol layer and the test helpers, whose
#: user-facing parts the broker page documents).
PUBLIC_MODULES = [
    "aiokafka_lite.admin",
    "aiokafka_lite.broker",
    "aiokafka_lite.core.options",
    "aiokafka_lite.core.errors",
    "aiokafka_lite.consume",
    "aiokafka_lite.consume.groups",
    "aiokafka_lite.processing.failures",
    "aiokafka_lite.core.health",
    "aiokafka_lite.integrations.log_handler",
    "aiokafka_lite.integrations.mirror",
    "aiokafka_lite.net",
    "aiokafka_lite.integrations.otel",
    "aiokafka_lite.produce",
    "aiokafka_lite.integrations.prometheus",
    "aiokafka_lite.consume.share",
    "aiokafka_lite.integrations.spark",
    "aiokafka_lite.processing.transact",
]

#: Code lines longer than this do not fit the text column at 1280 px (checked in
#: Chromium with the site's CSS).
MAX_CODE_LINE = 88


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj
    return None


def _public_names() -> Iterator[tuple[str, str, Any]]:
    for name in aiokafka_lite.__all__:
        yield "aiokafka_lite", name, getattr(aiokafka_lite, name)
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            # One class per Kafka error code: the Errors page describes them together
            # (BrokerResponseError, ERRORS_BY_CODE) rather than 150 entries.
            if isinstance(obj, type) and issubclass(obj, errors.BrokerResponseError):
                if obj is not errors.BrokerResponseError:
                    continue
            yield module_name, name, obj


def test_the_api_reference_covers_every_public_name(site: Path) -> None:
    anchors: set[str] = set()
    for page in (site / "api").rglob("*.html"):
        anchors |= set(re.findall(r'id="(aiokafka_lite(?:\.\w+)+)"', page.read_text()))
    documented = {id(obj) for obj in map(_resolve, anchors) if obj is not None}
    missing = [f"{module}.{name}" for module, name, obj in _public_names() if id(obj) not in documented]
    assert not missing, f"public names without an entry in the API reference: {missing}"
    # The names issue 24 found missing are among them.
    for dotted in [
        "aiokafka_lite.consume.share.ShareConsumer",
        "aiokafka_lite.processing.ShareWorkers",
        "aiokafka_lite.consume.share.AcknowledgeType",
        "aiokafka_lite.consume.share.ShareRecord",
        "aiokafka_lite.integrations.mirror.Mirror",
        "aiokafka_lite.integrations.mirror.MirrorStats",
        "aiokafka_lite.integrations.mirror.ProgressDisplay",
        "aiokafka_lite.net.Client",
        "aiokafka_lite.integrations.otel.instrument",
        "aiokafka_lite.integrations.spark.register",
    ]:
        assert dotted in anchors, dotted


def test_option_classes_render_their_options_not_their_source(site: Path) -> None:
    for page, cls in [
        ("producer", "aiokafka_lite.produce.ProducerConfig"),
        ("consumer", "aiokafka_lite.consume.ConsumerConfig"),
    ]:
        text = (site / "api" / page / "index.html").read_text()
        start = text.index(f'id="{cls}"')
        section = html.unescape(re.sub(r"<[^>]+>", "", text[start : start + 200_000]))
        assert "option(" not in section, f"{cls} shows option(...) declarations"
    producer = (site / "api" / "producer" / "index.html").read_text()
    assert 'id="aiokafka_lite.produce.ProducerConfig.enable_idempotence"' in producer
    linger = producer[producer.index('id="aiokafka_lite.produce.ProducerConfig.linger_ms"') :]
    assert "linger_ms" in linger and "How long a batch waits" in linger[:5000]


def _code_blocks(page: Path) -> Iterator[tuple[str, str]]:
    """(language, text) of every highlighted code block of a built page."""
    pattern = r'<div class="language-(\w+) highlight">.*?<pre[^>]*>(.*?)</pre>'
    for lang, pre in re.findall(pattern, page.read_text(), re.S):
        yield lang, html.unescape(re.sub(r"<[^>]+>", "", pre))


def test_code_fits_the_text_column(site: Path) -> None:
    pages = [p for p in site.rglob("*.html") if p.parent.name != "examples"]
    # examples/: the example programs included as they are, formatted at the project's
    # 110 columns; those blocks scroll. ```text blocks (program output) wrap by CSS.
    assert len(pages) > 20
    blocks = [(lang, text) for page in pages for lang, text in _code_blocks(page)]
    assert len(blocks) > 50 and {"python", "bash", "text"} <= {lang for lang, _ in blocks}
    wide = [
        f"{page.relative_to(site)}: {len(line)}: {line}"
        for page in pages
        for lang, text in _code_blocks(page)
        if lang != "text"
        for line in text.splitlines()
        if len(line) > MAX_CODE_LINE
    ]
    assert not wide, "code lines wider than the text column:\n" + "\n".join(wide)


def test_the_css_keeps_table_code_whole_and_wraps_output(site: Path) -> None:
    css = (site / "stylesheets" / "extra.css").read_text()
    rules = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    assert re.search(
        r"table:not\(\[class\]\) code \{[^}]*word-break: normal;[^}]*overflow-wrap: normal;", rules
    )
    assert re.search(r"\.language-text pre code \{[^}]*white-space: pre-wrap;", rules)
    page = (site / "configuration" / "index.html").read_text()
    assert 'href="../stylesheets/extra.css"' in page
    # Option names may break only between words.
    assert "<code>enable_<wbr>idempotence</code>" in page or "<code>enable_<wbr />idempotence</code>" in page


def test_the_trace_picture_is_an_svg_document_so_hover_works(site: Path) -> None:
    page_dir = site / "guide" / "observability"
    text = (page_dir / "index.html").read_text()
    assert "Hover a bar" in text
    embedded = re.findall(r'<object class="trace-timeline" data="([^"]+)" type="image/svg\+xml"', text)
    assert len(embedded) == 1 and (page_dir / embedded[0]).resolve().is_file()
    assert not re.search(r"<img[^>]+otel-trace-timeline\.svg", text), "an <img> shows no tooltips"
    assert (page_dir / embedded[0]).read_text().count("<title>") >= 5  # the tooltips


def test_doc_paths_in_option_texts_are_links(site: Path) -> None:
    page = (site / "configuration" / "index.html").read_text()
    assert '<a href="../guide/consumer-protocol/">docs/guide/consumer-protocol.md</a>' in page
