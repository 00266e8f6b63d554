"""The documentation stays true: the generated configuration reference matches the code,
and the code shown in the README and the getting-started page runs."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_config_reference", ROOT / "tools" / "gen_config_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gen = load_generator()


def test_committed_configuration_reference_matches_the_code() -> None:
    stale = [str(path.relative_to(ROOT)) for path, text in gen.outputs().items() if path.read_text() != text]
    assert not stale, f"{stale} out of date: run python tools/gen_config_reference.py"


def test_every_option_of_every_options_class_has_a_row() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    readme = (ROOT / "README.md").read_text()
    for section in gen.sections():
        for f in dataclasses.fields(section.cls):
            site_name = "_<wbr>".join(f.name.split("_"))  # breaks between words only
            assert f"| <code>{site_name}</code> |" in page, (
                f"{section.cls.__name__}.{f.name} missing from docs"
            )
            assert f"| `{f.name}` |" in readme, f"{section.cls.__name__}.{f.name} missing from README"


def test_reference_cells_survive_markdown_tables() -> None:
    # Pipes in types (int | str) must not split table cells, on GitHub or in MkDocs.
    rows = [
        line
        for line in (ROOT / "docs" / "configuration.md").read_text().splitlines()
        if line.startswith("| <code>")
    ]
    assert rows
    for row in rows:
        cells = re.split(r"(?<!\\)\|", row)
        assert len(cells) == 6, row  # 4 cells between the outer pipes


def test_the_generator_check_mode_reports_stale_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "configuration.md"
    readme = tmp_path / "README.md"
    page.write_text("old")
    readme.write_text(f"intro\n{gen.START}\nold\n{gen.END}\noutro\n")
    monkeypatch.setattr(gen, "DOCS_PAGE", page)
    monkeypatch.setattr(gen, "README", readme)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 1
    assert page.read_text() == "old"  # --check writes nothing
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{gen.END}\noutro\n")
    assert "| `linger_ms` |" in text


def _python_block_after(text: str, marker: str) -> str:
    start = text.index(marker)
    match = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert match, marker
    return match.group(1)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, env=env
    )


def test_getting_started_program_runs() -> None:
    code = _python_block_after(
        (ROOT / "docs" / "getting-started.md").read_text(), "<!-- test: getting-started -->"
    )
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.fullmatch(r"written to partition 0 at offset 0", lines[0])
    assert lines[1:] == [
        "0 0 b'user-1' b'hello'",
        "0 1 None b'one'",
        "0 2 None b'two'",
        "0 3 None b'three'",
    ]


def test_readme_usage_example_runs() -> None:
    code = _python_block_after((ROOT / "README.md").read_text(), "## Use it")
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["partition 0, offset 0", "b'user-1' b'hello'"]
