"""``kafkawire.log.scrub.bytes.per.sec``: off by default, validated, and `serve` starts the scrubber with it."""

from __future__ import annotations

import pytest

from kafkawire.broker.config import BrokerConfig, ConfigError


def test_scrubbing_is_off_by_default_and_takes_a_rate():
    assert BrokerConfig.from_properties({}).scrub_bytes_per_sec == 0
    cfg = BrokerConfig.from_properties({"kafkawire.log.scrub.bytes.per.sec": "1048576"})
    assert cfg.scrub_bytes_per_sec == 1048576 and cfg.unknown_keys == []
    with pytest.raises(ConfigError, match="scrub"):
        BrokerConfig.from_properties({"kafkawire.log.scrub.bytes.per.sec": "-5"})
    with pytest.raises(ConfigError):
        BrokerConfig.from_properties({"kafkawire.log.scrub.bytes.per.sec": "fast"})


def test_serve_scrubs_sealed_segments_in_the_background(tmp_path):
    import time

    from kafkawire.broker.storage.segments import SegmentStorage
    from kafkawire.protocol.records import build_batch, iter_batches

    from .conftest import RawClient
    from .helpers import fetch_request
    from .test_process import free_port, reap, start, stop, wait_listening

    data_dir = tmp_path / "data"
    storage = SegmentStorage(data_dir, {"log.segment.bytes": "600"})
    storage.create_topic("t", 1)
    log = storage.partition("t", 0)
    for i in range(12):
        log.append(build_batch([(None, b"value-%02d-" % i + b"v" * 200)]))
    storage.close()
    sealed = sorted((data_dir / "t-0").glob("*.log"))[1]
    data = sealed.read_bytes()
    with open(sealed, "r+b") as f:  # a payload byte of its first batch; its index stays intact
        f.seek(100)
        f.write(bytes([data[100] ^ 0x20]))
    lost = int(sealed.stem)

    port = free_port()
    proc = start(
        [
            "--listen",
            f"127.0.0.1:{port}",
            "--data-dir",
            str(data_dir),
            "--override",
            "kafkawire.log.scrub.bytes.per.sec=100000000",
        ],
        tmp_path,
    )
    try:
        wait_listening(port, proc, timeout=30)
        deadline = time.monotonic() + 30

        def repaired() -> bool:
            # the quarantine file is written first, then the segment without the damage is swapped in
            return bool(list((data_dir / "t-0").glob("*.quarantine"))) and sealed.stat().st_size < len(data)

        while not repaired() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert repaired(), "the scrubber did not set the damage aside"
        client = RawClient(("127.0.0.1", port))
        offsets = []
        offset = 0
        while offset < 12:
            res = client.call(fetch_request([("t", 0, offset)]), 12)
            batches = list(iter_batches(bytes(res.responses[0].partitions[0].records)))
            for b in batches:
                b.validate_crc()
                offsets.extend(r.offset for r in b.records())
            offset = offsets[-1] + 1
        assert offsets == [o for o in range(12) if o != lost]
        client.close()
        stop(proc)
        assert "scrubber verifies sealed segments" in proc.err_text
        assert "quarantined" in proc.err_text
    finally:
        reap(proc)
