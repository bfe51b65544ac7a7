"""Differential tests against real implementations: kafka-python 3.x and kio.

For every (message, version) a peer also supports: random kafkawire messages are
encoded by both sides, the bytes must be identical, and each side must decode
the other's bytes to the same values. Disagreements a peer is wrong about are
skipped with the reason, after checking the schema.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from kafkawire.protocol import message_class
from kafkawire.protocol.schema import message_names, message_spec

from . import peers
from .strategies import messages

# no shrinking: a disagreement is reported at once, and the suite stays fast when a peer is wrong
SETTINGS = settings(
    max_examples=6,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- kafka-python 3.x ---------------------------------------------------------------------------

try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the peer loads its schemas with a deprecated API
        KP_ALL = peers.kafka_python_classes()
except ImportError:  # pragma: no cover - the peer is a test dependency
    KP_ALL = {}
KP = {n: c for n, c in KP_ALL.items() if n not in ("RequestHeader", "ResponseHeader")}

KP_SKIPS: dict[tuple[str, int], str] = {}


def _kp_pairs():
    pairs = []
    for name, kp_cls in sorted(KP.items()):
        if name not in message_names():
            continue
        spec = message_spec(name)
        lo, hi = peers.kp_valid_versions(kp_cls)
        for v in range(max(lo, spec.valid.lo), min(hi, spec.valid.hi) + 1):
            pairs.append((name, v))
    return pairs


KP_PAIRS = _kp_pairs()


def test_kafka_python_coverage():
    if not KP:
        pytest.skip("kafka-python 3.x is not installed")
    names = {n for n, _ in KP_PAIRS}
    print(
        f"kafka-python differential: {len(KP_PAIRS)} (message, version) pairs over {len(names)} messages, "
        f"plus request headers v1/v2 and response headers v0/v1"
    )
    assert len(KP_PAIRS) > 400


@pytest.mark.parametrize("name,version", KP_PAIRS, ids=[f"{n}-v{v}" for n, v in KP_PAIRS])
def test_kafka_python(name, version):
    if (name, version) in KP_SKIPS:
        pytest.skip(KP_SKIPS[(name, version)])
    cls = message_class(name)
    kp_cls = KP[name]
    definition = cls.spec.definition(version)
    flexible = definition.is_flexible(version)

    @SETTINGS
    @given(messages(cls, version))
    def check(msg):
        ours = msg.encode(version)
        theirs = peers.kp_encode(
            kp_cls, peers.to_kafka_python(msg, definition.root, kp_cls, version), version, flexible
        )
        assert theirs == ours, "equal messages, different bytes"
        decoded = peers.kp_decode(kp_cls, ours, version, flexible)
        assert peers.kp_neutral(decoded, kp_cls._struct, definition.root, version) == peers.neutral(
            msg, definition.root, version
        )
        assert cls.decode(theirs, version) == msg

    check()


# -- kio ------------------------------------------------------------------------------------------

try:
    KIO = peers.kio_classes()
except ImportError:  # pragma: no cover - the peer is a test dependency
    KIO = {}

KIO_PAIRS = sorted((name, v) for name, v in KIO if name in message_names() and v in message_spec(name).valid)
# (message, version) pairs where kio's schema disagrees with Kafka's, each with the reason. None at
# present: the spec follows Kafka 4.4.0's released jars, and kio agrees on every pair both define.
KIO_SKIPS: dict[tuple[str, int], str] = {}


def _kio_override(kafka_types: dict):
    """Values kio's Python types can hold: error codes it knows (an enum), durations and timestamps
    within datetime's range (it converts through float seconds, exact below 2**40 ms)."""

    from hypothesis import strategies as st
    from kio.schema.errors import ErrorCode

    codes = st.sampled_from(sorted(e.value for e in ErrorCode))
    # kio converts timestamps through float seconds and misreads large ones by a millisecond
    # (test_kio_misreads_far_future_timestamps); below 2**42 ms (year 2109) the conversion is exact.
    ms_max = (1 << 42) - 1
    special = {
        ("error_code", False): codes,
        ("timedelta_i64", False): st.integers(-(1 << 40), 1 << 40),
        ("datetime_i64", False): st.integers(0, ms_max),  # kio: "Cannot parse negative timestamp"
        ("datetime_i64", True): st.one_of(st.just(-1), st.integers(0, ms_max)),  # -1 is its None
    }

    def override(f):
        return special.get(kafka_types.get(id(f)))

    return override


def test_kio_coverage():
    if not KIO:
        pytest.skip("kio is not installed")
    names = {n for n, _ in KIO_PAIRS}
    print(f"kio differential: {len(KIO_PAIRS)} (message, version) pairs over {len(names)} messages")
    assert len(KIO_PAIRS) > 500


@pytest.mark.parametrize("name,version", KIO_PAIRS, ids=[f"{n}-v{v}" for n, v in KIO_PAIRS])
def test_kio(name, version):
    if (name, version) in KIO_SKIPS:
        pytest.skip(KIO_SKIPS[(name, version)])
    cls = message_class(name)
    kio_cls = KIO[(name, version)]
    root = cls.spec.definition(version).root
    kafka_types = peers.kio_kafka_types(kio_cls, root, version)

    @SETTINGS
    @given(messages(cls, version, override=_kio_override(kafka_types)))
    def check(msg):
        ours = msg.encode(version)
        theirs_obj = peers.kio_decode(kio_cls, ours)
        assert peers.kio_neutral(theirs_obj, root, version) == peers.neutral(msg, root, version)
        # kio's object now holds the same values: its bytes must be ours, and read back the same
        theirs = peers.kio_encode(kio_cls, theirs_obj)
        assert theirs == ours, "equal messages, different bytes"
        assert cls.decode(theirs, version) == msg

    check()


def test_kio_misreads_far_future_timestamps():
    """A kio bug, the reason timestamps are bounded above: the int64 on the wire is 253402214399999 ms and
    kio's datetime reads one millisecond less. kafkawire keeps the integer."""
    if not KIO:
        pytest.skip("kio is not installed")
    name = "CreateDelegationTokenResponse"
    cls = message_class(name)
    msg = cls(expiry_timestamp_ms=253402214399999, issue_timestamp_ms=0, max_timestamp_ms=0)
    data = msg.encode(3)
    theirs = peers.kio_neutral(peers.kio_decode(KIO[(name, 3)], data), cls.spec.definition(3).root, 3)
    assert theirs["ExpiryTimestampMs"] == 253402214399998
    assert cls.decode(data, 3).expiry_timestamp_ms == 253402214399999


@pytest.mark.parametrize("flexible", [False, True])
def test_kafka_python_request_header(flexible):
    """kafka-python encodes headers through its own entry point: header v1 or v2 by flexibility."""
    if "RequestHeader" not in KP_ALL:
        pytest.skip("kafka-python 3.x is not installed")
    kp_header = KP_ALL["RequestHeader"]
    ours = message_class("RequestHeader")
    version = 2 if flexible else 1
    for key, api_version, correlation_id, client_id in [
        (18, 3, 7, "c1"),
        (0, 9, -1, ""),
        (3, 12, 1 << 30, None),
        (75, 0, 1486810363, "kafka-tester"),
        (1, 4, 0, "é✓"),
    ]:
        msg = ours(
            request_api_key=key, request_api_version=api_version, correlation_id=correlation_id, client_id=client_id
        )
        theirs = kp_header(
            request_api_key=key, request_api_version=api_version, correlation_id=correlation_id, client_id=client_id
        )
        data = msg.encode(version)
        assert bytes(theirs.encode(flexible=flexible)) == data
        back = kp_header.decode(__import__("io").BytesIO(data), flexible=flexible)
        assert (back.request_api_key, back.request_api_version, back.correlation_id, back.client_id) == (
            key,
            api_version,
            correlation_id,
            client_id,
        )


@pytest.mark.parametrize("flexible", [False, True])
def test_kafka_python_response_header(flexible):
    if "ResponseHeader" not in KP_ALL:
        pytest.skip("kafka-python 3.x is not installed")
    kp_header = KP_ALL["ResponseHeader"]
    ours = message_class("ResponseHeader")
    for correlation_id in (0, 7, -1, 1486810363):
        data = ours(correlation_id=correlation_id).encode(1 if flexible else 0)
        assert bytes(kp_header(correlation_id=correlation_id).encode(flexible=flexible)) == data
