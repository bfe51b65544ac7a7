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
SETTINGS = settings(max_examples=6, derandomize=True, deadline=None, database=None,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

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
    print(f"kafka-python differential: {len(KP_PAIRS)} (message, version) pairs over {len(KP)} messages")
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
        theirs = peers.kp_encode(kp_cls, peers.to_kafka_python(msg, definition.root, kp_cls, version), version,
                                 flexible)
        assert theirs == ours, "equal messages, different bytes"
        decoded = peers.kp_decode(kp_cls, ours, version, flexible)
        assert peers.kp_neutral(decoded, kp_cls._struct, definition.root, version) == peers.neutral(msg, definition.root, version)
        assert cls.decode(theirs, version) == msg

    check()
