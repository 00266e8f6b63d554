"""The client's table of implemented API versions against the generated codec."""

from __future__ import annotations

import pytest

from aiokafka_lite.core.errors import UnsupportedVersionError
from aiokafka_lite.net.api_versions import CLIENT_API_VERSIONS, IMPLEMENTED_APIS
from aiokafka_lite.net.connection import negotiate_version
from aiokafka_lite.wire import messages as m


def test_table_names_the_codec_api_of_each_key() -> None:
    keys = [key for key, _, _ in IMPLEMENTED_APIS]
    assert keys == sorted(set(keys))
    for key, name, _ in IMPLEMENTED_APIS:
        assert m.REQUESTS[key].NAME == f"{name}Request"
        assert m.RESPONSES[key].NAME == f"{name}Response"


@pytest.mark.parametrize(
    ("key", "name", "version"), IMPLEMENTED_APIS, ids=[n for _, n, _ in IMPLEMENTED_APIS]
)
def test_implemented_version_is_within_the_codec(key: int, name: str, version: int) -> None:
    # The codec must encode the request and decode the response at every version the
    # client may pick, down to the codec's floor.
    for cls in (m.REQUESTS[key], m.RESPONSES[key]):
        assert cls.MIN_VERSION <= version <= cls.MAX_VERSION, (name, cls.MIN_VERSION, cls.MAX_VERSION)


def test_negotiation_stops_at_the_implemented_version() -> None:
    # A broker newer than the client offers higher versions than either side's codec.
    broker = {key: (0, 99) for key in m.REQUESTS}
    for key, version in CLIENT_API_VERSIONS.items():
        assert negotiate_version(key, broker) == version
        # A max_versions cap from the config lowers the version but never raises it.
        assert negotiate_version(key, broker, cap=version + 1) == version
    assert negotiate_version(m.FetchRequest.API_KEY, broker, cap=12) == 12
    # The broker's own maximum still wins when it is lower.
    assert negotiate_version(m.ProduceRequest.API_KEY, {0: (3, 9)}) == 9


def test_api_without_an_implemented_version_is_refused() -> None:
    unimplemented = [key for key in m.REQUESTS if key not in CLIENT_API_VERSIONS]
    for key in unimplemented:
        with pytest.raises(UnsupportedVersionError, match="not implemented by this client"):
            negotiate_version(key, {key: (0, 99)})
    with pytest.raises(UnsupportedVersionError, match="not implemented by this client"):
        negotiate_version(9999, {9999: (0, 1)})
