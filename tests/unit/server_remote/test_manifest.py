"""Which remote segments a rebuilt manifest names (``lakelog repair remote``)."""

from __future__ import annotations

from lakelog.fetch_info import RemoteLogSegment
from lakelog.server.remote.manifest import contiguous_run


def segment(segment_id: str, start: int, end: int) -> RemoteLogSegment:
    return RemoteLogSegment(segment_id, start, end, max_timestamp=end, size_in_bytes=end - start)


def test_the_run_follows_a_longer_segment_where_the_shorter_at_its_start_ends_nowhere() -> None:
    """Two leaders rolled at different offsets: the old one's [0, 100), the new one's [0, 50)
    whose successor was never uploaded, then [100, 150). Every offset is there once."""
    old, short, after = segment("a", 0, 100), segment("b", 0, 50), segment("c", 100, 150)
    assert contiguous_run([short, after, old]) == (old, after)


def test_the_run_reaching_furthest_wins_then_the_one_with_more_segments() -> None:
    head, lost_tail = segment("a", 0, 100), segment("b", 200, 300)
    assert contiguous_run([head, lost_tail]) == (lost_tail,), "offsets below a gap cannot be served in order"
    whole, first, second = segment("c", 0, 100), segment("d", 0, 60), segment("e", 60, 100)
    assert contiguous_run([whole, first, second]) == (first, second)


def test_a_retried_upload_of_one_range_is_taken_once_the_lowest_id() -> None:
    retried, original, next_one = segment("b", 0, 100), segment("a", 0, 100), segment("c", 100, 200)
    assert contiguous_run([retried, next_one, original]) == (original, next_one)
    assert contiguous_run([]) == ()
