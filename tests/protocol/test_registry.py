"""API key registry, error table and version negotiation, checked against Kafka's own files."""

from __future__ import annotations

import pytest

from kafkawire.protocol import (
    KafkaError,
    all_apis,
    api,
    api_by_name,
    error_for,
    errors,
    message_class,
    negotiate,
    pick_version,
    supported_ranges,
)
from kafkawire.protocol.negotiation import ranges_from_response

from .test_spec import _range, current_schemas, folders, generator  # noqa: F401  (fixtures)


def _has_records(raw: dict) -> bool:
    def walk(fields):
        return any(f["type"] in ("records", "[]records") or walk(f.get("fields", [])) for f in fields)

    return walk(raw["fields"]) or any(walk(cs["fields"]) for cs in raw.get("commonStructs", []))


def test_registry_against_the_raw_schemas(folders):  # noqa: F811
    old, new = folders
    for key, info in all_apis().items():
        raws = [r for r in (old.get(("request", key)), new.get(("request", key))) if r]
        newest = new.get(("request", key)) or old[("request", key)]
        assert info.name == newest["name"].removesuffix("Request")
        ranges = [_range(r["validVersions"]) for r in raws]
        assert (info.min_version, info.max_version) == (min(r[0] for r in ranges), max(r[1] for r in ranges))
        flexible = [
            v
            for v in range(info.min_version, info.max_version + 1)
            if any(
                _range(r["validVersions"])[0] <= v <= _range(r["validVersions"])[1]
                and (fr := _range(r.get("flexibleVersions")))
                and fr[0] <= v <= fr[1]
                for r in (
                    [new[("request", key)]]
                    if ("request", key) in new and _range(new[("request", key)]["validVersions"])[0] <= v
                    else raws
                )
            )
        ]
        assert info.flexible_min == (min(flexible) if flexible else None), info.name
        for v in range(info.min_version, info.max_version + 1):
            assert info.is_flexible(v) == (v in flexible), (info.name, v)
        assert info.listeners == tuple(sorted(newest.get("listeners", ()))), info.name
        assert info.latest_version_unstable == bool(newest.get("latestVersionUnstable")), info.name
        resp = [r for r in (old.get(("response", key)), new.get(("response", key))) if r]
        assert info.carries_records == any(_has_records(r) for r in raws + resp), info.name


def test_the_registrys_summaries_agree_with_the_parsed_specs():
    # the registry reads summaries straight from the JSON (a start would otherwise parse every schema);
    # each must say what the full parse of the same message says
    from kafkawire.protocol.schema import message_names, message_spec, message_summary

    for name in message_names():
        spec, summary = message_spec(name), message_summary(name)
        assert (summary.name, summary.kind, summary.api_key, summary.valid) == (
            spec.name,
            spec.kind,
            spec.api_key,
            spec.valid,
        ), name
        assert summary.flexible_floor == spec.flexible_floor, name
        assert (summary.listeners, summary.latest_version_unstable, summary.former_name) == (
            spec.listeners,
            spec.latest_version_unstable,
            spec.former_name,
        ), name
        assert summary.has_records == spec.has_records(), name
    assert sum(message_summary(n).has_records for n in message_names()) >= 4  # Produce and Fetch, both ways


def test_well_known_apis():
    produce, fetch, versions = api(0), api(1), api(18)
    assert (produce.name, fetch.name, versions.name) == ("Produce", "Fetch", "ApiVersions")
    assert produce.carries_records and fetch.carries_records and not versions.carries_records
    assert versions.flexible_min == 3 and produce.flexible_min == 9 and fetch.flexible_min == 12
    assert produce.min_version == 0  # 3.9.1 keeps v0-2 that 4.0 dropped
    assert api(6).name == "UpdateMetadata" and api(7).name == "ControlledShutdown"  # ZooKeeper era, still known
    assert "broker" in api(3).listeners
    assert api_by_name("Metadata") is api(3) and api_by_name("MetadataRequest") is api(3)
    assert api(92).name and api(90).name and api(94).name == "UnregisterController"
    with pytest.raises(KeyError):
        api(95)
    with pytest.raises(KeyError):
        api_by_name("NoSuchApi")


def test_unstable_versions_are_not_advertised_by_default():
    unstable = [k for k, a in all_apis().items() if a.latest_version_unstable]
    assert unstable, "Kafka 4.4 marks some newest versions unstable (InitProducerId v6)"
    stable, everything = supported_ranges(), supported_ranges(include_unstable=True)
    for key in unstable:
        assert stable[key][1] == everything[key][1] - 1 == api(key).max_stable_version
    for key in set(all_apis()) - set(unstable):
        assert stable[key] == everything[key] == (api(key).min_version, api(key).max_version)


@pytest.fixture(scope="module")
def kafka_errors(generator):  # noqa: F811
    """[code, name, retriable, message] as Kafka's own Errors enum gives them (tools/java/ErrorTable.java, run now)."""
    from conftest import reference_unavailable
    from kafka_reference import KafkaUnavailable

    try:
        return generator.error_table()
    except KafkaUnavailable as exc:
        reference_unavailable(str(exc))


def test_every_error_code_of_kafkas_errors_enum(kafka_errors):
    # Kafka 4.4 defines every code from -1 to 136
    assert [code for code, _, _, _ in kafka_errors] == list(range(-1, 137))
    assert [list(row) for row in errors_table()] == kafka_errors
    for code, name, retriable, message in kafka_errors:
        e = error_for(code)
        assert (e.code, e.name, e.retriable, e.known, e.message) == (code, name, retriable, True, message)
        assert getattr(errors, name) == code
        assert errors.code_of(name) == code


def errors_table():
    from kafkawire.protocol.schema import error_table

    return error_table()


def test_well_known_errors():
    assert error_for(0).name == "NONE" and error_for(-1).name == "UNKNOWN_SERVER_ERROR"
    assert error_for(-1).message == "The server experienced an unexpected error when processing the request."
    assert error_for(6).name == "NOT_LEADER_OR_FOLLOWER" and error_for(6).retriable
    assert error_for(3).name == "UNKNOWN_TOPIC_OR_PARTITION" and error_for(3).retriable
    assert errors.UNSUPPORTED_VERSION == 35 and not error_for(35).retriable
    assert error_for(135).name == "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED"
    assert error_for(99).name == "POSITION_OUT_OF_RANGE" and not error_for(99).retriable
    assert error_for(129).name == "REBOOTSTRAP_REQUIRED" and not error_for(129).retriable
    assert error_for(133).name == "SHARE_SESSION_LIMIT_REACHED" and error_for(133).retriable
    assert error_for(134).name == "GROUP_DELETION_FAILED" and error_for(136).name == "CONTROLLER_ID_NOT_REGISTERED"
    assert str(error_for(6)) == "NOT_LEADER_OR_FOLLOWER (6)" and int(error_for(6)) == 6


@pytest.mark.parametrize("code", [137, 999, 32767, -2, -32768])
def test_unknown_error_codes_are_reported_not_raised(code):
    e = error_for(code)
    assert e.code == code and not e.known and not e.retriable and str(code) in e.name
    exc = KafkaError(code, "from a newer broker")
    assert exc.code == code and str(code) in str(exc) and "from a newer broker" in str(exc)
    # and an unknown code in a response decodes as the number it is
    resp = message_class("FindCoordinatorResponse")
    assert resp.decode(resp(error_code=code).encode(0), 0).error_code == code
    with pytest.raises(AttributeError):
        errors.NO_SUCH_ERROR_NAME


def test_kafka_error_known_code():
    exc = KafkaError(6)
    assert (exc.name, exc.retriable, exc.code) == ("NOT_LEADER_OR_FOLLOWER", True, 6)
    assert str(exc) == "NOT_LEADER_OR_FOLLOWER (6)"


def test_pick_version():
    assert pick_version((0, 9), (3, 12)) == 9
    assert pick_version((3, 12), (0, 9)) == 9
    assert pick_version((0, 2), (3, 5)) is None
    assert pick_version((4, 4), (4, 4)) == 4


def test_negotiate_picks_the_highest_common_version_per_api():
    ours = {0: (0, 11), 1: (4, 17), 18: (0, 4), 60: (0, 1)}
    theirs = {0: (3, 9), 1: (0, 3), 18: (0, 3), 3: (0, 12)}
    assert negotiate(ours, theirs) == {0: 9, 18: 3}


def test_negotiate_from_an_api_versions_response():
    resp_cls = message_class("ApiVersionsResponse")
    resp = resp_cls(
        api_keys=[
            resp_cls.ApiVersion(api_key=0, min_version=3, max_version=9),
            resp_cls.ApiVersion(api_key=18, min_version=0, max_version=3),
        ]
    )
    decoded = resp_cls.decode(resp.encode(3), 3)
    theirs = ranges_from_response(decoded.api_keys)
    assert theirs == {0: (3, 9), 18: (0, 3)}
    picked = negotiate(supported_ranges(), theirs)
    assert picked == {0: 9, 18: 3}
