"""``max-poll-records`` shared by the parts of one poll (buckets, or a partitioned scanner's
partitions) taken in turn: each gets an even share of what is still left, so a part that had
fewer records passes the rest on and none starves. The one rule for every scanner's poll."""

from __future__ import annotations


class RecordQuota:
    def __init__(self, limit: int | None, parts: int) -> None:
        """``limit``: records one poll may return (None or <= 0: no limit), over ``parts`` parts."""
        self._left = limit if limit is not None and limit > 0 else None
        self._parts = max(parts, 1)

    @property
    def exhausted(self) -> bool:
        return self._left == 0

    def share(self) -> int | None:
        """The next part's share (None: no limit); call :meth:`took` after it."""
        if self._left is None:
            return None
        return -(-self._left // self._parts)

    def took(self, records: int) -> None:
        """What the part just given its share returned."""
        self._parts = max(self._parts - 1, 1)
        if self._left is not None:
            self._left = max(self._left - records, 0)
