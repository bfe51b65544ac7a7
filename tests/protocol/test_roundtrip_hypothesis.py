"""Property: for every (message, version) of the spec, random message -> encode -> decode is the same
message, and re-encoding the decoded message reproduces the bytes exactly."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from kafkawire.protocol import message_class

from .strategies import all_pairs, messages

PAIRS = all_pairs()
SETTINGS = settings(
    max_examples=8,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _round_trip(cls, version, msg):
    data = msg.encode(version)
    back = cls.decode(data, version)
    assert back == msg, f"{cls.name} v{version}: {back!r} != {msg!r}"
    assert back.encode(version) == data
    # decode_from at an offset inside a larger buffer lands on the same end position
    padded = b"\xaa\xbb" + data + b"\xcc"
    obj, end = cls.decode_from(padded, 2, version)
    assert obj == msg and end == 2 + len(data)


@pytest.mark.parametrize("name,version", PAIRS, ids=[f"{n}-v{v}" for n, v in PAIRS])
def test_round_trip(name, version):
    cls = message_class(name)

    @SETTINGS
    @given(messages(cls, version))
    def check(msg):
        _round_trip(cls, version, msg)

    check()


FLEXIBLE_PAIRS = [(n, v) for n, v in PAIRS if message_class(n).is_flexible(v)]


@pytest.mark.parametrize("name,version", FLEXIBLE_PAIRS, ids=[f"{n}-v{v}" for n, v in FLEXIBLE_PAIRS])
def test_round_trip_with_unknown_tags(name, version):
    """Tagged fields no schema knows survive decode -> encode byte for byte, in every struct."""
    cls = message_class(name)

    @settings(SETTINGS, max_examples=4)
    @given(messages(cls, version, unknown_tags=True))
    def check(msg):
        _round_trip(cls, version, msg)

    check()
