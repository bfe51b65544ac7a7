"""Every handler states the versions it implements; nothing is advertised because the spec grew."""

from __future__ import annotations

import msgspec
import pytest

from kafkawire.broker.dispatch import advertised_versions, handles, load_handlers, unreviewed_versions
from kafkawire.protocol import ApiKey, api, message_class


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


def _advertised(client) -> list[tuple[int, int, int]]:
    AV = message_class("ApiVersionsRequest")
    res = client.call(AV(client_software_name="t", client_software_version="1"), 3)
    return [(k.api_key, k.min_version, k.max_version) for k in res.api_keys]


def test_every_newest_stable_version_of_the_spec_has_a_handler_that_states_it(broker, client):
    """A regenerated spec (a new Kafka release) with a new stable version fails here, listing each API whose
    handler has not been raised to it; and the broker advertises exactly what its handlers state."""
    table = load_handlers()
    advertised = _advertised(client)
    assert unreviewed_versions(table, advertised) == []
    assert advertised == advertised_versions(table)


def test_the_version_check_lists_every_api_a_handler_lags_behind():
    table = load_handlers()
    advertised = advertised_versions(table)
    produce, fetch = table[ApiKey.PRODUCE], table[ApiKey.FETCH]
    # as if the spec had moved to Produce 14 and Fetch 19 while the handlers still state 0-13 and 0-18
    lagging = dict(table)
    lagging[ApiKey.PRODUCE] = msgspec.structs.replace(produce, max_version=produce.max_version - 1)
    lagging[ApiKey.FETCH] = msgspec.structs.replace(fetch, max_version=fetch.max_version - 2)
    assert unreviewed_versions(lagging, advertised_versions(lagging)) == [
        f"Produce: the spec's newest stable version is {produce.max_version}, its handler states 0-"
        f"{produce.max_version - 1}",
        f"Fetch: the spec's newest stable version is {fetch.max_version}, its handler states 0-{fetch.max_version - 2}",
    ]
    # an answer advertising a version (or an API) that no handler states
    assert unreviewed_versions(lagging, advertised) == unreviewed_versions(lagging, advertised_versions(lagging)) + [
        f"Produce: advertised 0-{produce.max_version}, its handler states 0-{produce.max_version - 1}",
        f"Fetch: advertised 0-{fetch.max_version}, its handler states 0-{fetch.max_version - 2}",
    ]
    unhandled = ApiKey.ENVELOPE
    assert unhandled not in table
    assert unreviewed_versions(table, advertised + [(unhandled, 0, 0)]) == [
        "Envelope: advertised 0-0 without a handler"
    ]
