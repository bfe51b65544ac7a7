"""A compacted partition whose last segment has offset gaps (the cleaner's work, or a directory another broker's
cleaner left with that segment last) is loaded whole: the gaps are the cleaner's, not damage, so nothing is
quarantined and every batch stays readable at its offset, as Kafka loads such a log."""

from __future__ import annotations

import os

from storage_batches import build_batch

from kafkawire.broker.storage.recovery import load_segments, quarantined
from kafkawire.broker.storage.segment import segment_name

# offsets kept by a cleaner: 0-1, then 5-6, then 9 (2-4 and 7-8 removed)
KEPT = [(0, [b"a", b"b"]), (5, [b"c", b"d"]), (9, [b"e"])]


def _partition(tmp_path):
    directory = tmp_path / "t-0"
    directory.mkdir()
    data = b"".join(build_batch(values, base_offset=base) for base, values in KEPT)
    (directory / f"{segment_name(0)}.log").write_bytes(data)
    return str(directory), data


def test_the_last_segment_of_a_compacted_log_keeps_its_gaps(tmp_path):
    directory, data = _partition(tmp_path)
    segments = load_segments(directory, 4096, 0, compacted=True)
    assert [s.base_offset for s in segments] == [0]
    assert quarantined(directory, 0) == []
    assert os.path.getsize(os.path.join(directory, f"{segment_name(0)}.log")) == len(data)
    assert segments[0].next_offset == 10


def test_a_gap_in_the_last_segment_of_a_log_that_is_not_compacted_is_still_damage(tmp_path):
    directory, data = _partition(tmp_path)
    load_segments(directory, 4096, 0, compacted=False)
    assert quarantined(directory, 0) != []  # the jump at offset 5 is not the cleaner's: kept aside, not served
