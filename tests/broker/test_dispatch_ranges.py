"""Every handler states the versions it implements; nothing is advertised because the spec grew."""
from __future__ import annotations

import pytest

from kafkawire.broker.dispatch import handles, load_handlers
from kafkawire.protocol import api


def test_a_handler_must_state_its_range():
    with pytest.raises(TypeError):
        handles("Produce")
    with pytest.raises(TypeError):
        handles("Produce", 0)


def test_a_range_outside_the_spec_is_refused():
    with pytest.raises(ValueError):
        handles("Produce", 0, api(0).max_version + 1)
    with pytest.raises(ValueError):
        handles("Produce", 5, 4)


def test_no_handler_advertises_an_unstable_version():
    for key, h in load_handlers().items():
        info = api(key)
        assert info.min_version <= h.min_version <= h.max_version <= info.max_stable_version, h.name
