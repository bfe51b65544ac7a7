"""LeaderEpochs.append's settled case: an append whose epoch history already names the current epoch and is
on disk neither assigns nor writes the checkpoint; any other (a new epoch, a history not loaded for this log,
an unsaved one) assigns the epoch at the log end and writes the checkpoint first, as every append did before
the settled case was taken apart. Produce passes the epoch it looked up once per partition (``epoch``)."""

from __future__ import annotations

from types import SimpleNamespace

from kafkawire.broker.storage.kraft.leader_epochs import CHECKPOINT, LeaderEpochs


class _Log:
    """What LeaderEpochs uses of a partition log: its offsets and ``append``."""

    started_unclean = False
    log_start_offset = 0

    def __init__(self):
        self.log_end_offset = 0
        self.appended: list[bytes] = []

    def append(self, batch: bytes, **options):
        self.appended.append(batch)
        self.log_end_offset += 1
        return self.log_end_offset - 1


class _Image:
    def __init__(self):
        self.epoch = 0

    def partition(self, topic, partition):
        return SimpleNamespace(leader_epoch=self.epoch)


def _checkpoint(tmp_path) -> list[str]:
    return (tmp_path / CHECKPOINT).read_text().split()


def test_settled_appends_skip_the_checkpoint_and_new_epochs_do_not(tmp_path):
    image = _Image()
    epochs = LeaderEpochs(SimpleNamespace(image=image), lambda topic, partition: str(tmp_path))
    plog = _Log()
    stamped = []

    def batch(epoch):
        stamped.append(epoch)
        return b"x"

    assert not epochs.settled("t", 0, plog)
    epochs.append("t", 0, plog, batch)
    assert _checkpoint(tmp_path) == ["0", "1", "0", "0"]
    assert epochs.settled("t", 0, plog) and epochs.settled("t", 0, plog, 0)

    # settled: appended without touching the file (made unreadable to show it is not rewritten)
    (tmp_path / CHECKPOINT).write_text("left alone\n")
    epochs.append("t", 0, plog, batch, 0)
    assert (tmp_path / CHECKPOINT).read_text() == "left alone\n"

    # the leader epoch moved on: no longer settled, whether looked up here or passed in, and the next append
    # assigns it at the log end and writes the checkpoint before answering
    image.epoch = 3
    assert not epochs.settled("t", 0, plog)
    assert not epochs.settled("t", 0, plog, 3)
    epochs.append("t", 0, plog, batch, 3)
    assert _checkpoint(tmp_path) == ["0", "2", "0", "0", "3", "2"]
    epochs.append("t", 0, plog, batch)  # looked up: 3, settled again
    assert stamped == [0, 0, 3, 3]
    assert _checkpoint(tmp_path) == ["0", "2", "0", "0", "3", "2"]

    # a log made anew under the same name (a topic deleted and created again) is not settled until its history
    # is loaded for it (here from the same file: the real one starts in a new directory)
    other = _Log()
    assert not epochs.settled("t", 0, other, 3)
    epochs.append("t", 0, other, batch, 3)
    assert epochs.settled("t", 0, other, 3) and not epochs.settled("t", 0, plog, 3)
    assert len(plog.appended) == 4 and len(other.appended) == 1
