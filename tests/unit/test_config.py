"""One way to configure: a YAML file, then --set, then flags; unknown keys and bad values refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakelog.config import Configuration, parse_duration_ms, parse_size
from lakelog.errors import InvalidConfigError


def test_flag_beats_set_beats_file(tmp_path: Path) -> None:
    file = tmp_path / "lakelog.yaml"
    file.write_text("server:\n  port: 1111\nlog.flush.mode: async\nlog:\n  segment:\n    max-bytes: 8mb\n")
    conf = Configuration.load(file, ["server.port=2222", "log.segment.max-bytes=16mb"], {"server.port": 3333})
    assert conf.get("server.port") == 3333
    assert conf.get("log.segment.max-bytes") == 16 << 20
    assert conf.get("log.flush.mode") == "async"
    assert conf.get("log.flush.interval") == 1000, "unset keys keep their documented default"


@pytest.mark.parametrize(
    ("text", "ms"), [("100ms", 100), ("5s", 5000), ("2min", 120_000), ("1h", 3_600_000), ("7d", 604_800_000), ("250", 250)]
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


def test_sizes() -> None:
    assert [parse_size(t) for t in ("512", "4kb", "64mb", "1gb")] == [512, 4096, 64 << 20, 1 << 30]


def test_unknown_key_and_bad_values_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="unknown configuration key 'log.flush.mod'"):
        Configuration({"log.flush.mod": "sync"})
    with pytest.raises(InvalidConfigError, match="'log.flush.mode': 'fast' is not one of sync, async"):
        Configuration({"log.flush.mode": "fast"})
    with pytest.raises(InvalidConfigError, match="not a duration"):
        Configuration({"remote.log.task-interval": "soon"})
    with pytest.raises(InvalidConfigError, match=r"'server.port': 70000 is out of its range, 0 to 65535"):
        Configuration({"server.port": 70000})
    with pytest.raises(InvalidConfigError, match=r"'client.request-timeout': '99999999999999999999' is out of its range, 1ms to 36500d"):
        Configuration({"client.request-timeout": "99999999999999999999"})
    with pytest.raises(InvalidConfigError, match=r"'rpc.max-message-size': '4gb' is out of its range, 1kb to 2147483647b"):
        Configuration({"rpc.max-message-size": "4gb"})
    with pytest.raises(InvalidConfigError, match=r"'server.rpc.threads': 0 is out of its range, 1 to 2147483647"):
        Configuration({"server.rpc.threads": 0})
    with pytest.raises(InvalidConfigError, match="--set takes KEY=VALUE"):
        Configuration.load(None, ["server.port"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(InvalidConfigError, match="must hold a mapping"):
        Configuration.load(bad)


def test_pass_through_prefixes() -> None:
    conf = Configuration({"datalake.iceberg.type": "sql", "datalake.iceberg.uri": "sqlite:///x.db", "remote.fs.s3.endpoint": "http://h:1"})
    assert conf.with_prefix("datalake.iceberg.") == {"type": "sql", "uri": "sqlite:///x.db"}
    assert conf.with_prefix("remote.fs.") == {"s3.endpoint": "http://h:1"}
