"""The log's idempotent-writer state: a resend is a duplicate only if it is the same batch, and
writers are forgotten by age, never by a count that other writers can push."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from lakelog.errors import InvalidRequestError, OutOfOrderSequenceError, WriterSequenceConflictError
from lakelog.record.batch import encode_batch, iter_headers, read_header
from lakelog.server.log import log_tablet
from lakelog.server.log.log_tablet import LogConfig, LogTablet
from lakelog.server.log.sequence_waits import SequenceWaits
from lakelog.server.log.writer_state import WriterBatches
from tests.harness.clocks import FakeClock

NAME = "shop.orders bucket 0"
HOUR_MS = 3_600_000


def writer_batch(first: int, rows: int, writer: tuple[int, int, int]) -> bytes:
    return encode_batch(pa.record_batch({"id": pa.array(range(first, first + rows), pa.int64())}), 1, writer=writer)


def test_another_batch_under_an_appended_sequence_is_refused_naming_writer_sequence_and_offsets(tmp_path: Path) -> None:
    log = LogTablet.open(tmp_path, LogConfig(), 0, NAME)
    log.append(writer_batch(0, 3, (7, 0, 0)))
    with pytest.raises(WriterSequenceConflictError, match=r"writer 7 epoch 0 sequence 0 was appended at offsets \[0, 3\)"):
        log.append(writer_batch(100, 3, (7, 0, 0)))
    assert log.append(writer_batch(0, 3, (7, 0, 0))).duplicate
    assert log.log_end_offset == 3
    log.close()
    reopened = LogTablet.open(tmp_path, LogConfig(), 0, NAME)  # the CRCs come back from the headers
    with pytest.raises(WriterSequenceConflictError):
        reopened.append(writer_batch(100, 3, (7, 0, 0)))
    reopened.close()


def test_one_forged_batch_among_resent_ones_refuses_the_whole_request(tmp_path: Path) -> None:
    log = LogTablet.open(tmp_path, LogConfig(), 0, NAME)
    log.append(writer_batch(0, 1, (7, 0, 0)) + writer_batch(1, 1, (7, 0, 1)))
    with pytest.raises(WriterSequenceConflictError, match="sequence 1"):
        log.append(writer_batch(0, 1, (7, 0, 0)) + writer_batch(50, 1, (7, 0, 1)))
    assert log.log_end_offset == 2
    log.close()


def test_ten_thousand_and_one_other_writers_do_not_make_the_bucket_forget_a_writer(tmp_path: Path) -> None:
    log = LogTablet.open(tmp_path, LogConfig(flush_mode="async"), 0, NAME)
    first = log.append(writer_batch(0, 1, (1, 0, 0)))
    for writer_id in range(2, 10_003):
        log.append(writer_batch(writer_id, 1, (writer_id, 0, 0)))
    again = log.append(writer_batch(0, 1, (1, 0, 0)))
    assert again.duplicate and again.base_offset == first.base_offset
    assert log.log_end_offset == 10_002
    log.close()


def test_writers_idle_past_the_expiration_time_are_forgotten_and_the_others_kept(tmp_path: Path) -> None:
    clock = FakeClock()
    config = LogConfig(writer_expiration_ms=HOUR_MS)
    log = LogTablet.open(tmp_path, config, 0, NAME, clock=clock)
    log.append(writer_batch(0, 1, (1, 0, 0)))
    clock.now += HOUR_MS // 2
    log.append(writer_batch(1, 1, (2, 0, 0)))
    clock.now += HOUR_MS // 2
    assert log.expire_writers() == 0  # writer 1 is exactly an hour idle: kept
    clock.now += 1
    assert log.expire_writers() == 1
    assert log.append(writer_batch(1, 1, (2, 0, 0))).duplicate  # writer 2 is remembered
    assert not log.append(writer_batch(0, 1, (1, 0, 0))).duplicate  # writer 1 is new again
    log.close()
    clock.now += 2 * HOUR_MS  # a restart rebuilds the state, ages from the batches' timestamps
    reopened = LogTablet.open(tmp_path, config, 0, NAME, clock=clock)
    assert reopened.expire_writers() == 2
    reopened.close()


@pytest.mark.parametrize(("epoch", "sequence"), [(-1, 0), (0, -3)])
def test_a_negative_epoch_or_sequence_is_refused(epoch: int, sequence: int) -> None:
    header = encode_batch(pa.record_batch({"id": pa.array([1], pa.int64())}), 1, writer=(7, epoch, sequence))
    with pytest.raises(InvalidRequestError, match="negative"):
        WriterBatches.of([read_header(header)], NAME)


def test_a_pipelined_request_that_overtook_an_earlier_one_waits_for_it_and_is_appended_after_it(tmp_path: Path) -> None:
    log = LogTablet.open(tmp_path, LogConfig(), 0, NAME)
    pool = ThreadPoolExecutor(2)
    overtaking = pool.submit(log.append, writer_batch(5, 3, (7, 0, 2)), pipelined=True)
    time.sleep(0.1)
    assert not overtaking.done(), "sequence 2 waits for sequence 0, though the bucket does not know writer 7 yet"
    second = pool.submit(log.append, writer_batch(2, 3, (7, 0, 1)), pipelined=True)
    assert log.append(writer_batch(0, 2, (7, 0, 0))).base_offset == 0
    assert (second.result(timeout=5).base_offset, overtaking.result(timeout=5).base_offset) == (2, 5)
    assert [h.batch_sequence for _, h in iter_headers(log.read(0, 1 << 20).records)] == [0, 1, 2]
    log.close()


def test_a_pipelined_request_ahead_of_a_sequence_that_never_comes_is_refused_once_it_waited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_tablet, "SEQUENCE_WAIT_S", 0.2)
    log = LogTablet.open(tmp_path, LogConfig(), 0, NAME)
    with pytest.raises(OutOfOrderSequenceError, match="behind an earlier request that never arrived"):
        log.append(writer_batch(5, 3, (7, 0, 2)), pipelined=True)
    log.append(writer_batch(0, 2, (7, 0, 0)))
    with pytest.raises(OutOfOrderSequenceError, match="sent sequence 2, expected 1"):
        log.append(writer_batch(5, 3, (7, 0, 2)), pipelined=True)
    with pytest.raises(OutOfOrderSequenceError, match="sent sequence 3, expected 1"):
        log.append(writer_batch(5, 3, (7, 0, 3)))  # not pipelined: a gap, refused at once
    assert log.append(writer_batch(0, 1, (8, 0, 4))).base_offset == 2, "a request alone starts a writer anywhere"
    log.close()


def test_a_request_ahead_is_refused_at_once_when_every_place_to_wait_is_taken(tmp_path: Path) -> None:
    waits = SequenceWaits(limit=1)
    log = LogTablet.open(tmp_path, LogConfig(), 0, NAME, sequence_waits=waits)
    log.append(writer_batch(0, 2, (7, 0, 0)))
    assert waits.enter(), "the one place taken, as by a request of another bucket"
    earlier = threading.Timer(0.3, log.append, (writer_batch(2, 3, (7, 0, 1)),))
    earlier.start()  # what a waiting request would have been appended after
    with pytest.raises(OutOfOrderSequenceError, match="sent sequence 2, expected 1"):
        log.append(writer_batch(5, 3, (7, 0, 2)), pipelined=True)
    earlier.join()
    waits.leave()
    assert log.log_end_offset == 5
    log.close()


def _leaves_the_local_log(log: LogTablet, writer: tuple[int, int, int]) -> int:
    """Append ``writer``'s batch, roll, append another writer's, and delete the first segment by
    retention: the writer's only batch has left the local log. Returns where the batch landed."""
    landed = log.append(writer_batch(0, 3, writer)).base_offset
    log.roll()
    log.append(writer_batch(3, 2, (99, 0, 0)))
    assert log.delete_segments_before(3) == 1
    return landed


def test_a_writer_whose_batches_left_the_local_log_is_still_recognised_after_a_restart(tmp_path: Path) -> None:
    log = LogTablet.open(tmp_path, LogConfig(), 0, NAME)
    landed = _leaves_the_local_log(log, (7, 0, 0))
    assert log.log_start_offset == 3
    resent = log.append(writer_batch(0, 3, (7, 0, 0)))
    assert resent.duplicate and resent.base_offset == landed
    log.close()
    reopened = LogTablet.open(tmp_path, LogConfig(), 0, NAME)  # the headers alone no longer hold writer 7
    resent = reopened.append(writer_batch(0, 3, (7, 0, 0)))
    assert resent.duplicate and resent.base_offset == landed
    with pytest.raises(WriterSequenceConflictError, match=r"writer 7 epoch 0 sequence 0 was appended at offsets \[0, 3\)"):
        reopened.append(writer_batch(100, 3, (7, 0, 0)))
    with pytest.raises(OutOfOrderSequenceError, match="expected 1"):
        reopened.append(writer_batch(5, 1, (7, 0, 2)))
    assert reopened.log_end_offset == 5
    reopened.close()


def test_a_copy_started_over_at_its_leaders_log_start_recognises_the_leaders_writers(tmp_path: Path) -> None:
    leader = LogTablet.open(tmp_path / "leader", LogConfig(), 0, NAME)
    landed = _leaves_the_local_log(leader, (7, 0, 0))
    start, writers = leader.writers_at_log_start()
    copy = LogTablet.open(tmp_path / "copy", LogConfig(), 0, NAME)
    copy.restart_at(start, writers)
    read, epoch = leader.read_for_follower(start, 1 << 20)
    copy.append_as_follower(read.records, epoch, read.starts_segment)
    assert (copy.log_start_offset, copy.log_end_offset) == (3, 5)
    resent = copy.append(writer_batch(0, 3, (7, 0, 0)))  # the copy leads now; the writer retries
    assert resent.duplicate and resent.base_offset == landed
    copy.close()
    reopened = LogTablet.open(tmp_path / "copy", LogConfig(), 0, NAME)
    assert reopened.append(writer_batch(0, 3, (7, 0, 0))).duplicate
    reopened.close()
    leader.close()


def test_a_damaged_writer_snapshot_is_set_aside_and_the_log_opens_with_what_its_segments_hold(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = LogTablet.open(tmp_path, LogConfig(), 0, NAME)
    _leaves_the_local_log(log, (7, 0, 0))
    log.close()
    (snapshot,) = tmp_path.glob("*.writers")
    data = bytearray(snapshot.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    reopened = LogTablet.open(tmp_path, LogConfig(), 0, NAME)
    assert f"{NAME} ({snapshot}): the writer state snapshot" in caplog.text and "fails its CRC" in caplog.text
    assert reopened.append(writer_batch(3, 2, (99, 0, 0))).duplicate  # the segments' writers are known
    assert not reopened.append(writer_batch(0, 3, (7, 0, 0))).duplicate  # writer 7 is new again
    reopened.close()


def test_a_writer_snapshot_of_segments_that_are_gone_or_never_went_is_removed(tmp_path: Path) -> None:
    log = LogTablet.open(tmp_path, LogConfig(), 0, NAME)
    _leaves_the_local_log(log, (7, 0, 0))
    log.close()
    (kept,) = tmp_path.glob("*.writers")
    stale = tmp_path / f"{1:020d}.writers"  # as left by a crash before retention moved the log start
    stale.write_bytes(kept.read_bytes())
    reopened = LogTablet.open(tmp_path, LogConfig(), 0, NAME)
    assert sorted(tmp_path.glob("*.writers")) == [kept]
    assert reopened.append(writer_batch(0, 3, (7, 0, 0))).duplicate
    reopened.close()


def test_a_damaged_writer_snapshot_from_the_leader_is_not_kept(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    leader = LogTablet.open(tmp_path / "leader", LogConfig(), 0, NAME)
    _leaves_the_local_log(leader, (7, 0, 0))
    start, writers = leader.writers_at_log_start()
    copy = LogTablet.open(tmp_path / "copy", LogConfig(), 0, NAME)
    copy.restart_at(start, writers[:-1] + bytes([writers[-1] ^ 0xFF]))
    assert f"{NAME}: the leader's writers: the writer state snapshot" in caplog.text
    assert (copy.log_start_offset, list((tmp_path / "copy").glob("*.writers"))) == (3, [])
    copy.close()
    leader.close()
