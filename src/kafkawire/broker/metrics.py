"""Broker metrics in Prometheus' text format (``kafkawire serve --metrics HOST:PORT``).

Naming rule: a metric Kafka has is named as the Prometheus JMX exporter's example Kafka configuration renders
Kafka's JMX bean (``kafka.<domain><type=T, name=N, k=v><>Count`` becomes ``kafka_<domain>_<t>_<n>_total{k="v"}``,
``PerSec`` dropped, lower case; a ``Value`` becomes a gauge ``kafka_<domain>_<t>_<n>``), so dashboards made for
Kafka apply. Consumer lag, which Kafka has no broker bean for, is named as kafka-exporter names it
(``kafka_consumergroup_lag``). Kafka's timers (``TotalTimeMs``, ``LogFlushRateAndTimeMs``) are histograms
here, in milliseconds as their names say: quantiles come from ``histogram_quantile`` rather than from the
JMX exporter's ``quantile`` label.

Cost: the event loop only adds to plain ints and lists, once per request (never per record); no lock is taken
on it. Everything else happens when Prometheus scrapes, in prometheus-client's HTTP server thread: the
counters are copied, and the per-partition gauges and the group lags are read from storage and from the
group coordinator's offsets (each read a single attribute or a copy the GIL makes atomic), one scrape at a
time, at most ``MAX_PARTITIONS`` partitions. fsync durations come from the storage threads into a
prometheus-client ``Histogram`` (thread safe).
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from bisect import bisect_left

from kafkawire.protocol import ApiKey, api, errors

log = logging.getLogger("kafkawire.metrics")

# request time, milliseconds (Kafka's TotalTimeMs); long polls wait up to fetch.max.wait.ms (500 ms by default)
LATENCY_BUCKETS_MS = (
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1000.0,
    2500.0,
    5000.0,
    10000.0,
    30000.0,
)
FSYNC_BUCKETS_MS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 5000.0)
MAX_PARTITIONS = 100_000  # per scrape; the broker holds at most kafkawire.max.partitions (100,000 by default)
LISTENER = "PLAINTEXT"
_I32 = struct.Struct(">i")


class MetricsUnavailable(RuntimeError):
    """Metrics were asked for but prometheus-client is not installed."""


def require():
    """The ``prometheus_client`` module, or ``MetricsUnavailable`` saying how to install it."""
    try:
        import prometheus_client
    except ImportError:
        raise MetricsUnavailable(
            "metrics need the prometheus-client package: pip install 'kafkawire[metrics]' (or prometheus-client)"
        ) from None
    return prometheus_client


def record_counts(records) -> int:
    """Records in a produce request's ``records`` field, from the batch headers (one step per batch).

    A v2 batch carries its record count; a legacy (magic 0/1) entry counts as one message."""
    if not records:
        return 0
    view = records if isinstance(records, (bytes, bytearray)) else memoryview(records).cast("B")
    n, pos, end = 0, 0, len(view)
    unpack = _I32.unpack_from
    while pos + 17 <= end:
        (length,) = unpack(view, pos + 8)
        if length < 0:
            break
        if view[pos + 16] >= 2 and pos + 61 <= end:
            n += unpack(view, pos + 57)[0]
        else:
            n += 1
        pos += 12 + length
    return n


class BrokerMetrics:
    """What the broker counts, and the Prometheus endpoint that shows it.

    ``request_done`` is called on the event loop; ``collect`` runs in the HTTP server thread."""

    def __init__(self, broker):
        pc = require()
        self.broker = broker
        self.requests: dict[tuple[int, int], int] = {}  # (api key, version) -> requests answered
        self.errors: dict[tuple[int, int], int] = {}  # (api key, error code) -> errors answered
        self.latency: dict[int, list] = {}  # api key -> [count per bucket ..., count above, sum ms]
        self.traffic = [0, 0, 0]  # produced bytes in, produced records in, fetch response bytes out
        self._bounds = LATENCY_BUCKETS_MS
        self._scrape_lock = threading.Lock()
        self._truncated_logged = False
        self.registry = pc.CollectorRegistry(auto_describe=False)
        self.fsync = pc.Histogram(
            "kafka_log_logflushstats_logflushrateandtimems",
            "Time of each fsync of a log segment, milliseconds (Kafka's LogFlushStats).",
            buckets=FSYNC_BUCKETS_MS,
            registry=self.registry,
        )
        self.registry.register(_Collector(self, pc))
        self._httpd = None
        self._thread = None
        self.port: int | None = None

    # -- on the event loop -----------------------------------------------------------------------------
    def request_done(self, key: int, version: int, started: float, request, response, answer) -> None:
        """Count one answered request: ``response`` is the handler's body (or None), ``answer`` what goes out."""
        ms = (time.perf_counter() - started) * 1000.0
        rk = (key, version)
        requests = self.requests
        requests[rk] = requests.get(rk, 0) + 1
        hist = self.latency.get(key)
        if hist is None:
            hist = self.latency[key] = [0] * (len(self._bounds) + 2)
        hist[bisect_left(self._bounds, ms)] += 1
        hist[-1] += ms
        if key == ApiKey.PRODUCE:
            self._produced(request, response, answer)
        elif key == ApiKey.FETCH and isinstance(response, list):  # the fetch handler's own zero-copy encoding
            self.traffic[2] += sum(len(b) for b in response)
        elif response is not None and not isinstance(response, list):
            code = getattr(response, "error_code", 0)
            if code:
                self.error(key, code)

    def error(self, key: int, code: int) -> None:
        ek = (key, code)
        self.errors[ek] = self.errors.get(ek, 0) + 1

    def _produced(self, request, response, answer) -> None:
        """Bytes and records of the partitions a Produce appended (all of them for acks=0, which has no
        answer unless it failed), and the error of each partition that was refused."""
        if response is None:
            if answer is not None:  # the handler failed: UNKNOWN_SERVER_ERROR, counted by the broker
                return
            answers = None
        elif isinstance(response, list):  # encoded by the handler: nothing to read
            return
        else:
            answers = getattr(response, "responses", None)
            if answers is None:
                return
        nbytes = nrecords = 0
        for i, t in enumerate(request.topic_data):
            parts = answers[i].partition_responses if answers is not None and i < len(answers) else None
            for j, p in enumerate(t.partition_data):
                if parts is not None and j < len(parts):
                    code = parts[j].error_code
                    if code:
                        self.error(ApiKey.PRODUCE, code)
                        continue
                elif answers is not None:
                    continue
                records = p.records
                if records:
                    nbytes += len(records)
                    nrecords += record_counts(records)
        traffic = self.traffic
        traffic[0] += nbytes
        traffic[1] += nrecords

    # -- the endpoint ------------------------------------------------------------------------------------
    def serve(self, host: str, port: int) -> None:
        """Start prometheus-client's HTTP server (its own thread) on ``host:port``; fsyncs are timed from now."""
        from prometheus_client import start_http_server

        self._httpd, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.port = self._httpd.server_port
        observe = getattr(self.broker.storage, "observe_fsyncs", None)
        if observe is not None:
            fsync = self.fsync.observe
            observe(lambda seconds: fsync(seconds * 1000.0))

    def close(self) -> None:
        """Stop the HTTP server (blocks up to its poll interval: call it off the event loop)."""
        observe = getattr(self.broker.storage, "observe_fsyncs", None)
        if observe is not None:
            observe(None)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(5)
            self._httpd = None


class _Collector:
    """Builds the metric families at scrape time, in the HTTP server's thread."""

    def __init__(self, metrics: BrokerMetrics, pc):
        from prometheus_client import core

        self.m = metrics
        self.core = core

    def collect(self):
        if not self.m._scrape_lock.acquire(timeout=30):
            return []
        try:
            return self._collect()
        finally:
            self.m._scrape_lock.release()

    def _collect(self) -> list:
        core, m, broker = self.core, self.m, self.m.broker
        out = []
        requests = core.CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests answered, per API and version (Kafka's RequestsPerSec).",
            labels=["request", "version"],
        )
        for (key, version), n in sorted(dict(m.requests).items()):
            requests.add_metric([_api_name(key), str(version)], n)
        out.append(requests)
        errs = core.CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Error codes answered, per API and error (Kafka's ErrorsPerSec; NONE not counted).",
            labels=["request", "error"],
        )
        for (key, code), n in sorted(dict(m.errors).items()):
            errs.add_metric([_api_name(key), _error_name(code)], n)
        out.append(errs)
        latency = core.HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's arrival to its answer, milliseconds (Kafka's "
            "TotalTimeMs, before the answer is written).",
            labels=["request"],
        )
        for key, hist in sorted(dict(m.latency).items()):
            counts = list(hist)  # one copy: buckets and sum agree
            buckets, running = [], 0
            for bound, c in zip(m._bounds, counts):
                running += c
                buckets.append((_le(bound), running))
            buckets.append(("+Inf", running + counts[len(m._bounds)]))
            latency.add_metric([_api_name(key)], buckets, counts[-1])
        out.append(latency)
        bytes_in, records_in, bytes_out = list(m.traffic)
        for name, doc, value in (
            ("kafka_server_brokertopicmetrics_messagesin", "Records appended by Produce requests.", records_in),
            ("kafka_server_brokertopicmetrics_bytesin", "Record bytes appended by Produce requests.", bytes_in),
            (
                "kafka_server_brokertopicmetrics_bytesout",
                "Bytes of Fetch answers (record batches and their framing).",
                bytes_out,
            ),
        ):
            out.append(core.CounterMetricFamily(name, doc, value=value))
        out.extend(self._connections(core, broker.server))
        out.extend(self._partitions(core, broker))
        return out

    def _connections(self, core, server) -> list:
        if server is None:
            return []
        labels = ["listener", "networkProcessor"]
        at = [LISTENER, "0"]
        prefix = "kafka_server_socket_server_metrics_"
        count = core.GaugeMetricFamily(prefix + "connection_count", "Open connections.", labels=labels)
        count.add_metric(at, len(server._connections))
        created = core.CounterMetricFamily(prefix + "connection_creation", "Connections accepted.", labels=labels)
        created.add_metric(at, server.connections_opened)
        closed = core.CounterMetricFamily(
            prefix + "connection_close",
            "Connections closed, by reason (peer, idle, "
            "request_error, frame_too_large, internal_error, io_error, shutdown, "
            "other).",
            labels=labels + ["reason"],
        )
        for reason, n in sorted(dict(server.connections_closed).items()):
            closed.add_metric(at + [reason], n)
        incoming = core.CounterMetricFamily(prefix + "incoming_byte", "Bytes read from clients.", labels=labels)
        incoming.add_metric(at, server.bytes_received)
        outgoing = core.CounterMetricFamily(prefix + "outgoing_byte", "Bytes written to clients.", labels=labels)
        outgoing.add_metric(at, server.bytes_sent)
        return [count, created, closed, incoming, outgoing]

    def _partitions(self, core, broker) -> list:
        storage = broker.storage
        labels = ["topic", "partition"]
        end = core.GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.", labels=labels)
        start = core.GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset.", labels=labels)
        size = core.GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log.", labels=labels)
        segs = core.GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the partition's log.", labels=labels)
        ends: dict[tuple[str, int], int] = {}
        budget = MAX_PARTITIONS
        try:
            topics = sorted(storage.topics().values(), key=lambda t: t.name)
        except Exception:  # storage closing under the scrape
            topics = []
        for meta in topics:
            for p in range(meta.partitions):
                if budget <= 0:
                    if not self.m._truncated_logged:
                        self.m._truncated_logged = True
                        log.warning("metrics: more than %d partitions; the rest are not reported", MAX_PARTITIONS)
                    break
                budget -= 1
                try:
                    plog = storage.partition(meta.name, p)
                except Exception:  # deleted meanwhile
                    continue
                at = [meta.name, str(p)]
                leo = plog.log_end_offset
                ends[(meta.name, p)] = leo
                end.add_metric(at, leo)
                start.add_metric(at, plog.log_start_offset)
                size.add_metric(at, plog.size_bytes)
                segments = getattr(plog, "segments", None)
                if segments is not None:
                    segs.add_metric(at, len(segments))
        out = [end, start, size, segs]
        out.extend(self._lag(core, broker.group_coordinator, ends))
        return out

    @staticmethod
    def _lag(core, coordinator, ends) -> list:
        labels = ["consumergroup", "topic", "partition"]
        current = core.GaugeMetricFamily(
            "kafka_consumergroup_current_offset", "Committed offset of the group.", labels=labels
        )
        lag = core.GaugeMetricFamily(
            "kafka_consumergroup_lag", "Log end offset minus the group's committed offset.", labels=labels
        )
        lag_sum = core.GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "The group's lag over the topic's partitions.",
            labels=["consumergroup", "topic"],
        )
        store = getattr(coordinator, "offsets", None)
        if store is not None:
            for group in sorted(store.groups()):  # a copy of the names, then a copy of each group's offsets
                sums: dict[str, int] = {}
                for (topic, partition), entry in store.group(group).items():
                    leo = ends.get((topic, partition))
                    if leo is None or entry.offset < 0:
                        continue
                    at = [group, topic, str(partition)]
                    current.add_metric(at, entry.offset)
                    behind = leo - entry.offset
                    lag.add_metric(at, behind)
                    sums[topic] = sums.get(topic, 0) + behind
                for topic, total in sums.items():
                    lag_sum.add_metric([group, topic], total)
        return [current, lag, lag_sum]


_API_NAMES: dict[int, str] = {}


def _api_name(key: int) -> str:
    name = _API_NAMES.get(key)
    if name is None:
        try:
            name = api(key).name
        except KeyError:
            name = str(key)
        _API_NAMES[key] = name
    return name


def _error_name(code: int) -> str:
    try:
        return errors.error_for(code).name
    except Exception:
        return str(code)


def _le(bound: float) -> str:
    return repr(float(bound))
