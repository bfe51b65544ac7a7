"""Run the corpus on both brokers, compare, tabulate."""

from __future__ import annotations

import concurrent.futures
import contextlib
import fnmatch
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from kafkawire.protocol import api, errors, message_class

from . import explain
from .compare import differences
from .corpus import CASES, Case
from .session import Broker, Session
from .transport import Connection

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Unexplained:
    api: str
    version: int
    case: str
    path: str
    kafkawire: object
    kafka: object

    def line(self) -> str:
        return (
            f"{self.api} v{self.version} {self.case} {self.path} "
            f"kafkawire={_show(self.path, self.kafkawire)} kafka={_show(self.path, self.kafka)}"
        )


@dataclass
class Row:
    pairs: int = 0
    identical: int = 0
    explained: int = 0
    different: int = 0


@dataclass
class Report:
    rows: dict[tuple[str, int], Row] = field(default_factory=dict)
    unexplained: list[Unexplained] = field(default_factory=list)
    one_sided: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # API -> broker -> versions
    common: dict[str, tuple[int, int]] = field(default_factory=dict)
    explanations_used: int = 0
    seconds: float = 0.0

    @property
    def pairs(self) -> int:
        return sum(r.pairs for r in self.rows.values())

    def uncovered(self) -> list[tuple[str, int]]:
        """Versions both brokers serve without a compared pair."""
        return [
            (name, v)
            for name, (lo, hi) in sorted(self.common.items())
            for v in range(lo, hi + 1)
            if not self.rows.get((name, v), Row()).pairs
        ]

    def to_json(self) -> dict:
        return {
            "pairs": self.pairs,
            "seconds": round(self.seconds, 1),
            "table": [{"api": a, "version": v, **r.__dict__} for (a, v), r in sorted(self.rows.items(), key=_order)],
            "unexplained": [
                u.__dict__ | {"kafkawire": repr(u.kafkawire), "kafka": repr(u.kafka)} for u in self.unexplained
            ],
            "one_sided": self.one_sided,
            "uncovered": [{"api": a, "version": v} for a, v in self.uncovered()],
        }

    def table(self) -> str:
        lines = [f"{'API':<28} {'ver':>3} {'pairs':>6} {'ident':>6} {'expl':>5} {'diff':>5}"]
        totals = Row()
        for (name, v), r in sorted(self.rows.items(), key=_order):
            lines.append(f"{name:<28} {v:>3} {r.pairs:>6} {r.identical:>6} {r.explained:>5} {r.different:>5}")
            for k in totals.__dict__:
                setattr(totals, k, getattr(totals, k) + getattr(r, k))
        lines.append(
            f"{'total':<28} {'':>3} {totals.pairs:>6} {totals.identical:>6} {totals.explained:>5} {totals.different:>5}"
        )
        return "\n".join(lines)

    def api_table(self) -> str:
        """One line per API (versions summed)."""
        per: dict[str, Row] = {}
        versions: dict[str, list[int]] = {}
        for (name, v), r in self.rows.items():
            t = per.setdefault(name, Row())
            lo, hi = self.common.get(name, (v, v))
            if lo <= v <= hi:  # not the deliberately unsupported versions some cases send
                versions.setdefault(name, []).append(v)
            for k in t.__dict__:
                setattr(t, k, getattr(t, k) + getattr(r, k))
        lines = ["| API | versions | pairs | identical | explained | different |", "|---|---|---|---|---|---|"]
        for name in sorted(per, key=lambda n: _key_of(n)):
            r, vs = per[name], versions.get(name, [-1])
            lines.append(
                f"| {name} | {min(vs)}-{max(vs)} | {r.pairs} | {r.identical} | {r.explained} | {r.different} |"
            )
        return "\n".join(lines)


def _key_of(name: str) -> int:
    from kafkawire.protocol import api_by_name

    return api_by_name(name).key


def _order(item):
    (name, v), _ = item
    return (_key_of(name), v)


def _show(path: str, value) -> str:
    if path.endswith("error_code") and isinstance(value, int):
        with contextlib.suppress(Exception):
            return f"{value}({errors.error_for(value).name})"
    text = repr(value)
    return text if len(text) <= 160 else text[:150] + f"...({len(text)} chars)"


# -- brokers ------------------------------------------------------------------


def api_versions(host: str, port: int) -> tuple[dict[int, tuple[int, int]], int | None]:
    """The API ranges a broker advertises, and its node id (from Metadata)."""
    with Connection(host, port) as c:
        av = c.request(
            message_class("ApiVersionsRequest")(
                client_software_name="kafkawire-conformance", client_software_version="1"
            ),
            3,
        )
        ranges = {k.api_key: (k.min_version, k.max_version) for k in av.api_keys}
        md = c.request(message_class("MetadataRequest")(topics=[]), 1)
        node = md.controller_id if md.controller_id >= 0 else (md.brokers[0].node_id if md.brokers else None)
    return ranges, node


def common_ranges(a: dict[int, tuple[int, int]], b: dict[int, tuple[int, int]]):
    """API name -> (lo, hi) both serve (and kafkawire's codec has); API -> broker -> one-sided versions."""
    common, one_sided = {}, {}
    for key in sorted(set(a) | set(b)):
        try:
            info = api(key)
        except KeyError:
            name, codec = f"key{key}", (0, -1)
        else:
            name, codec = info.name, (info.min_version, info.max_version)
        va = set(range(a[key][0], a[key][1] + 1)) if key in a else set()
        vb = set(range(b[key][0], b[key][1] + 1)) if key in b else set()
        both = sorted(v for v in va & vb if codec[0] <= v <= codec[1])
        if both:
            common[name] = (both[0], both[-1])
        only = {"kafkawire": sorted(va - vb), "kafka": sorted(vb - va)}
        beyond = sorted(v for v in va & vb if not codec[0] <= v <= codec[1])
        if beyond:
            only["both, beyond kafkawire's codec"] = beyond
        if any(only.values()):
            one_sided[name] = {k: v for k, v in only.items() if v}
    return common, one_sided


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Both brokers run with the same settings where they have a say in the answers; the reference's
# are in tools/kafka_reference.py (ReferenceKafka.properties).
KAFKAWIRE_OVERRIDES = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 50, "num.partitions": 1}


@contextlib.contextmanager
def kafkawire_broker(node_id: int = 1):
    """``python -m kafkawire serve`` on a free loopback port with a fresh data directory."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="conformance-kafkawire-") as data:
        log = open(Path(data) / "serve.log", "wb")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kafkawire",
                "serve",
                "--listen",
                f"127.0.0.1:{port}",
                "--data-dir",
                str(Path(data) / "data"),
                "--node-id",
                str(node_id),
                # the reference runs its loggers at INFO (tools/kafka_reference.py), and
                # DescribeConfigs of broker loggers reports the level in effect
                "--log-level",
                "INFO",
                *(f"--override={k}={v}" for k, v in KAFKAWIRE_OVERRIDES.items()),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=data,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    api_versions("127.0.0.1", port)
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(
                            f"kafkawire did not start: {(Path(data) / 'serve.log').read_text()[-2000:]}"
                        ) from None
                    time.sleep(0.1)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


@contextlib.contextmanager
def reference_broker():
    sys.path.insert(0, str(ROOT / "tools"))
    from kafka_reference import ReferenceKafka

    kafka = ReferenceKafka()
    try:
        kafka.start()
        yield kafka.bootstrap
    finally:
        kafka.close()


def _java_hash(text: str) -> int:
    h = 0
    for ch in text.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def group_names_covering(partitions: int = 50, prefix: str = "conformance-warm-up-") -> list[str]:
    """Group ids that the Java hash puts on every partition of the offsets topic."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < partitions:
        name = f"{prefix}{i}"
        h = _java_hash(name)
        found.setdefault((h & 0x7FFFFFFF) % partitions if h != -(1 << 31) else 0, name)
        i += 1
    return [found[p] for p in range(partitions)]


def warm_up(b: Broker, timeout: float = 60.0) -> None:
    """Until the group coordinator answers for every offsets partition.

    Kafka creates ``__consumer_offsets`` on the first FindCoordinator and loads its partitions
    after; until then it answers COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or
    NOT_COORDINATOR. The corpus compares a running coordinator, so the runner waits for one.

    Then until the transaction coordinator answers: Kafka creates ``__transaction_state`` at the first
    FindCoordinator for a transactional id. Creating it here, before any case, gives both brokers the
    same internal topics for the cases that list a whole broker (ListConfigResources of every type);
    left to the transactional cases, whether it exists at such a listing depended on how the two jobs
    interleaved the cases on each broker."""
    deadline = time.monotonic() + timeout
    pending = group_names_covering()
    with Connection(b.host, b.port) as c:
        _transaction_coordinator_ready(c, b.label, deadline)
        while pending:
            name = pending[0]
            fc = c.request(message_class("FindCoordinatorRequest")(key=name, key_type=0), 3)
            ok = fc.error_code == 0
            if ok:
                of = c.request(message_class("OffsetFetchRequest")(group_id=name, topics=None), 7)
                ok = of.error_code == 0
            if ok:
                pending.pop(0)
            elif time.monotonic() > deadline:
                raise RuntimeError(f"{b.label}: no group coordinator for {name} after {timeout:.0f} s")
            else:
                time.sleep(0.1)


def _transaction_coordinator_ready(c: Connection, label: str, deadline: float) -> None:
    key = "conformance-warm-up-transactional-id"
    while True:
        fc = c.request(message_class("FindCoordinatorRequest")(key=key, key_type=1), 3)
        if fc.error_code == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{label}: no transaction coordinator after the warm-up's deadline")
        time.sleep(0.1)


def broker(label: str, address: str) -> Broker:
    host, port = address.rsplit(":", 1)
    ranges, node = api_versions(host, int(port))
    return Broker(label, host, int(port), node, ranges)


# -- running --------------------------------------------------------------------


def select(cases: list[Case], api_filter: str | None, case_filter: str | None) -> list[Case]:
    out = []
    for c in cases:
        if api_filter and not any(fnmatch.fnmatchcase(c.api.lower(), p.strip().lower()) for p in api_filter.split(",")):
            continue
        if case_filter and not fnmatch.fnmatchcase(c.name, case_filter) and case_filter not in c.name:
            continue
        out.append(c)
    return out


def _run_case(case: Case, b: Broker, common, prefix: str):
    session = Session(b, common, prefix)
    error = None
    try:
        versions = case.versions_for(common)
        if versions:
            if case.setup is not None:
                case.setup(session)
            for v in versions:
                case.fn(session, v)
    except Exception:  # noqa: BLE001 - a failing case is reported, the run goes on
        error = traceback.format_exc(limit=4).strip().splitlines()[-1]
    finally:
        session.close()
    return session.outcomes, error


def run(
    kw: Broker, ka: Broker, *, api_filter=None, case_filter=None, jobs: int = 2, explanations=None, progress=None
) -> Report:
    started = time.monotonic()
    explanations = explain.load() if explanations is None else explanations
    common, one_sided = common_ranges(kw.ranges, ka.ranges)
    report = Report(common=common, one_sided=one_sided)
    token = secrets.token_hex(3)
    cases = select(CASES, api_filter, case_filter)
    for b in (kw, ka):
        warm_up(b)

    # A lane's cases run one at a time (the jobs still overlap them with cases of other lanes or none).
    lanes = {c.lane: threading.Lock() for c in cases if c.lane is not None}

    def both(case: Case):
        prefix = f"cf{token}-{case.slug}"
        with (
            lanes[case.lane] if case.lane is not None else contextlib.nullcontext(),
            concurrent.futures.ThreadPoolExecutor(2) as pool,
        ):
            t0 = time.monotonic()
            fa = pool.submit(_run_case, case, kw, common, prefix)
            fb = pool.submit(_run_case, case, ka, common, prefix)
            result = case, fa.result(), fb.result()
        if progress:
            progress(case, time.monotonic() - t0)
        return result

    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
        for case, (out_a, err_a), (out_b, err_b) in pool.map(both, cases):
            _tally(report, case, out_a, out_b, err_a, err_b, explanations, token)
    report.explanations_used = sum(1 for e in explanations if e.used)
    report.unexplained.sort(key=lambda u: (_key_of(u.api) if not u.api.startswith("<") else -1, u.version, u.case))
    report.seconds = time.monotonic() - started
    return report


def _tally(report: Report, case: Case, out_a, out_b, err_a, err_b, explanations, token: str) -> None:
    if err_a or err_b:
        report.unexplained.append(Unexplained(case.api, -1, case.name, "<case error>", err_a, err_b))
    for i in range(max(len(out_a), len(out_b))):
        a = out_a[i] if i < len(out_a) else None
        b = out_b[i] if i < len(out_b) else None
        ref = a or b
        name = case.name + (f"/{ref.label}" if ref.label else "")
        if a is None or b is None or (a.api, a.version) != (b.api, b.version):
            report.unexplained.append(
                Unexplained(
                    ref.api,
                    ref.version,
                    name,
                    "<steps>",
                    None if a is None else f"{a.api} v{a.version}",
                    None if b is None else f"{b.api} v{b.version}",
                )
            )
            continue
        row = report.rows.setdefault((a.api, a.version), Row())
        row.pairs += 1
        diffs = differences(a.tree, b.tree)
        if not diffs:
            row.identical += 1
            continue
        unexplained = []
        for d in diffs:
            path = d.path.replace(f"cf{token}", "cf<run>")
            if explain.find(explanations, a.api, a.version, name, path, d.kafkawire, d.kafka) is None:
                unexplained.append(Unexplained(a.api, a.version, name, path, d.kafkawire, d.kafka))
        if unexplained:
            row.different += 1
            report.unexplained.extend(unexplained)
        else:
            row.explained += 1
