"""The shared option-declaration helper (aiokafka_lite.core.options)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from aiokafka_lite.core.errors import ConfigError
from aiokafka_lite.core.options import Options, at_least, one_of, option


@dataclass(frozen=True, kw_only=True)
class _Demo(Options):
    acks: int = option(-1, "Acknowledgements.", one_of(0, 1, -1))
    linger_ms: float = option(5.0, "Linger.", at_least(0))
    name: str | None = option(None, "A name.")
    password: str | None = option(None, "Secret.", secret=True)
    tags: Mapping[str, int] = option(doc="Tags.", default_factory=dict)

    def validate(self) -> None:
        if self.acks == 0 and self.name == "strict":
            raise ConfigError("strict needs acks")


def test_defaults_and_overrides() -> None:
    d = _Demo.from_options(acks=1, linger_ms=2)
    assert (d.acks, d.linger_ms, d.tags) == (1, 2, {})
    assert d.replace(acks=0).acks == 0


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"acks": 2}, "acks: must be one of"),
        ({"linger_ms": -1}, "linger_ms: must be >= 0"),
        ({"linger_ms": "5"}, "linger_ms: expected float"),
        ({"acks": True}, "acks: expected int"),
        ({"name": 3}, "name: expected"),
        ({"acks": 0, "name": "strict"}, "strict needs acks"),
    ],
)
def test_validation_errors(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        _Demo.from_options(**kwargs)


def test_unknown_option_suggests_close_match() -> None:
    with pytest.raises(ConfigError, match="did you mean 'linger_ms'"):
        _Demo.from_options(linger_msec=3)


def test_secret_never_shown() -> None:
    d = _Demo(password="hunter2")
    assert "hunter2" not in repr(d)
    assert d.as_dict()["password"] == "<redacted>"
    with pytest.raises(ConfigError) as ei:
        _Demo(password=12345)  # type: ignore[arg-type]
    assert "12345" not in str(ei.value)
    rows = {r.name: r for r in _Demo.describe()}
    assert rows["acks"].default == "-1" and rows["acks"].doc == "Acknowledgements."
    assert rows["tags"].default == "{}"
