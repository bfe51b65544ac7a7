"""The generated spec against Apache Kafka's schemas: fresh, complete, and consistent across folders.

CI keeps the schemas at ``<repo>/../shared/kafka-schemas``; without them these tests skip.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kafkawire.protocol import all_apis, api, api_by_name, message_class
from kafkawire.protocol.schema import message_names, message_spec

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT.parent / "shared" / "kafka-schemas"
SPEC_DIR = ROOT / "src" / "kafkawire" / "protocol" / "spec"

needs_schemas = pytest.mark.skipif(not SCHEMAS.is_dir(), reason=f"Kafka schemas not found at {SCHEMAS}")


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_spec", ROOT / "tools" / "gen_spec.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _raw_folder(folder: str) -> dict[tuple, dict]:
    """Raw schemas of one folder, keyed by (type, apiKey) for RPCs and (type, name) otherwise."""
    out = {}
    for path in sorted((SCHEMAS / folder).glob("*.json")):
        lines = [ln for ln in path.read_text().splitlines() if not ln.lstrip().startswith("//")]
        raw = json.loads("\n".join(lines))
        key = (raw["type"], raw["apiKey"]) if "apiKey" in raw else (raw["type"], raw["name"])
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
    if text is None:
        return None
    text = str(text)
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
            out.append((
                "array" if t.startswith("[]") else "single",
                "struct" if nested is not None else elem,
                _in(_range(f.get("nullableVersions")), version),
                (f["tag"], _default(elem, f.get("default"))) if tagged else None,
                compact,
                walk(nested) if nested is not None else None,
            ))
        return tuple(out)

    return flexible, walk(raw["fields"])


@pytest.fixture(scope="module")
def folders():
    if not SCHEMAS.is_dir():
        pytest.skip(f"Kafka schemas not found at {SCHEMAS}")
    return _raw_folder("kafka-3.9"), _raw_folder("kafka-4.x")


@needs_schemas
def test_committed_spec_is_fresh(tmp_path):
    gen = _load_generator()
    assert gen.main(["--schemas", str(SCHEMAS), "--out", str(tmp_path)]) == 0
    for name in ("messages.json", "errors.json"):
        fresh = (tmp_path / name).read_text()
        committed = (SPEC_DIR / name).read_text()
        assert fresh == committed, f"spec/{name} is stale: run tools/gen_spec.py"


@needs_schemas
def test_check_mode_reports_a_stale_spec(tmp_path):
    gen = _load_generator()
    gen.main(["--schemas", str(SCHEMAS), "--out", str(tmp_path)])
    assert gen.main(["--schemas", str(SCHEMAS), "--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "errors.json").write_text("{}\n")
    assert gen.main(["--schemas", str(SCHEMAS), "--out", str(tmp_path), "--check"]) == 1


def _overlaps(folders):
    old, new = folders
    for key in sorted(set(old) & set(new), key=str):
        a, b = _range(old[key]["validVersions"]), _range(new[key]["validVersions"])
        for v in range(max(a[0], b[0]), min(a[1], b[1]) + 1):
            yield key, v


@needs_schemas
def test_both_folders_agree_on_the_wire_layout_of_shared_versions(folders):
    old, new = folders
    compared = 0
    differences = []
    for key, v in _overlaps(folders):
        compared += 1
        if layout(old[key], v) != layout(new[key], v):
            differences.append(f"{new[key]['name']} v{v}")
    assert compared > 600  # every overlapping version, not a sample
    assert differences == []


def test_layout_signature_sees_wire_changes():
    """The comparison above must notice a real layout change, or it proves nothing."""
    base = {"validVersions": "0-1", "flexibleVersions": "1+", "fields": [
        {"name": "A", "type": "int32", "versions": "0+"},
        {"name": "B", "type": "string", "versions": "0+", "nullableVersions": "1+"},
        {"name": "T", "type": "int16", "versions": "1+", "taggedVersions": "1+", "tag": 0, "default": "5"}]}
    renamed = json.loads(json.dumps(base).replace('"A"', '"Renamed"'))
    assert layout(base, 1) == layout(renamed, 1)
    for change in (lambda s: s["fields"][0].update(type="int64"),
                   lambda s: s["fields"][1].update(nullableVersions="2+"),
                   lambda s: s["fields"][2].update(tag=1),
                   lambda s: s["fields"][2].update(default="6"),
                   lambda s: s.update(flexibleVersions="none"),
                   lambda s: s["fields"].reverse()):
        other = json.loads(json.dumps(base))
        change(other)
        assert layout(base, 1) != layout(other, 1)


@needs_schemas
def test_generated_definitions_match_the_authoritative_schema(folders):
    """Every version of every message compiles from the schema it should: 4.x where it defines the
    version, 3.9 below; compare the generated spec's layout with the raw schema's."""
    old, new = folders
    for key in set(old) | set(new):
        for raw in filter(None, (old.get(key), new.get(key))):
            name = (new.get(key) or raw)["name"]
            spec = message_spec(name)
            lo, hi = _range(raw["validVersions"])
            authoritative = new.get(key)
            for v in range(lo, hi + 1):
                if raw is old.get(key) and authoritative and _in(_range(authoritative["validVersions"]), v):
                    continue  # 4.x wins where both define the version
                assert v in spec.valid, f"{name} v{v}"
                flexible, fields = layout(raw, v)
                assert spec.is_flexible(v) == flexible, f"{name} v{v}"
                assert len([f for f in spec.definition(v).root.fields if f.present(v)]) == len(fields), f"{name} v{v}"


@needs_schemas
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


def test_every_api_key_0_to_92_has_request_and_response():
    apis = all_apis()
    assert sorted(apis) == list(range(93))
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


@needs_schemas
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
