#!/usr/bin/env python3
"""kafkawire's error answers against Kafka's own ``AbstractRequest.getErrorResponse``.

When a handler raises, the broker answers with ``broker/dispatch.error_response`` (UNKNOWN_SERVER_ERROR in
each topic, partition, group or resource the request named). Kafka builds that answer per request class
(``getErrorResponse``); this tool asks Kafka for it (``tools/java/ErrorResponses.java`` against the pinned
kafka-clients jars: 4.4 for the versions it defines, 3.9.1 for the versions 4.0 removed) and compares, for
every API the broker handles at every version it handles:

- a *populated* request built from the schema: every array of structs with two entries, every array of
  scalars with two values, every field present at the version filled (``populated_request``);
- an *empty* request: every field at its default;
- every request of the conformance corpus (``tools/conformance_suite/corpus``), recorded without a broker.

Both answers are decoded with kafkawire's codec and compared field by field; ``EXPLAINED`` lists the
differences kept on purpose, each with its reason.

    python tools/error_answers.py            # a table per API, then every unexplained difference
    python tools/error_answers.py --api Fetch,OffsetFetch
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(ROOT / "src"))
from kafkawire.broker import dispatch  # noqa: E402
from kafkawire.protocol import api, api_by_name, errors, message_class  # noqa: E402
from kafkawire.protocol.schema import _raw_spec  # noqa: E402

import kafka_pins  # noqa: E402  (tools/ is not a package)
import kafka_reference  # noqa: E402

PROGRAM = TOOLS / "java" / "ErrorResponses.java"
KAFKA_MESSAGE = "injected handler failure"  # the message of the exception ErrorResponses.java throws

# (API, field name, lowest version, highest version, reason): differences kafkawire keeps on purpose. A
# difference is explained when its API, version and the last name of its field path match.
EXPLAINED: list[tuple[str, str, int, int, str]] = [
    (
        "Fetch",
        "records",
        0,
        3,
        "Kafka 3.9.1 (the last release with Fetch v0-3) answers null records, 4.4 an empty record set at the versions "
        "it serves; kafkawire answers empty at every version (both read as no records)",
    ),
]
# Answers whose entries come in another order only: Kafka builds these from a java.util.HashMap, so its order is
# the map's iteration order; clients match the entries by topic and partition.
UNORDERED = {"Produce", "OffsetFetch"}
# Requests for which Kafka has no error answer to compare: it refuses to parse them, or its getErrorResponse
# throws on them. (API, what Kafka throws, reason.)
REFUSED = [
    (
        "DescribeAcls",
        "IllegalArgumentException",
        "Kafka refuses a filter with UNKNOWN (0) resource type, operation or permission while parsing it",
    ),
    (
        "CreateAcls",
        "IllegalArgumentException",
        "Kafka's getErrorResponse validates each creation and throws on an UNKNOWN (0) value",
    ),
    (
        "DeleteAcls",
        "IllegalArgumentException",
        "Kafka's getErrorResponse validates each filter and throws on an UNKNOWN (0) value",
    ),
    (
        "Produce",
        "NullPointerException",
        "Kafka's getErrorResponse reads the size of each partition's records and throws on null records",
    ),
]


# -- requests --------------------------------------------------------------------------------------------------


def _scalar(f, i: int):
    t = f.type
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        default = None if f.is_array else f.default_value()
        # a schema default, else 2, 3: enum-like fields (ACL resource types, operations) take 0 as UNKNOWN
        # and 1 as ANY, which Kafka refuses before it builds any answer
        return default if default not in (None, 0, -1) else i + 2
    if t == "bool":
        return False
    if t == "float64":
        return 0.0
    if t == "uuid":
        return uuid.UUID(int=0x1000 + i)
    if t == "string":
        return f"{f.attr}-{i}"
    if t == "bytes":
        return b"x"
    if t == "records":
        return b""  # Kafka reads every partition's records (null only in malformed requests)
    raise ValueError(t)


def populated_request(key: int, version: int):
    """A request of API ``key`` with every field present at ``version`` filled: two entries in every array."""
    cls = message_class(api(key).request)

    def fill(struct_cls, i: int):
        obj = struct_cls()
        for f in struct_cls._fields:
            if not (f.present(version) or f.is_tagged(version)):
                continue
            if f.struct is not None:
                sub = cls._classes[f.struct.name]
                value = [fill(sub, j) for j in range(2)] if f.is_array else fill(sub, i)
            elif f.is_array:
                value = [_scalar(f, j) for j in range(2)]
            else:
                value = _scalar(f, i)
            setattr(obj, f.attr, value)
        return obj

    request = fill(cls, 0)
    if key == 0:
        request.acks = -1  # a Produce that expects an answer (the empty request has acks=0: no answer)
    return request


def empty_request(key: int, version: int):
    return message_class(api(key).request)()


class _Anything:
    """What a recorded case gets back instead of an answer: every attribute, item and call is another one,
    iterating it gives nothing. A request built from it fails to encode and is left out."""

    def __getattr__(self, name):
        return _Anything()

    def __getitem__(self, key):
        return _Anything()

    def __call__(self, *args, **kwargs):
        return _Anything()

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False


def corpus_requests(table) -> list[tuple[int, int, object, str]]:
    """(key, version, request, case name) for every request the conformance corpus (tools/conformance_suite)
    sends at a version the broker handles: its cases run against a session that records each compared request
    instead of sending it. Requests built from an answer (a member id, a producer id) are left out."""
    from conformance_suite import corpus
    from conformance_suite.build import build
    from conformance_suite.session import Session

    common = {spec.name: (spec.min_version, spec.max_version) for spec in table.values()}
    out: list[tuple[int, int, object, str]] = []

    class Recording(Session):
        def __init__(self, prefix: str):
            self.common, self.prefix, self.state = common, prefix, {}
            self.broker = _Anything()
            self.broker.node_id = 1

        def close(self):
            pass

        def connection(self):
            return _Anything()

        def tid(self, name):
            return uuid.uuid5(uuid.NAMESPACE_DNS, name)

        def call(self, *args, **kwargs):
            return _Anything()

        def create_topic(self, *args, **kwargs):
            return _Anything()

        def produce(self, *args, **kwargs):
            return _Anything()

        def wait_until(self, done, timeout: float = 3.0) -> bool:
            return True

        def coordinator_ready(self, *args, **kwargs):
            return None

        def probe_frame(self, *args, **kwargs):  # deliberately malformed frames: no request to answer
            return _Anything()

        def probe(self, api_name, version, data, **kwargs):
            try:
                request = build(api_name, version, data)
                request.encode(version)
            except Exception:  # noqa: BLE001  (built from an answer this session never had)
                return _Anything()
            out.append((api_by_name(api_name).key, version, request, self.case))
            return _Anything()

    for case in corpus.CASES:
        session = Recording(f"ea-{case.slug}")
        session.case = case.name
        versions = case.versions_for(common)
        try:
            if versions and case.setup is not None:
                case.setup(session)
        except Exception:  # noqa: BLE001  (a set-up that needs real answers: its probes still run below)
            pass
        for v in versions:
            try:
                case.fn(session, v)
            except Exception:  # noqa: BLE001  (a step that needs a real answer ends the case at this version)
                continue
    return out


# -- Kafka's side ----------------------------------------------------------------------------------------------


def _jar_set(key: int, version: int) -> str:
    """The pinned kafka-clients that defines this version: versions 4.0 removed come from the legacy jar."""
    for definition in _raw_spec()["messages"][api(key).request]["definitions"]:
        lo, hi = definition["versions"]
        if lo <= version <= hi:
            legacy = definition["source"].startswith(f"kafka-clients-{kafka_pins.KAFKA_LEGACY}.jar")
            return kafka_pins.LEGACY_CLIENTS if legacy else kafka_pins.BROKER
    raise KeyError((key, version))


def kafka_error_answers(requests: list[tuple[int, int, bytes]]) -> dict[tuple[int, int, bytes], str]:
    """(key, version, request body) -> 'OK <hex>' or 'FAIL <reason>', from Kafka's getErrorResponse.
    Raises KafkaUnavailable without a JDK or the jars."""
    java = kafka_reference._tool("java")
    by_jar: dict[str, list[tuple[int, int, bytes]]] = {}
    for item in requests:
        by_jar.setdefault(_jar_set(item[0], item[1]), []).append(item)
    out = {}
    for jar_set, items in by_jar.items():
        stdin = "".join(f"{k} {v} {body.hex()}\n" for k, v, body in items)
        proc = subprocess.run(
            [java, "-cp", kafka_reference.classpath(jar_set), str(PROGRAM)],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{PROGRAM.name} failed:\n{proc.stderr[-3000:]}")
        lines = proc.stdout.splitlines()
        assert len(lines) == len(items), (len(lines), len(items))
        for item, line in zip(items, lines, strict=True):
            k, v, rest = line.split(" ", 2)
            assert (int(k), int(v)) == item[:2], (line, item[:2])
            out[item] = rest
    return out


def kafka_api_key_names() -> dict[int, str]:
    """Kafka's ApiKeys enum, id -> constant name, from the current kafka-clients jar."""
    java = kafka_reference._tool("java")
    proc = subprocess.run(
        [java, "-cp", kafka_reference.classpath(kafka_pins.BROKER), str(PROGRAM), "--api-keys"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{PROGRAM.name} --api-keys failed:\n{proc.stderr[-3000:]}")
    return {int(k): name for k, name in (line.split("\t") for line in proc.stdout.splitlines())}


# -- comparison ------------------------------------------------------------------------------------------------


def diff(a, b, path: str = "") -> list[tuple[str, object, object]]:
    """(path, kafkawire, kafka) for every leaf that differs between two to_dict() trees."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in a.keys() | b.keys():
            out.extend(diff(a.get(k), b.get(k), f"{path}.{k}" if path else k))
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [(f"{path}[len]", len(a), len(b))]
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out.extend(diff(x, y, f"{path}[{i}]"))
        return out
    return [] if a == b else [(path, a, b)]


def explanation(api_name: str, version: int, path: str) -> str | None:
    leaf = path.rsplit(".", 1)[-1].split("[", 1)[0]
    for name, field_name, lo, hi, reason in EXPLAINED:
        if name == api_name and field_name == leaf and lo <= version <= hi:
            return reason
    return None


def canonical(tree):
    """The tree with every list sorted, for answers whose entry order is Kafka's hash map's."""
    if isinstance(tree, dict):
        return {k: canonical(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return sorted((canonical(x) for x in tree), key=repr)
    return tree


@dataclass
class Pair:
    api: str
    version: int
    request: str  # "populated", "empty", or the conformance case it comes from
    identical: bool = False
    explained: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    different: list[str] = field(default_factory=list)


def compare(apis: set[str] | None = None, *, corpus: bool = True) -> list[Pair]:
    """Every handled API at every handled version with a populated and an empty request, and (``corpus``) every
    request of the conformance corpus."""
    table = dispatch.load_handlers()
    requests: list[tuple[int, int, bytes, str, object]] = []
    for key, spec in sorted(table.items()):
        if apis and spec.name not in apis:
            continue
        for version in range(spec.min_version, spec.max_version + 1):
            for label, build in (("populated", populated_request), ("empty", empty_request)):
                req = build(key, version)
                requests.append((key, version, req.encode(version), label, req))
    for key, version, req, case in corpus_requests(table) if corpus else ():
        if not apis or table[key].name in apis:
            requests.append((key, version, req.encode(version), case, req))
    answers = kafka_error_answers([(k, v, body) for k, v, body, _, _ in requests])
    pairs = []
    for key, version, body, label, req in requests:
        info = api(key)
        pair = Pair(info.name, version, label)
        pairs.append(pair)
        resp_cls = message_class(info.response)
        try:
            ours = dispatch.error_response(key, version, req, errors.UNKNOWN_SERVER_ERROR)
            ours_bytes = ours.encode(version) if ours is not None else None
            ours_tree = resp_cls.decode(ours_bytes, version).to_dict() if ours is not None else None
        except Exception as exc:  # noqa: BLE001  (reported as a difference)
            pair.different.append(f"kafkawire's error answer fails: {type(exc).__name__}: {exc}")
            continue
        status, _, rest = answers[(key, version, body)].partition(" ")
        refused = next(
            (
                reason
                for name, thrown, reason in REFUSED
                if name == info.name and status in ("INVALID", "FAIL") and thrown in rest.split(":")[0]
            ),
            None,
        )
        if refused is not None:
            pair.explained.append(("(request)", f"no answer from Kafka: {refused}"))
            continue
        if status == "NONE" or ours is None:  # no answer: the broker closes the connection
            if status == "NONE" and ours is None:
                pair.identical = True
            else:
                pair.different.append(f"kafkawire answers {ours!r}, Kafka {'none' if status == 'NONE' else rest}")
            continue
        if status != "OK":
            pair.different.append(f"Kafka's getErrorResponse fails: {rest}")
            continue
        theirs_bytes = bytes.fromhex(rest)
        if theirs_bytes == ours_bytes:
            pair.identical = True
            continue
        theirs_tree = resp_cls.decode(theirs_bytes, version).to_dict()
        if info.name in UNORDERED and ours_tree != theirs_tree and canonical(ours_tree) == canonical(theirs_tree):
            pair.explained.append(("(order)", "entries in the order of Kafka's HashMap; clients match them by key"))
            continue
        for path, a, b in sorted(diff(ours_tree, theirs_tree)):
            reason = explanation(info.name, version, path)
            if reason is not None:
                pair.explained.append((path, reason))
            else:
                pair.different.append(f"{path}: kafkawire {a!r}, Kafka {b!r}")
        if not pair.explained and not pair.different:
            pair.different.append("same fields, different bytes")
    return pairs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", help="comma-separated API names (default: every API the broker handles)")
    args = ap.parse_args(argv)
    pairs = compare(set(args.api.split(",")) if args.api else None)
    rows: dict[str, list[Pair]] = {}
    for p in pairs:
        rows.setdefault(p.api, []).append(p)
    print(f"{'API':34} {'versions':>8} {'pairs':>5} {'identical':>9} {'explained':>9} {'different':>9}")
    for name, ps in rows.items():
        vs = sorted({p.version for p in ps})
        print(
            f"{name:34} {f'{vs[0]}-{vs[-1]}':>8} {len(ps):>5} {sum(p.identical for p in ps):>9} "
            f"{sum(bool(p.explained) and not p.different for p in ps):>9} {sum(bool(p.different) for p in ps):>9}"
        )
    total = len(pairs)
    identical = sum(p.identical for p in pairs)
    explained = sum(bool(p.explained) and not p.different for p in pairs)
    different = [p for p in pairs if p.different]
    print(
        f"\n{total} pairs over {len(rows)} APIs: {identical} identical, {explained} explained, "
        f"{len(different)} different"
    )
    reasons: dict[str, int] = {}
    for p in pairs:
        if p.explained and not p.different:
            for reason in dict.fromkeys(r for _, r in p.explained):
                key = f"{p.api}: {reason}"
                reasons[key] = reasons.get(key, 0) + 1
    for reason, count in sorted(reasons.items()):
        print(f"  explained {count:4}  {reason}")
    for p in different:
        for line in p.different:
            print(f"{p.api} v{p.version} ({p.request}): {line}")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
