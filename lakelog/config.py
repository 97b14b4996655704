"""The one way lakelog is configured: a documented set of keys, read from a YAML file, ``--set``
flags and dedicated flags (a flag beats ``--set``, which beats the file).

Every key is declared once below with its type, default and meaning; ``lakelog config`` prints
them. Unknown keys are refused so that a typo never silently does nothing, except under the
prefixes that pass settings through to another library (``datalake.iceberg.``, ``remote.fs.``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import yaml

from lakelog.errors import InvalidConfigError, LakelogError

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|min|m|h|d)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_SIZE = re.compile(r"^\s*(\d+)\s*(b|kb|k|mb|m|gb|g)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {None: 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}


def parse_duration_ms(text: str | int) -> int:
    """``100ms``, ``5s``, ``2min``, ``1h``, ``7d`` or a bare number of milliseconds."""
    if isinstance(text, int):
        return text
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 100ms, 5s, 2min, 1h, 7d)")
    unit = match.group(2).lower() if match.group(2) else None
    return int(match.group(1)) * _DURATION_UNITS[unit]


def parse_size(text: str | int) -> int:
    """``512``, ``4kb``, ``64mb``, ``1gb``."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"not a size: {text!r} (use e.g. 4kb, 64mb, 1gb)")
    unit = match.group(2).lower() if match.group(2) else None
    return int(match.group(1)) * _SIZE_UNITS[unit]


def format_duration_ms(ms: int) -> str:
    """The inverse of :func:`parse_duration_ms`, in the largest unit that keeps it whole: ``7d``, ``250ms``."""
    return _largest_unit(ms, {"d": 86_400_000, "h": 3_600_000, "min": 60_000, "s": 1000, "ms": 1})


def format_size(size: int) -> str:
    """The inverse of :func:`parse_size`: ``256mb``, ``4kb``, ``1000b``."""
    return _largest_unit(size, {"gb": 1 << 30, "mb": 1 << 20, "kb": 1 << 10, "b": 1})


def _largest_unit(value: int, units: dict[str, int]) -> str:
    if value <= 0:
        return str(value)
    unit, factor = next((unit, factor) for unit, factor in units.items() if value % factor == 0)
    return f"{value // factor}{unit}"


def parse_addresses(text: str | Sequence[str]) -> tuple[str, ...]:
    """``HOST:PORT`` addresses, as a list or as one comma-separated string."""
    items = text.split(",") if isinstance(text, str) else list(text)
    addresses = tuple(str(item).strip() for item in items if str(item).strip())
    for address in addresses:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"{address!r} is not HOST:PORT")
    return addresses


def parse_bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


class Secret(str):
    """A configuration value that must never be printed (a bearer token): its repr is masked, so a
    configuration or a settings object that ends up in a log line or a traceback does not leak it."""

    def __repr__(self) -> str:
        return "'<secret>'" if self else "''"


def _choice(*values: str) -> Callable[[Any], str]:
    def parse(text: Any) -> str:
        if str(text) not in values:
            raise ValueError(f"{text!r} is not one of {', '.join(values)}")
        return str(text)

    return parse


INT32_MAX = (1 << 31) - 1
# The widest range of each numeric kind, for keys that set none narrower: what the wire and the
# RPC libraries carry (int32 counts, messages under 2 GiB) and what a timer can wait (a century).
_KIND_RANGES: dict[Callable[[Any], Any], tuple[int, int]] = {
    int: (0, INT32_MAX),
    parse_size: (0, INT32_MAX),
    parse_duration_ms: (0, 100 * 365 * 86_400_000),
}


@dataclass(frozen=True)
class ConfigOption:
    key: str
    parse: Callable[[Any], Any]
    default: Any
    description: str
    low: int | None = None  # None: the least of its kind (_KIND_RANGES)
    high: int | None = None  # None: the most of its kind

    @property
    def bounds(self) -> tuple[int, int] | None:
        """The values a numeric key may take, both ends included; None for other keys."""
        kind = _KIND_RANGES.get(self.parse)
        if kind is None:
            return None
        return (kind[0] if self.low is None else self.low, kind[1] if self.high is None else self.high)

    def text(self, value: int) -> str:
        """A value as a user writes it (``256mb``, ``7d``)."""
        if self.parse is parse_size:
            return format_size(value)
        if self.parse is parse_duration_ms:
            return format_duration_ms(value)
        return str(value)

    @property
    def default_text(self) -> str:
        """The default as a user writes it (``256mb``, ``7d``), not in the bytes or ms it is kept in."""
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if isinstance(self.default, tuple):  # addresses: as a comma-separated string, empty when there are none
            return ",".join(self.default)
        return self.text(self.default)


def _options(*options: ConfigOption) -> dict[str, ConfigOption]:
    return {option.key: option for option in options}


OPTIONS: dict[str, ConfigOption] = _options(
    # servers
    ConfigOption("data.dir", str, "./data", "Directory for the coordinator store and local log segments."),
    ConfigOption("server.host", str, "127.0.0.1", "Address the gRPC server binds to."),
    ConfigOption("server.port", int, 9123, "Port of the gRPC server (0 picks a free one).", high=65535),
    ConfigOption("server.advertised-host", str, "", "Host clients use to reach this server (default: server.host)."),
    ConfigOption("server.advertised-port", int, 0, "Port clients use to reach a tablet server, e.g. behind a proxy (0: the port it listens on).", high=65535),
    ConfigOption(
        "server.replica-stream.port", int, 0,
        "Port of the replica stream, which followers fetch a tablet server's buckets over (0 picks a free one; -1: followers "
        "fetch over gRPC). Off under security.tls.enabled and without a cluster secret.", low=-1, high=65535,
    ),
    ConfigOption("server.rpc.threads", int, 64, "Worker threads of a gRPC server (long polls and fetches waiting for budget hold none).", low=1),
    ConfigOption("rpc.max-message-size", parse_size, 128 << 20, "Largest gRPC message, both directions.", low=1 << 10),
    ConfigOption("coordinator.address", str, "", "HOST:PORT of the coordinator a tablet server registers with."),
    ConfigOption("tablet-server.id", int, -1, "Id of a tablet server (default: kept in the data dir, else 0).", low=-1),
    ConfigOption("tablet-server.heartbeat.interval", parse_duration_ms, 1000, "How often a tablet server tells the coordinator it is alive.", low=1),
    ConfigOption("coordinator.tablet-server.heartbeat-timeout", parse_duration_ms, 6000, "A tablet server silent this long is down (metric, WARNING, unavailable buckets).", low=1),
    ConfigOption("log.segment.max-bytes", parse_size, 256 << 20, "A segment rolls once it would grow past this.", low=1 << 10),
    ConfigOption("log.segment.max-age", parse_duration_ms, 7 * 86_400_000, "A segment rolls once its first batch is this old.", low=1),
    ConfigOption("log.index.interval-bytes", parse_size, 4096, "Bytes of batches between two offset/time index entries."),
    ConfigOption("log.flush.mode", _choice("sync", "async"), "sync", "sync: fsync (group commit) before a produce is acknowledged."),
    ConfigOption("log.flush.interval", parse_duration_ms, 1000, "How often async mode fsyncs.", low=1),
    ConfigOption(
        "server.writer-id.expiration-time", parse_duration_ms, 7 * 86_400_000,
        "A bucket forgets an idempotent writer that appended nothing for this long; a batch it resends later is appended again.",
        low=1,
    ),
    ConfigOption("log.replica.max-append-bytes", parse_size, 64 << 20, "Largest produce request a tablet server accepts.", low=1 << 10),
    ConfigOption("log.replica.max-lag-time", parse_duration_ms, 30_000, "A follower that has not caught up with its leader for this long leaves the bucket's ISR.", low=1),
    ConfigOption("log.replica.min-in-sync-replicas", int, 1, "Fewest in-sync replicas an acks=all produce needs (NotEnoughReplicasError below it); table.log.replica.min-in-sync-replicas overrides it.", low=1),
    ConfigOption("log.replica.fetch-wait", parse_duration_ms, 200, "How long a leader holds a follower's fetch that has nothing new.", low=1),
    ConfigOption("default.replication.factor", int, 1, "Copies of each bucket of a table that sets no table.replication.factor (coordinator).", low=1),
    ConfigOption("remote.data.dir", str, "", "Remote log storage, file://... or s3://... (default <data-dir>/remote)."),
    ConfigOption("remote.fs.s3.endpoint", str, "", "S3 endpoint override (moto, MinIO)."),
    ConfigOption("remote.fs.s3.region", str, "us-east-1", "S3 region."),
    ConfigOption("remote.log.task-interval", parse_duration_ms, 5000, "How often uploads, local cleanup and remote expiry run.", low=1),
    ConfigOption("remote.log.orphan-grace", parse_duration_ms, 3_600_000, "Remote files no manifest names are deleted once this old; each bucket looks for them after a start or a failed pass and every max(this, remote.log.manifest-check-interval)."),
    ConfigOption("remote.log.stall-warning", parse_duration_ms, 30_000, "A remote log task pass stuck on one bucket this long is logged once at WARNING, with the upload backlog.", low=1),
    ConfigOption("remote.log.manifest-check-interval", parse_duration_ms, 60_000, "How often each bucket's remote objects are listed against its manifest, to find a remote tier whose objects vanished.", low=1),
    ConfigOption("datalake.format", _choice("iceberg"), "iceberg", "Lake format of lake-enabled tables."),
    # Server memory stays bounded whatever the clients do: streams, answer bytes and parked polls are capped.
    ConfigOption("server.rpc.max-concurrent-streams", int, 100, "Calls one client connection may have open at once (HTTP/2 streams); more wait in the client.", low=1),
    ConfigOption("server.fetch.max-inflight-bytes", parse_size, 256 << 20, "FetchLog answer bytes a tablet server holds at once, until each call ends, a client connection an eighth of them at most; a fetch waits for room.", low=1 << 10),
    ConfigOption("server.fetch.max-parked-polls", int, 1000, "Long polls (FetchLog waiting for data) parked at once; one more is answered at once with what there is."),
    ConfigOption(
        "server.malloc.mmap-threshold", parse_size, 32 << 20,
        "Buffers up to this size (a fetch answer) stay on glibc's heap and are reused, with twice it kept free; 0: glibc's defaults. Costs that much resident memory, saves the page faults of every answer.",
        high=1 << 30,
    ),
    ConfigOption(
        "datalake.catalog-name", str, "lakelog",
        "Name the lake's Iceberg catalog is loaded under (a SQL catalog keys its tables by it; PyIceberg's ~/.pyiceberg.yaml and PYICEBERG_CATALOG__<NAME>__* apply to it).",
    ),
    # metrics
    ConfigOption("metrics.port", int, -1, "Port of the Prometheus endpoint, http://HOST:PORT/metrics (-1: off, 0 picks a free one).", low=-1, high=65535),
    ConfigOption("metrics.host", str, "127.0.0.1", "Address the Prometheus endpoint binds to (open to anyone who reaches it unless TLS and token authentication are on: loopback unless set)."),
    # security (README "Security"); servers calling each other and the tiering job use the client keys too
    ConfigOption("security.tls.enabled", parse_bool, False, "Serve (server) or dial (client) every gRPC call over TLS."),
    ConfigOption("security.tls.cert-file", str, "", "PEM certificate chain a server presents; must name its advertised host."),
    ConfigOption("security.tls.key-file", str, "", "PEM private key of security.tls.cert-file."),
    ConfigOption("security.tls.ca-file", str, "", "PEM CA a client (or a server calling another) verifies servers against (default: system roots)."),
    ConfigOption("security.auth.enabled", parse_bool, False, "Servers refuse calls without a valid bearer token from security.auth.tokens-file."),
    ConfigOption("security.auth.tokens-file", str, "", "YAML/JSON file: token name -> {sha256, actions}; read at start."),
    ConfigOption("security.auth.token", Secret, "", "Bearer token a client, a server calling another or the tiering job sends."),
    ConfigOption("cluster.secret", Secret, "", "Shared by every server of a cluster: internal RPCs need it (embedded `lakelog server`: generated under the data dir)."),
    # client
    ConfigOption("bootstrap.servers", parse_addresses, (), "Coordinator addresses HOST:PORT, comma-separated; any live one bootstraps a client (connect()'s argument wins)."),
    ConfigOption("client.request-timeout", parse_duration_ms, 30_000, "Deadline of one client RPC, and of a lookup with its retries.", low=1),
    ConfigOption("client.retry.backoff", parse_duration_ms, 100, "First wait before a failed request is tried again; doubled each time, jittered."),
    ConfigOption("client.retry.max-backoff", parse_duration_ms, 1000, "Longest wait between two tries of a failed request.", low=1),
    ConfigOption("client.writer.batch-size", parse_size, 1 << 20, "Bytes of rows a writer gathers per bucket before it sends.", low=1),
    ConfigOption("client.writer.linger", parse_duration_ms, 100, "How long a writer waits for a batch to fill."),
    ConfigOption(
        "client.writer.max-inflight-per-bucket", int, 5,
        "Produce requests an idempotent writer has in flight per bucket (as Kafka's max.in.flight.requests.per.connection): the leader appends them in sequence order whatever order they arrive in; 1 sends each bucket's next request only once the last is answered.",
        low=1, high=16,
    ),
    ConfigOption("client.writer.max-inflight", int, 8, "Produce requests in flight per tablet server (a connection's writers share them; each carries many buckets), and batches a writer holds per bucket before append blocks.", low=1),
    ConfigOption("client.writer.acks", _choice("all", "1", "0"), "all", "all: a produce is acknowledged once every in-sync replica has it; 1: once the leader has it; 0: delivered once sent, nothing waited for or resent (the writer is not idempotent)."),
    ConfigOption("client.writer.delivery-timeout", parse_duration_ms, 120_000, "How long a writer retries a batch (leader unreachable or moved, timeouts, lost connections) before failing it; safe, as servers drop duplicates.", low=1),
    ConfigOption("client.barrier-hold.timeout", parse_duration_ms, 60_000, "How long a barrier hold may stay open before the servers drop it (at most 15min).", low=1, high=15 * 60_000),
    ConfigOption("client.scanner.fetch.max-bytes", parse_size, 16 << 20, "Bytes one fetch to a tablet server may return, counted after projection; up to two fetches per server are in flight, and for a server's first fetch and while its answers come back large its buckets are split between two of half this each.", low=1),
    ConfigOption("client.scanner.fetch.max-bytes-per-bucket", parse_size, 4 << 20, "Bytes one fetch may return per bucket.", low=1),
    ConfigOption("client.scanner.fetch.max-wait", parse_duration_ms, 500, "How long a server holds a fetch that has no data."),
    ConfigOption("client.scanner.fetch.min-bytes", int, 1, "Bytes a server waits for before it answers a fetch."),
    ConfigOption("client.scanner.remote-log.prefetch-num", int, 4, "Remote segment GETs a scanner runs at once (within its buffered bytes).", low=1),
    ConfigOption(
        "client.scanner.max-poll-records", int, -1,
        "Records one poll returns at most, shared by the buckets (below 1: no limit); the rest stays read ahead for the next poll.", low=-1),
    ConfigOption(
        "client.scanner.max-buffered-bytes", parse_size, 128 << 20,
        "Bytes one scanner reads ahead of its polls, over all its buckets and partitions: fetch answers, remote segment pieces, "
        "lake batches. Remote segments are read in GETs of up to half of it, so two are in flight: 64mb, which read a 64 MB "
        "segment in two GETs one after the other, held the remote read at 0.54-0.59x of its baseline (bench 3a, moto S3).", low=1),
    ConfigOption("client.scanner.offset-reset", _choice("error", "earliest", "latest"), "error", "What a scanner does at an offset no tier can serve."),
    ConfigOption("client.lake.enabled", parse_bool, True, "Read lake tiers through a LogSource plugin."),
    ConfigOption(
        "client.lake.source",
        _choice("auto", "iceberg", "iceberg-arrow"),
        "auto",
        "Which lake LogSource reads Iceberg: iceberg (PySpark), iceberg-arrow (in-process), or auto: iceberg when a Spark endpoint is known (lake.spark.master, own or advertised), else iceberg-arrow.",
    ),
    ConfigOption("client.lake.read-threads", int, 2, "Row groups a lake LogSource decodes at once per bucket (and reads ahead): iceberg-arrow reads and decodes them, iceberg decodes what its Spark tasks fetched; 1: one after the other.", low=1),
    ConfigOption("client.lake.batch-rows", int, 65_536, "Rows per batch a lake LogSource reads; bounds a lake read's memory with the scanner's few batches of read-ahead.", low=1),
    ConfigOption(
        "lake.spark.master",
        str,
        "",
        "Spark of the PySpark lake LogSource and the tiering job (sc://HOST:PORT, spark://..., local[*]); a coordinator advertises its own to clients and jobs that set none. Unset: local[*] when Spark is used.",
    ),
    ConfigOption(
        "coordinator.max-buckets-per-tablet-server", int, 0,
        "Buckets the coordinator places on one tablet server at most; a table or partition that would pass it is refused (TooManyBucketsError). "
        "0: as many as the open-file limit holds (raised to its hard limit at start), 9 files a bucket (3 per local segment) with a quarter kept for connections.",
    ),
    # partitioned tables (docs/contract.md, "Partitioned tables and bucket keys")
    ConfigOption("max.partition.num", int, 1000, "Most partitions the coordinator keeps over all tables; one more is refused (TooManyPartitionsError)."),
    ConfigOption("coordinator.auto-partition.check-interval", parse_duration_ms, 60_000, "How often the coordinator pre-creates and expires partitions of auto-partitioned tables.", low=1),
    ConfigOption("client.writer.dynamic-create-partition.enabled", parse_bool, True, "A write to a missing partition creates it (false: PartitionNotExistError)."),
    ConfigOption(
        "client.scanner.group.session-timeout", parse_duration_ms, 10_000,
        "How long a consumer group member may stay silent before the coordinator gives its buckets to the others; it heartbeats every third of it (at most every 1s).",
        low=100, high=30 * 60_000),
    ConfigOption("client.scanner.group.auto-commit", parse_bool, True, "A group's scanner commits what its polls returned on each poll, on close and before a bucket is taken away."),
    ConfigOption(
        "client.scanner.group.reset", _choice("earliest", "latest", "error"), "earliest",
        "Where a group's scanner starts a bucket with no committed offset, or one no tier holds any more (error: OffsetOutOfRangeError)."),
    ConfigOption("client.scanner.partition-discovery.interval", parse_duration_ms, 10_000, "How often a scanner subscribed to a whole partitioned table looks for new and dropped partitions.", low=1),
)

PASS_THROUGH_PREFIXES = ("datalake.iceberg.", "remote.fs.")


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested YAML maps become dotted keys: ``{log: {flush: {mode: sync}}}`` -> ``log.flush.mode``."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{full}."))
        else:
            flat[full] = value
    return flat


class Configuration:
    """Typed, validated settings; construction fails on the first unknown key or bad value."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = {}
        for key, value in flatten(values or {}).items():
            self._values[key] = self._parse(key, value)

    @staticmethod
    def _parse(key: str, value: Any) -> Any:
        option = OPTIONS.get(key)
        if option is None:
            if key.startswith(PASS_THROUGH_PREFIXES):
                return str(value)
            raise InvalidConfigError(f"unknown configuration key {key!r} (see `lakelog config` for the keys)")
        try:
            parsed = option.parse(value)
        except (TypeError, ValueError) as exc:
            raise InvalidConfigError(f"configuration key {key!r}: {exc}") from None
        bounds = option.bounds
        if bounds is not None and not bounds[0] <= parsed <= bounds[1]:
            low, high = (option.text(bound) for bound in bounds)
            raise InvalidConfigError(f"configuration key {key!r}: {value!r} is out of its range, {low} to {high}")
        return parsed

    @classmethod
    def load(
        cls,
        file: str | Path | None = None,
        sets: Iterable[str] = (),
        flags: Mapping[str, Any] | None = None,
    ) -> "Configuration":
        values: dict[str, Any] = {}
        if file:
            try:
                loaded = yaml.safe_load(Path(file).read_text()) or {}
            except (OSError, yaml.YAMLError) as exc:
                raise InvalidConfigError(f"cannot read configuration file {file}: {exc}") from None
            if not isinstance(loaded, Mapping):
                raise InvalidConfigError(f"configuration file {file} must hold a mapping of keys to values")
            values.update(flatten(loaded))
        values.update(key_value_pairs(sets, "--set"))
        values.update({key: value for key, value in (flags or {}).items() if value is not None})
        return cls(values)

    def get(self, key: str) -> Any:
        if key in self._values:
            return self._values[key]
        option = OPTIONS.get(key)
        if option is None:
            raise InvalidConfigError(f"unknown configuration key {key!r}")
        return option.default

    def with_prefix(self, prefix: str) -> dict[str, str]:
        """Pass-through settings under ``prefix``, with the prefix stripped."""
        return {key[len(prefix) :]: value for key, value in self._values.items() if key.startswith(prefix)}

    def items(self) -> dict[str, Any]:
        """Every key set explicitly."""
        return dict(self._values)


def key_value_pairs(items: Iterable[str], flag: str, error: type[LakelogError] = InvalidConfigError) -> dict[str, str]:
    """``KEY=VALUE`` command-line items (``--set``, ``--property``, ``--conf``, ``--spec``) as a
    dict; an item without ``=`` or a key raises ``error`` naming ``flag``."""
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise error(f"{flag} takes KEY=VALUE, got {item!r}")
        pairs[key.strip()] = value.strip()
    return pairs
