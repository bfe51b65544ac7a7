"""The generated spec against Apache Kafka's released jars: fresh, complete, and consistent across releases.

The schemas are read from inside the pinned jars (``tools/kafka_pins.py``), resolved into the cache by
``tools/kafka_reference.py``; where they cannot be resolved these tests fail in CI and skip elsewhere.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kafkawire.protocol import all_apis, api, api_by_name, message_class
from kafkawire.protocol.schema import message_names, message_spec, record_names, spec_source

ROOT = Path(__file__).resolve().parents[2]
SPEC_DIR = ROOT / "src" / "kafkawire" / "protocol" / "spec"


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_spec", ROOT / "tools" / "gen_spec.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def jar_schemas(source) -> list[tuple[str, dict]]:
    """(origin, raw schema) of one of the generator's sources; fails in CI, skips elsewhere, without the jars."""
    from conftest import reference_unavailable
    from kafka_reference import KafkaUnavailable

    try:
        return _load_generator().read_jar_schemas(source)
    except KafkaUnavailable as exc:
        reference_unavailable(str(exc))


def keyed(schemas) -> dict[tuple, dict]:
    """Raw schemas keyed by (type, apiKey) for RPCs and (type, name) otherwise."""
    out = {}
    for _, raw in schemas:
        key = (raw["type"], raw["apiKey"]) if raw["type"] in ("request", "response") else (raw["type"], raw["name"])
        out[key] = raw
    return out


def _range(text):
    """Kafka's version text -> (lo, hi) with an open end as a large number, or None."""
    if text is None or text.strip() in ("", "none"):
        return None
    text = text.strip()
    if text.endswith("+"):
        return int(text[:-1]), 1 << 15
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def _in(rng, v) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


def _default(type_name: str, text):
    if text is None:  # absent, or a JSON null: no default (Kafka's generator reads both the same)
        return None
    text = str(text)
    if type_name.startswith("[]"):
        return text  # an array's default is "null" or none
    if type_name.startswith("int") or type_name.startswith("uint"):
        return int(text, 0)
    if type_name == "bool":
        return text.lower() == "true"
    if type_name == "float64":
        return float(text)
    return text


def layout(raw: dict, version: int) -> tuple:
    """The wire layout of one version of a raw schema, independent of field names and docs:
    per field in order its type, array-ness, nullability, taggedness (tag and default), compactness,
    and for structs the nested layout."""
    flexible = _in(_range(raw.get("flexibleVersions")), version)
    common = {cs["name"]: cs for cs in raw.get("commonStructs", [])}

    def walk(fields) -> tuple:
        out = []
        for f in fields:
            tagged = _in(_range(f.get("taggedVersions")), version)
            if not (_in(_range(f.get("versions")), version) or tagged):
                continue
            t = f["type"]
            elem = t[2:] if t.startswith("[]") else t
            nested = f.get("fields") or (common[elem]["fields"] if elem in common else None)
            compact = flexible
            if "flexibleVersions" in f:
                compact = _in(_range(f["flexibleVersions"]), version)
            out.append(
                (
                    "array" if t.startswith("[]") else "single",
                    "struct" if nested is not None else elem,
                    _in(_range(f.get("nullableVersions")), version),
                    (int(f["tag"]), _default(t, f.get("default"))) if tagged else None,
                    compact,
                    walk(nested) if nested is not None else None,
                )
            )
        return tuple(out)

    return flexible, walk(raw["fields"])


@pytest.fixture(scope="session")
def generator():
    return _load_generator()


@pytest.fixture(scope="session")
def current_schemas(generator):
    """Every schema of the current kafka-clients jar, including the ones whose validVersions is "none"."""
    return keyed(jar_schemas(generator.CLIENTS))


@pytest.fixture(scope="session")
def folders(generator, current_schemas):
    """(legacy, current) kafka-clients schemas. A current schema with validVersions "none" (the
    ZooKeeper-era keys 4-7, removed in 4.0) defines no version and is left out of ``current``."""
    legacy = keyed(jar_schemas(generator.LEGACY_CLIENTS))
    current = {k: v for k, v in current_schemas.items() if _range(v["validVersions"]) is not None}
    return legacy, current


@pytest.fixture(scope="session")
def record_schemas(generator):
    """origin -> raw schema, for every record schema of the jars outside kafka-clients."""
    out = {}
    for source in generator.RECORD_SOURCES:
        out.update(dict(jar_schemas(source)))
    return out


def test_committed_spec_is_fresh(tmp_path, generator, folders):
    assert generator.main(["--out", str(tmp_path)]) == 0
    for name in ("messages.json", "errors.json"):
        fresh = (tmp_path / name).read_text()
        committed = (SPEC_DIR / name).read_text()
        assert fresh == committed, f"spec/{name} is stale: run tools/gen_spec.py"


def test_check_mode_reports_a_stale_spec(tmp_path, generator, folders):
    generator.main(["--out", str(tmp_path)])
    assert generator.main(["--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "errors.json").write_text("{}\n")
    assert generator.main(["--out", str(tmp_path), "--check"]) == 1


def test_the_spec_records_the_kafka_releases_it_came_from():
    import kafka_pins

    assert spec_source() == {
        "current": kafka_pins.KAFKA,
        "legacy": kafka_pins.KAFKA_LEGACY,
        "test_schemas": kafka_pins.KAFKA_TEST_SCHEMAS,
    }
    raw = json.loads((SPEC_DIR / "messages.json").read_text())
    errors = json.loads((SPEC_DIR / "errors.json").read_text())
    assert f"Apache Kafka {kafka_pins.KAFKA}" in raw["derived_from"] and kafka_pins.KAFKA in errors["derived_from"]
    assert errors["kafka"] == {"current": kafka_pins.KAFKA}
    # every definition names the jar and the file inside it that it was read from
    jars = {f"kafka-clients-{kafka_pins.KAFKA}.jar", f"kafka-clients-{kafka_pins.KAFKA_LEGACY}.jar"}
    for msg in raw["messages"].values():
        for d in msg["definitions"]:
            jar, _, path = d["source"].partition("!")
            assert jar in jars and path.startswith("common/message/") and path.endswith(".json"), d["source"]
    for msg in raw["records"].values():
        jar, _, path = msg["definitions"][0]["source"].partition("!")
        assert jar.endswith(f"-{kafka_pins.KAFKA}.jar") and not jar.startswith("kafka-clients"), jar
    for msg in raw["test_messages"].values():
        assert msg["definitions"][0]["source"].startswith(f"kafka-clients-{kafka_pins.KAFKA_TEST_SCHEMAS}-test.jar!")


def _overlaps(folders):
    old, new = folders
    for key in sorted(set(old) & set(new), key=str):
        a, b = _range(old[key]["validVersions"]), _range(new[key]["validVersions"])
        for v in range(max(a[0], b[0]), min(a[1], b[1]) + 1):
            yield key, v


def test_both_releases_agree_on_the_wire_layout_of_shared_versions(folders):
    old, new = folders
    compared = 0
    differences = []
    unstable_legacy = []
    for key, v in _overlaps(folders):
        compared += 1
        if layout(old[key], v) != layout(new[key], v):
            # a response's version is as stable as its request's
            request = old[("request", key[1])] if key[0] in ("request", "response") else old[key]
            if request.get("latestVersionUnstable") and v == _range(request["validVersions"])[1]:
                # the legacy release had this version unreleased (early access): it changed before release
                unstable_legacy.append(f"{new[key]['name']} v{v}")
            else:
                differences.append(f"{new[key]['name']} v{v}")
    assert compared > 500  # every overlapping version (547 for 3.9.1 and 4.4.0), not a sample
    assert differences == []
    # 3.9.1's early-access share-group v0 summary lacked LeaderEpoch; 4.4's v0 is the one kafkawire speaks
    assert unstable_legacy == ["ReadShareGroupStateSummaryResponse v0"]


def test_layout_signature_sees_wire_changes():
    """The comparison above must notice a real layout change, or it proves nothing."""
    base = {
        "validVersions": "0-1",
        "flexibleVersions": "1+",
        "fields": [
            {"name": "A", "type": "int32", "versions": "0+"},
            {"name": "B", "type": "string", "versions": "0+", "nullableVersions": "1+"},
            {"name": "T", "type": "int16", "versions": "1+", "taggedVersions": "1+", "tag": 0, "default": "5"},
        ],
    }
    renamed = json.loads(json.dumps(base).replace('"A"', '"Renamed"'))
    assert layout(base, 1) == layout(renamed, 1)
    for change in (
        lambda s: s["fields"][0].update(type="int64"),
        lambda s: s["fields"][1].update(nullableVersions="2+"),
        lambda s: s["fields"][2].update(tag=1),
        lambda s: s["fields"][2].update(default="6"),
        lambda s: s.update(flexibleVersions="none"),
        lambda s: s["fields"].reverse(),
    ):
        other = json.loads(json.dumps(base))
        change(other)
        assert layout(base, 1) != layout(other, 1)


def test_generated_definitions_match_the_authoritative_schema(folders):
    """Every version of every message compiles from the schema it should: the current release where it
    defines the version, the legacy one below; compare the generated spec's layout with the raw schema's."""
    old, new = folders
    for key in set(old) | set(new):
        for raw in filter(None, (old.get(key), new.get(key))):
            name = (new.get(key) or raw)["name"]
            spec = message_spec(name)
            lo, hi = _range(raw["validVersions"])
            authoritative = new.get(key)
            for v in range(lo, hi + 1):
                if raw is old.get(key) and authoritative and _in(_range(authoritative["validVersions"]), v):
                    continue  # the current release wins where both define it
                assert v in spec.valid, f"{name} v{v}"
                flexible, fields = layout(raw, v)
                assert spec.is_flexible(v) == flexible, f"{name} v{v}"
                assert len([f for f in spec.definition(v).root.fields if f.present(v)]) == len(fields), f"{name} v{v}"


def test_every_schema_is_in_the_spec_with_the_union_of_versions(folders):
    old, new = folders
    names = set(message_names())
    for key in set(old) | set(new):
        ranges = [_range(r["validVersions"]) for r in (old.get(key), new.get(key)) if r]
        name = (new.get(key) or old.get(key))["name"]
        assert name in names
        spec = message_spec(name)
        assert (spec.valid.lo, spec.valid.hi) == (min(r[0] for r in ranges), max(r[1] for r in ranges)), name
    assert len(names) == len(set(old) | set(new))


def test_every_api_key_0_to_94_has_request_and_response():
    apis = all_apis()
    assert sorted(apis) == list(range(95))
    for key, info in apis.items():
        assert info.request.endswith("Request") and info.response.endswith("Response")
        assert message_class(info.request).spec.api_key == key
        assert message_class(info.response).spec.api_key == key
        assert message_class(info.request).spec.valid == message_class(info.response).spec.valid


def test_headers_and_data_messages_are_in_the_spec():
    assert message_spec("RequestHeader").kind == "header"
    assert (message_spec("RequestHeader").valid.lo, message_spec("RequestHeader").valid.hi) == (0, 2)
    assert (message_spec("ResponseHeader").valid.lo, message_spec("ResponseHeader").valid.hi) == (0, 1)
    data = {n for n in message_names() if message_spec(n).kind == "data"}
    assert {"ConsumerProtocolSubscription", "ConsumerProtocolAssignment", "DefaultPrincipalData"} <= data


def test_data_message_with_a_field_called_name_keeps_both():
    cls = message_class("DefaultPrincipalData")
    msg = cls(type="User", name="alice", token_authenticated=True)
    assert msg.name == "alice"
    assert cls.spec.name == "DefaultPrincipalData"
    assert cls.decode(msg.encode(0), 0) == msg


def test_key_74_rename(folders):
    old, new = folders
    assert old[("request", 74)]["name"] == "ListClientMetricsResourcesRequest"
    assert new[("request", 74)]["name"] == "ListConfigResourcesRequest"
    info = api(74)
    assert info.name == "ListConfigResources"
    assert (info.request, info.response) == ("ListConfigResourcesRequest", "ListConfigResourcesResponse")
    assert api_by_name("ListConfigResources") is info
    assert api_by_name("ListClientMetricsResources") is info  # callers using the 3.9 name still find it
    spec = message_spec("ListConfigResourcesRequest")
    assert spec.former_name == "ListClientMetricsResourcesRequest"
    assert "ListClientMetricsResourcesRequest" not in message_names()
    # v0 is the 3.9 API on the wire; v1 adds resource types
    assert layout(old[("response", 74)], 0) == layout(new[("response", 74)], 0)
    assert layout(old[("request", 74)], 0) == layout(new[("request", 74)], 0)
    req = message_class("ListConfigResourcesRequest")
    assert req(resource_types=[2, 4]).encode(1) == b"\x03\x02\x04\x00"
    assert req().encode(0) == b"\x00"


def test_unstable_flags_are_exactly_the_current_releases(folders, current_schemas):
    """latestVersionUnstable as the current release has it, for every RPC; a key it no longer defines has none."""
    _, new = folders
    for key, info in all_apis().items():
        raw = new.get(("request", key))
        assert info.latest_version_unstable == bool(raw and raw.get("latestVersionUnstable")), info.name
        if raw is not None:
            assert info.max_version == _range(raw["validVersions"])[1], info.name
    # Kafka 4.4's own facts, as a reader of its release notes would check them
    stable_now = [
        "ShareGroupHeartbeat",
        "ShareGroupDescribe",
        "ShareFetch",
        "ShareAcknowledge",
        "InitializeShareGroupState",
        "ReadShareGroupState",
        "WriteShareGroupState",
        "DeleteShareGroupState",
        "ReadShareGroupStateSummary",
        "DescribeShareGroupOffsets",
        "AlterShareGroupOffsets",
        "DeleteShareGroupOffsets",
        "StreamsGroupHeartbeat",
    ]
    for name in stable_now:
        assert not api_by_name(name).latest_version_unstable, name
    assert (api(18).min_version, api(18).max_version) == (0, 5)
    assert api(93).name == "StreamsGroupTopologyDescriptionUpdate"
    assert api(94).name == "UnregisterController"


def test_zookeeper_era_keys_survive_only_through_the_legacy_release(current_schemas):
    import kafka_pins

    for key, name in ((4, "LeaderAndIsr"), (5, "StopReplica"), (6, "UpdateMetadata"), (7, "ControlledShutdown")):
        assert current_schemas[("request", key)]["validVersions"] == "none"  # removed in 4.0, name kept
        info = api(key)
        assert info.name == name
        for kind in (info.request, info.response):
            sources = {d["source"].partition("!")[0] for d in _raw_messages()[kind]["definitions"]}
            assert sources == {f"kafka-clients-{kafka_pins.KAFKA_LEGACY}.jar"}, kind


def _raw_messages() -> dict:
    return json.loads((SPEC_DIR / "messages.json").read_text())["messages"]


def test_record_schemas_are_in_the_spec_apart_from_the_rpcs(record_schemas):
    """Kafka's metadata log and internal topic schemas: all of them, by name, from the jar that defines them,
    with their record type, and not mistaken for API keys."""
    raw = json.loads((SPEC_DIR / "messages.json").read_text())["records"]
    assert len(record_schemas) == len(raw) > 80
    jars = set()
    for origin, schema in record_schemas.items():
        spec = message_spec(schema["name"])
        assert raw[schema["name"]]["definitions"][0]["source"] == origin
        jars.add(origin.partition("!")[0].rsplit("-", 1)[0])
        assert spec.kind == schema["type"] and spec.api_key is None
        assert spec.record_type == schema.get("apiKey")
        lo, hi = _range(schema["validVersions"])
        assert (spec.valid.lo, spec.valid.hi) == (lo, hi)
        for v in range(lo, hi + 1):
            flexible, fields = layout(schema, v)
            assert spec.is_flexible(v) == flexible
            assert len([f for f in spec.definition(v).root.fields if f.present(v)]) == len(fields)
    assert jars == {
        "kafka-metadata",
        "kafka-group-coordinator",
        "kafka-transaction-coordinator",
        "kafka-share-coordinator",
        "kafka-raft",
        "kafka-storage",
    }
    names = set(record_names())
    assert not names & set(message_names())
    assert {
        "TopicRecord",
        "PartitionRecord",
        "FeatureLevelRecord",
        "OffsetCommitKey",
        "OffsetCommitValue",
        "GroupMetadataValue",
        "TransactionLogValue",
        "ShareSnapshotValue",
        "QuorumStateData",
        "ProducerSnapshot",
        "RemoteLogSegmentMetadataRecord",
    } <= names
    # the record types Kafka writes in its logs
    assert (message_spec("TopicRecord").record_type, message_spec("PartitionRecord").record_type) == (2, 3)
    assert message_spec("OffsetCommitKey").record_type == 1 and message_spec("GroupMetadataKey").record_type == 2
    with pytest.raises(KeyError):
        api_by_name("TopicRecord")  # a record schema is no API


def test_record_schemas_encode_as_kafka_lays_them_out():
    """A KRaft TopicRecord (flexible, version 0): compact string name, 16-byte uuid, no tagged fields;
    a group coordinator OffsetCommitKey (version 0, not flexible): three plain fields."""
    import uuid

    topic = message_class("TopicRecord")(name="t", topic_id=uuid.UUID(int=1))
    assert topic.encode(0) == b"\x02t" + (1).to_bytes(16, "big") + b"\x00"
    key = message_class("OffsetCommitKey")(group="g", topic="t", partition=3)
    assert key.encode(0) == b"\x00\x01g\x00\x01t\x00\x00\x00\x03"
    assert message_class("OffsetCommitKey").decode(key.encode(0), 0) == key


def test_null_differs_from_an_empty_default_in_a_tagged_nullable_array():
    """StreamsGroupMetadataValue.LastAssignmentConfigs: tagged, nullable, default empty. Empty is the default
    and is not written; null is not the default and is written (tag 1, one byte: compact null)."""
    cls = message_class("StreamsGroupMetadataValue")
    base = b"\x00\x00\x00\x07" + (9).to_bytes(8, "big")
    assert cls(epoch=7, metadata_hash=9, last_assignment_configs=[]).encode(0) == base + b"\x00"
    null = cls(epoch=7, metadata_hash=9, last_assignment_configs=None)
    assert null.encode(0) == base + b"\x01\x01\x01\x00"
    assert cls.decode(null.encode(0), 0).last_assignment_configs is None
