"""Placement of bucket copies alone: distinct servers per bucket, leaders spread evenly, a factor
the live servers cannot hold refused by name."""

from __future__ import annotations

from collections import Counter

import pytest

from lakelog.errors import InvalidReplicationFactorError, NoTabletServerError
from lakelog.server.coordinator.replica_placement import place_buckets


def test_each_bucket_has_its_copies_on_distinct_servers_and_leaders_are_spread_evenly() -> None:
    placement = place_buckets("table shop.orders", 6, 0, [1, 2, 3], [1, 2, 3], 3)
    assert all(len(set(r.replicas)) == 3 for r in placement.replicas.values())
    assert Counter(placement.leaders.values()) == {1: 2, 2: 2, 3: 2}
    assert all(placement.leaders[b] == r.replicas[0] == r.isr[0] for b, r in placement.replicas.items())
    assert Counter(s for r in placement.replicas.values() for s in r.replicas[1:]) == {1: 4, 2: 4, 3: 4}


def test_copies_go_to_live_servers_only() -> None:
    placement = place_buckets("table shop.orders", 4, 1, [1, 2, 3, 4], [1, 3, 4], 2)
    assert {s for r in placement.replicas.values() for s in r.replicas} == {1, 3, 4}


def test_a_factor_above_the_live_servers_is_refused_naming_them() -> None:
    with pytest.raises(InvalidReplicationFactorError, match=r"table shop.orders: replication factor 3 needs 3 live tablet servers, 2 are live \(1, 3\)"):
        place_buckets("table shop.orders", 1, 0, [1, 2, 3], [1, 3], 3)


def test_one_copy_is_placed_round_robin_over_every_registered_server_as_it_always_was() -> None:
    placement = place_buckets("table shop.orders", 4, 1, [3, 1, 2], [1], 1)
    assert placement.leaders == {0: 2, 1: 3, 2: 1, 3: 2}
    assert placement.replicas == {}


def test_no_server_registered_is_its_own_error() -> None:
    with pytest.raises(NoTabletServerError):
        place_buckets("table shop.orders", 1, 0, [], [], 1)
