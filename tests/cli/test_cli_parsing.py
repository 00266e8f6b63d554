"""Pure parts of the CLI: format strings, JSON records, option coercion, timestamps, input lines."""

from __future__ import annotations

import io
import json

import pytest
import typer
from rich.console import Console

from aiokafka_lite.cli._common import parse_client_options, parse_key_values, parse_timestamp
from aiokafka_lite.cli._format import FormatError, compile_format, print_sections, record_to_json, table
from aiokafka_lite.cli.produce import _split_lines, _unescape
from aiokafka_lite.consume import ConsumerConfig, Record, TimestampType
from aiokafka_lite.net import ClientConfig
from aiokafka_lite.produce import ProducerConfig


def rec(key: bytes | None = b"k1", value: bytes | None = b"v1", headers: tuple = ()) -> Record:
    return Record("orders", 3, 42, key, value, headers, 1_700_000_000_000, TimestampType.CREATE_TIME, 0)


def test_default_format_prints_the_value_and_a_newline() -> None:
    assert compile_format("%s\\n")(rec()) == b"v1\n"


def test_every_directive_and_escape() -> None:
    r = rec(headers=(("a", b"1"), ("b", None)))
    out = compile_format("%t|%p|%o|%T|%k|%s|%K|%S|%h|%%|\\t|\\\\|\\r")(r)
    assert out == b"orders|3|42|1700000000000|k1|v1|2|2|a=1,b=|%|\t|\\|\r"


def test_null_key_and_value_print_empty_with_size_minus_one() -> None:
    assert compile_format("[%k][%s] %K %S")(rec(None, None)) == b"[][] -1 -1"


def test_binary_values_pass_through_untouched() -> None:
    assert compile_format("%s")(rec(value=b"\xff\x00\xfe")) == b"\xff\x00\xfe"


@pytest.mark.parametrize("fmt", ["%x", "abc%", "\\q", "tail\\"])
def test_bad_format_strings_are_rejected(fmt: str) -> None:
    with pytest.raises(FormatError):
        compile_format(fmt)


def test_json_record_uses_text_for_utf8_and_base64_otherwise() -> None:
    data = json.loads(record_to_json(rec(key=None, value=b"\xff\xfe", headers=(("h", "é".encode()),))))
    assert data == {
        "topic": "orders",
        "partition": 3,
        "offset": 42,
        "timestamp": 1_700_000_000_000,
        "timestamp_type": "CreateTime",
        "key": None,
        "value": {"base64": "//4="},
        "headers": [["h", "é"]],
    }


def test_timestamps_from_milliseconds_and_iso8601() -> None:
    assert parse_timestamp("1700000000000") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T22:13:20") == 1_700_000_000_000  # naive means UTC
    assert parse_timestamp("2023-11-15T00:13:20+02:00") == 1_700_000_000_000
    with pytest.raises(typer.BadParameter):
        parse_timestamp("yesterday")
    with pytest.raises(typer.BadParameter):
        parse_timestamp("-5")


def test_client_options_are_converted_to_each_options_type() -> None:
    opts = parse_client_options(
        [
            "linger.ms=12.5",
            "batch_size=1000",
            "enable-idempotence=false",
            "compression=zstd",
            "security.protocol=SASL_PLAINTEXT",
            "compression_level=none",
            "sasl_plain_password=a=b",
        ],
        ProducerConfig,
        ClientConfig,
    )
    assert opts == {
        "linger_ms": 12.5,
        "batch_size": 1000,
        "enable_idempotence": False,
        "compression": "zstd",
        "security_protocol": "SASL_PLAINTEXT",
        "compression_level": None,
        "sasl_plain_password": "a=b",
    }
    assert parse_client_options(["auto.offset.reset=earliest"], ConsumerConfig) == {
        "auto_offset_reset": "earliest"
    }


@pytest.mark.parametrize("item", ["no_such_option=1", "batch_size=big", "linger_ms", "max_versions=1"])
def test_bad_client_options_are_usage_errors(item: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_client_options([item], ProducerConfig, ClientConfig)


def test_key_values_need_a_name_and_an_equals_sign() -> None:
    assert parse_key_values(["a=1", "b=", "c=x=y"], "--header") == [("a", "1"), ("b", ""), ("c", "x=y")]
    with pytest.raises(typer.BadParameter):
        parse_key_values(["=1"], "--header")


def test_input_lines_lose_their_line_ending_blank_lines_are_skipped() -> None:
    values, keys = _split_lines([b"a\n", b"\n", b"b\r\n", b"c"], None)
    assert values == [b"a", b"b", b"c"]
    assert keys is None


def test_key_separator_splits_at_the_first_occurrence() -> None:
    values, keys = _split_lines([b"k1:v:1\n", b"no key\n", b":empty key\n"], b":")
    assert values == [b"v:1", b"no key", b"empty key"]
    assert keys == [b"k1", None, b""]


def test_escapes_typed_on_a_command_line() -> None:
    assert _unescape("\\t") == "\t"
    assert _unescape("a\\nb\\\\c\\x") == "a\nb\\c\\x"


def test_tables_show_missing_values_as_a_dash_and_lists_joined() -> None:
    out = io.StringIO()
    console = Console(file=out, highlight=False, soft_wrap=True, width=200)
    rows = [["m1", 3, ["t-0", "t-1"], None], ["m2", "", [], 0]]
    empty = table(("member", "epoch"), [])
    print_sections(
        console, [("[bold]g1[/] summary", [table(("member", "epoch", "assignment", "lag"), rows), empty])]
    )
    print_sections(console, [("g2", [empty]), ("g3", [])])
    lines = [line.split() for line in out.getvalue().splitlines()]
    assert lines == [
        ["g1", "summary"],
        ["member", "epoch", "assignment", "lag"],
        ["m1", "3", "t-0,", "t-1", "-"],
        ["m2", "-", "-", "0"],
        ["g2"],
        [],
        ["g3"],
    ]
