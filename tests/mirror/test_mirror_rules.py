"""The mirror's pure parts: topic selection, renaming, partition choice, config copying,
rates, option validation, the progress display and the command line's usage errors."""

from __future__ import annotations

import io
import logging
import re
from typing import Any

import pytest

from aiokafka_lite.admin import (
    ConfigDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
)
from aiokafka_lite.admin.types import CreateTopicResult, PartitionDescription, Results, TopicDescription
from aiokafka_lite.cli.app import run as cli_run
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.integrations.mirror import (
    Mirror,
    MirrorConfigError,
    MirrorStats,
    PartitionStats,
    ProgressDisplay,
    RateMeter,
    TopicFilter,
    TopicRenamer,
    target_partition,
)
from aiokafka_lite.integrations.mirror.topics import copied_configs, ensure_target_topic
from aiokafka_lite.produce.partitioner import key_partition

# -- topic selection -------------------------------------------------------------------


def test_include_and_exclude_match_whole_names() -> None:
    f = TopicFilter.of(r"orders\..*", r".*\.tmp")
    assert f.matches("orders.eu")
    assert not f.matches("orders.eu.tmp")
    assert not f.matches("old.orders.eu")  # full match, not search
    assert not f.matches("orders")
    assert TopicFilter.of(re.compile("a|b")).matches("b")


@pytest.mark.parametrize(
    ("include", "exclude", "message"),
    [
        ("(", None, "include: '(' is not a valid regular expression"),
        ("ok", "[", "exclude: '[' is not a valid regular expression"),
        ("", None, "include: the regex is empty"),
        (3, None, "include: expected a regex string, got int"),
    ],
)
def test_bad_regexes_are_typed_errors_naming_the_option(include: Any, exclude: Any, message: str) -> None:
    with pytest.raises(MirrorConfigError, match=re.escape(message)) as info:
        TopicFilter.of(include, exclude)
    assert isinstance(info.value, E.ConfigError)


# -- renaming ---------------------------------------------------------------------------


def test_rename_templates_and_prefixes() -> None:
    assert TopicRenamer.of()("orders") == "orders"
    assert TopicRenamer.of("{topic}.mirror")("orders") == "orders.mirror"
    assert TopicRenamer.of("dc1.{topic}.{topic}")("a") == "dc1.a.a"
    assert TopicRenamer.of(prefix="dc1.")("orders") == "dc1.orders"


@pytest.mark.parametrize(
    ("rename", "prefix", "message"),
    [
        ("mirror", None, "has no {topic} placeholder"),
        ("{topic}.{dc}", None, "has the field {dc}; the only field allowed is {topic}"),
        ("{topic!r}", None, "the only field allowed is {topic}"),
        ("{topic", None, "is not a valid template"),
        ("{topic}/x", None, "characters in target topic names that Kafka does not allow"),
        (None, "dc 1.", "characters in target topic names that Kafka does not allow"),
        (None, "", "prefix: must be a non-empty string"),
        ("{topic}.m", "p.", "give one of them"),
    ],
)
def test_bad_renames_are_typed_errors(rename: str | None, prefix: str | None, message: str) -> None:
    with pytest.raises(MirrorConfigError, match=re.escape(message)):
        TopicRenamer.of(rename, prefix)


def test_a_renamed_name_over_kafkas_limit_is_refused_with_the_topic_named() -> None:
    renamer = TopicRenamer.of("{topic}." + "x" * 200)
    with pytest.raises(
        MirrorConfigError, match=r"target name of topic 'a-long-topic.* is longer than 249 characters"
    ):
        renamer("a-long-topic-name-here-to-push-it-over" + "y" * 20)


# -- partitions -------------------------------------------------------------------------


def test_partition_is_kept_when_counts_match_else_placed_by_key() -> None:
    assert [target_partition(b"k", p, 4, 4) for p in range(4)] == [0, 1, 2, 3]
    assert target_partition(None, 3, 4, 4) == 3
    for key in (b"a", b"order-17", b""):
        assert target_partition(key, 0, 4, 3) == key_partition(key, 3)
        assert target_partition(key, 2, 4, 3) == key_partition(key, 3)  # the source partition does not matter
    assert [target_partition(None, p, 5, 2) for p in range(5)] == [0, 1, 0, 1, 0]


# -- configs ----------------------------------------------------------------------------


def _description(*entries: ConfigEntry) -> ConfigDescription:
    return ConfigDescription(ConfigResource(ConfigResourceType.TOPIC, "t"), {e.name: e for e in entries})


def test_only_topic_level_configs_are_copied() -> None:
    described = _description(
        ConfigEntry("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ConfigEntry("cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ConfigEntry("segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG, is_default=True),
        ConfigEntry("min.insync.replicas", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigEntry("max.message.bytes", "2000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ConfigEntry("secret.thing", None, ConfigSource.DYNAMIC_TOPIC_CONFIG, is_sensitive=True),
    )
    assert copied_configs(described) == {"retention.ms": "1000", "cleanup.policy": "compact"}


class _FakeAdmin:
    """The three Admin calls ensure_target_topic makes, against a dict of topics; the
    target refuses some config names."""

    def __init__(
        self, topics: dict[str, int], refuses: set[str] = frozenset(), configs: dict[str, str] | None = None
    ):  # type: ignore[assignment]
        self.topics = dict(topics)
        self.refuses = refuses
        self.source_configs = configs or {}
        self.created: dict[str, dict[str, str | None]] = {}

    async def describe_topics(self, names: list[str]) -> Results[str, TopicDescription]:
        out: Results[str, TopicDescription] = Results()
        for n in names:
            if n in self.topics:
                parts = [PartitionDescription(p, 1, 0, (1,), (1,), ()) for p in range(self.topics[n])]
                out[n] = TopicDescription(name=n, partitions=parts)
            else:
                out[n] = TopicDescription(name=n, error=E.UnknownTopicOrPartitionError(n))
        return out

    async def describe_configs(
        self, resources: list[ConfigResource]
    ) -> Results[ConfigResource, ConfigDescription]:
        entries = [
            ConfigEntry(k, v, ConfigSource.DYNAMIC_TOPIC_CONFIG) for k, v in self.source_configs.items()
        ]
        return Results({r: _description(*entries) for r in resources})

    async def create_topics(
        self, topics: list[Any], *, validate_only: bool = False
    ) -> Results[str, CreateTopicResult]:
        out: Results[str, CreateTopicResult] = Results()
        for t in topics:
            bad = set(t.configs) & self.refuses
            if bad:
                out[t.name] = CreateTopicResult(
                    t.name, error=E.InvalidConfigError(f"unknown config {sorted(bad)}")
                )
            elif t.name in self.topics:
                out[t.name] = CreateTopicResult(t.name, error=E.TopicAlreadyExistsError(t.name))
            else:
                if not validate_only:
                    self.topics[t.name] = t.partitions
                    self.created[t.name] = dict(t.configs)
                out[t.name] = CreateTopicResult(t.name, partitions=t.partitions)
        return out


async def test_configs_the_target_refuses_are_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = _FakeAdmin({"t": 3}, configs={"retention.ms": "5", "future.config": "x"})
    target = _FakeAdmin({}, refuses={"future.config"})
    with caplog.at_level(logging.WARNING, "aiokafka_lite.integrations.mirror"):
        made = await ensure_target_topic(source, target, "t", "t.m", 3)  # type: ignore[arg-type]
    assert made.created and made.partitions == 3
    assert target.created == {"t.m": {"retention.ms": "5"}}
    assert made.refused_configs == {"future.config": "x"}
    assert "refuses config future.config=x of source topic 't'" in caplog.text


async def test_an_existing_target_topic_is_used_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    source = _FakeAdmin({"t": 3}, configs={"retention.ms": "5"})
    target = _FakeAdmin({"t": 2})
    with caplog.at_level(logging.WARNING, "aiokafka_lite.integrations.mirror"):
        made = await ensure_target_topic(source, target, "t", "t", 3)  # type: ignore[arg-type]
    assert not made.created and made.partitions == 2 and target.created == {}
    assert "exists with 2 partitions" in caplog.text


# -- progress ---------------------------------------------------------------------------


def test_rate_over_a_sliding_window() -> None:
    meter = RateMeter(window_s=10)
    assert meter.rate(0.0) == 0.0
    meter.add(100.0, 50)
    assert meter.rate(100.5) == 50.0  # under a second: counted over one second
    meter.add(104.0, 150)
    assert meter.rate(105.0) == 200 / 5
    meter.add(120.0, 30)
    assert meter.rate(120.0) == 30  # the old samples left the window
    with pytest.raises(ValueError):
        RateMeter(0)


def _stats() -> MirrorStats:
    tp = TopicPartition("orders", 0)
    return MirrorStats(
        partitions={
            tp: PartitionStats(
                tp, TopicPartition("orders.m", 0), position=90, high_watermark=100, records=90
            ),
            TopicPartition("orders", 1): PartitionStats(
                TopicPartition("orders", 1), TopicPartition("orders.m", -1), position=None
            ),
        },
        records=90,
        bytes=9000,
        records_per_s=45.0,
    )


def test_stats_lag_and_plain_data() -> None:
    stats = _stats()
    assert stats.lag == 10
    data = stats.as_dict()
    assert data["lag"] == 10
    assert data["partitions"]["orders:0"] == {  # type: ignore[index]
        "target": "orders.m:0",
        "position": 90,
        "read": None,
        "high_watermark": 100,
        "lag": 10,
        "records": 90,
        "records_per_s": 0.0,
    }
    assert data["partitions"]["orders:1"]["lag"] is None  # type: ignore[index]


class _FakeMirror:
    def stats(self) -> MirrorStats:
        return _stats()


async def test_progress_falls_back_to_plain_lines_off_a_terminal() -> None:
    out = io.StringIO()
    async with ProgressDisplay(_FakeMirror(), interval_s=0.05, file=out) as display:
        assert display.plain
    lines = out.getvalue().splitlines()
    assert lines[-1] == (
        "mirror: 2 partitions, 90 records copied (45/s, 0.00 MB/s), lag 10 (1 partitions behind), 0 topics created"
    )


async def test_progress_as_a_rich_table() -> None:
    out = io.StringIO()
    async with ProgressDisplay(_FakeMirror(), interval_s=0.05, plain=False, file=out) as display:
        assert not display.plain
        import asyncio

        await asyncio.sleep(0.2)
    text = out.getvalue()
    assert "orders.m[key]" in text and "orders[0]" in text


# -- options ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"source": "nohost"}, "source: 'nohost' is not HOST:PORT"),
        ({"target": ""}, "target: expected HOST:PORT"),
        ({"commit_interval_ms": 0}, "commit_interval_ms: must be an int >= 1"),
        ({"auto_offset_reset": "none"}, "auto_offset_reset: 'earliest' or 'latest'"),
        ({"group_id": ""}, "group_id: must be a non-empty string"),
        ({"replication_factor": 0}, "replication_factor: must be -1"),
        ({"source_options": {"enable_auto_commit": True}}, "are set by the mirror itself"),
        ({"target_options": {"transactional_id": "x"}}, "are set by the mirror itself"),
        ({"target_options": {"lingr_ms": 1}}, "target_options: unknown option(s) ['lingr_ms']"),
        ({"rename": "x"}, "has no {topic} placeholder"),
    ],
)
def test_mirror_options_are_validated_when_built(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"source": "127.0.0.1:1", "target": "127.0.0.1:2", "include": ".*", **kwargs}
    with pytest.raises(MirrorConfigError, match=re.escape(message)):
        Mirror(args.pop("source"), args.pop("target"), **args)


def test_exactly_once_transactional_id_is_group_and_instance() -> None:
    m = Mirror("127.0.0.1:1", "127.0.0.1:2", include=".*", group_id="g", exactly_once=True, instance_id="i1")
    assert m.transactional_id == "g-i1"
    assert Mirror("127.0.0.1:1", "127.0.0.1:2", include=".*").transactional_id is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--include", "("], "include: '(' is not a valid regular expression"),
        (["--include", "x", "--rename", "m"], "has no {topic} placeholder"),
        (["--include", "x", "-T", "nope=1"], "unknown option 'nope'"),
    ],
)
def test_cli_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_run(["mirror", "--source", "127.0.0.1:1", "--target", "127.0.0.1:2", *argv])
    assert code == 2
    assert message in capsys.readouterr().err


async def test_progress_without_rich_installed_is_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "rich", None)  # "import rich" now raises ImportError
    out = io.StringIO()
    async with ProgressDisplay(_FakeMirror(), interval_s=0.05, plain=False, file=out) as display:
        assert display.plain
    assert out.getvalue().splitlines()[-1].startswith("mirror: 2 partitions, 90 records copied")
