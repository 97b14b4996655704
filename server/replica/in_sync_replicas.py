"""A leader's view of one replicated bucket's followers: how far each has copied the log, when
each last caught up, and from that which followers belong in the in-sync set (ISR) and how far the
high watermark may go.

Kafka's rules (its ``Partition``): a follower's log end is the offset it fetches from; it is caught
up at a fetch that reaches the leader's log end, or that reaches where the leader's log ended at its
previous fetch (it keeps pace with a leader that keeps appending); a follower of the ISR that has
not caught up for ``max_lag_ms`` leaves it; one outside rejoins once it holds the high watermark and
everything this leader appended in its own epoch starts after, as its fetches since it left show. The high watermark is the smallest
log end of the ISR. Plain Python: the clock is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.cluster_state import BucketReplicas

UNKNOWN = -1  # a follower's log end before its first fetch to this leader


@dataclass
class _Follower:
    log_end: int = UNKNOWN
    caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    leader_end_at_last_fetch: int = 0


class InSyncReplicas:
    def __init__(self, leader: int, copies: BucketReplicas, epoch_start_offset: int, now_ms: float) -> None:
        """``epoch_start_offset``: this leader's log end when it took the bucket over."""
        self.leader = leader
        self.copies = copies
        self.epoch_start_offset = epoch_start_offset
        # Every follower gets a full lag time from the moment this server leads.
        self._followers = {r: _Follower(caught_up_ms=now_ms) for r in copies.replicas if r != leader}

    @property
    def isr(self) -> tuple[int, ...]:
        return self.copies.isr

    def update(self, copies: BucketReplicas) -> None:
        """The bucket as the coordinator keeps it now (an ISR change it accepted, or one it made:
        a follower lost or restarted). What a follower outside the ISR fetched before is forgotten:
        it may have restarted with less (an empty disk), so it proves its log end by fetching again
        before it can rejoin."""
        self.copies = copies
        for replica in copies.replicas:
            if replica != self.leader:
                state = self._followers.setdefault(replica, _Follower())
                if replica not in copies.isr:
                    state.log_end = UNKNOWN

    def fetched(self, follower: int, fetch_offset: int, leader_end: int, now_ms: float) -> None:
        """``follower`` fetches from ``fetch_offset`` while this log ends at ``leader_end``."""
        state = self._followers.get(follower)
        if state is None:
            return
        state.log_end = fetch_offset
        if fetch_offset >= leader_end:
            state.caught_up_ms = now_ms
        elif fetch_offset >= state.leader_end_at_last_fetch:
            state.caught_up_ms = max(state.caught_up_ms, state.last_fetch_ms)
        state.leader_end_at_last_fetch = leader_end
        state.last_fetch_ms = now_ms

    def follower_log_end(self, follower: int) -> int:
        state = self._followers.get(follower)
        return UNKNOWN if state is None else state.log_end

    def high_watermark_limit(self) -> int | None:
        """The smallest log end among the ISR's followers; None when the leader is the ISR alone."""
        ends = [self.follower_log_end(r) for r in self.copies.isr if r != self.leader]
        return min(ends) if ends else None

    def lagging(self, now_ms: float, max_lag_ms: int) -> tuple[int, ...]:
        """Followers of the ISR that have not caught up for longer than ``max_lag_ms``."""
        return tuple(
            r for r in self.copies.isr if r != self.leader and now_ms - self._followers[r].caught_up_ms > max_lag_ms
        )

    def caught_up(self, high_watermark: int) -> tuple[int, ...]:
        """Followers outside the ISR that may join it: they hold the high watermark and all of this
        leader's epoch so far starts at or before their log end."""
        needed = max(high_watermark, self.epoch_start_offset)
        return tuple(
            r for r in self.copies.replicas if r != self.leader and r not in self.copies.isr and self.follower_log_end(r) >= needed
        )

    def wanted_isr(self, now_ms: float, max_lag_ms: int, high_watermark: int) -> tuple[int, ...] | None:
        """The ISR this leader should ask for now, or None when the current one stands. Lagging
        followers leave, caught-up ones join (in replica order)."""
        leaving = set(self.lagging(now_ms, max_lag_ms))
        joining = set(self.caught_up(high_watermark))
        if not leaving and not joining:
            return None
        members = (set(self.copies.isr) - leaving) | joining
        return tuple(r for r in self.copies.replicas if r in members)
