"""lz4 decompression reuses one decompression context per thread (codecs._lz4_decompress): a frame that fails
or stops part-way must leave nothing behind for the next frame, and threads must not share one."""

from __future__ import annotations

import threading

import lz4.frame
import pytest

from kafkawire.protocol.records import codecs
from kafkawire.protocol.records.errors import CorruptRecordError, DecompressionLimitError


def _frame(data: bytes) -> bytes:
    return codecs.compress(3, data)


def _content(seed: int, size: int) -> bytes:
    # incompressible enough to take several 64 KiB blocks, distinct per seed
    return b"".join((seed * 7919 + i).to_bytes(8, "little") for i in range(size // 8))


GOOD = _content(1, 300_000)
GOOD_FRAME = _frame(GOOD)


def _broken_frames() -> dict[str, tuple[bytes, type]]:
    whole = GOOD_FRAME
    block_2 = 7 + 4 + int.from_bytes(whole[7:11], "little") & 0x7FFFFFFF  # the second block's size field
    corrupt = bytearray(whole)
    corrupt[block_2 + 4 : block_2 + 40] = bytes(36)  # a match at offset 0 in the second block: fails mid-frame
    return {
        "truncated after the first block": (whole[:block_2], CorruptRecordError),
        "truncated in the second block": (whole[: block_2 + 1000], CorruptRecordError),
        "corrupt second block": (bytes(corrupt), CorruptRecordError),
    }


@pytest.mark.parametrize("name", list(_broken_frames()))
def test_a_frame_failing_part_way_leaves_the_next_frame_whole(name):
    data, error = _broken_frames()[name]
    with pytest.raises(error):
        codecs.decompress(3, data)
    assert codecs.decompress(3, GOOD_FRAME) == GOOD
    assert codecs.decompress(3, memoryview(b"xx" + GOOD_FRAME)[2:]) == GOOD


def test_a_frame_stopped_at_the_limit_leaves_the_next_frame_whole():
    with pytest.raises(DecompressionLimitError):
        codecs.decompress(3, GOOD_FRAME, limit=100_000)
    assert codecs.decompress(3, GOOD_FRAME) == GOOD
    # and a small frame after it: read from its own header, not as the big one's remaining blocks
    assert codecs.decompress(3, _frame(b"small")) == b"small"


def test_frames_are_read_as_lz4_reads_them_one_after_another():
    contents = [_content(s, n) for s, n in ((2, 10), (3, 70_000), (4, 200_000), (5, 1))]
    for data in contents + contents[::-1]:
        assert codecs.decompress(3, _frame(data)) == data == lz4.frame.decompress(_frame(data))


def test_threads_decompressing_at_once_each_get_their_own_frames():
    frames = {seed: (_content(seed, 400_000), None) for seed in range(10, 14)}
    frames = {seed: (data, _frame(data)) for seed, (data, _) in frames.items()}
    failures: list = []
    start = threading.Barrier(len(frames))

    def work(seed: int) -> None:
        data, frame = frames[seed]
        start.wait()
        for _ in range(40):  # bounded: 40 frames of 400 KB each per thread
            try:
                if codecs.decompress(3, frame) != data:
                    failures.append((seed, "other bytes"))
                    return
            except Exception as exc:  # another thread's frame read into this one's: not lz4 any more
                failures.append((seed, repr(exc)))
                return

    threads = [threading.Thread(target=work, args=(seed,)) for seed in frames]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert failures == []


def test_a_frame_larger_than_the_first_window_decodes_whole_and_the_limit_still_holds():
    # 20 MB of a short pattern: about 80 KB compressed, more than the first window (8 MiB) holds
    data = b"kafkawire" * (20_000_000 // 9)
    frame = _frame(data)
    assert len(frame) << 8 > codecs._LZ4_WINDOW_MAX
    assert codecs.decompress(3, frame) == data
    with pytest.raises(DecompressionLimitError):
        codecs.decompress(3, frame, limit=len(data) - 1)
    assert codecs.decompress(3, frame, limit=len(data)) == data
    assert codecs.decompress(3, GOOD_FRAME) == GOOD
