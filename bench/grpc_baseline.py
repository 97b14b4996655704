"""The ceiling lakelog's local tier and produce path are measured against: a bare grpcio service (run
in a process of its own by bench/server_host.py, as lakelog's server is), bytes in and bytes out through a generic handler (no protobuf, no lakelog code).

Fetch: the server returns pre-captured responses, each the record batches one lakelog FetchLog
would return (the same bytes, cut at the same sizes), and the client decodes every batch's Arrow
IPC, one request in flight while it decodes the previous answer, as lakelog's fetcher does. What
lakelog adds on top (CRC checks, meta columns, its fetch protocol and buffering) is the difference.

Produce: the client encodes Arrow batches of the writer's batch size as IPC and sends them with as
many requests in flight as lakelog's writer; the server acknowledges and keeps nothing, or (given a
file) first appends each request to it, so that the kernel's write into the page cache, which a log
store cannot skip, is in the baseline too.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from concurrent import futures
from pathlib import Path
from typing import Sequence

import grpc
import pyarrow as pa

from lakelog.record import batch as rb

SERVICE = "bench.Baseline"
_INDEX = struct.Struct(">i")
_OPTIONS = [("grpc.max_send_message_length", 256 << 20), ("grpc.max_receive_message_length", 256 << 20)]


class BaselineServer:
    """Serves ``responses`` by index (Fetch) and acknowledges anything (Produce), after appending
    it to ``append_to`` when given."""

    def __init__(self, responses: Sequence[bytes] = (), append_to: Path | None = None) -> None:
        self._responses = list(responses)
        self._log_fd = None if append_to is None else os.open(append_to, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._server = grpc.server(futures.ThreadPoolExecutor(8), options=_OPTIONS)
        handlers = {
            "Fetch": grpc.unary_unary_rpc_method_handler(self._fetch),
            "Produce": grpc.unary_unary_rpc_method_handler(self._produce),
        }
        self._server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
        port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        self.address = f"127.0.0.1:{port}"

    def _fetch(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        return self._responses[_INDEX.unpack(request)[0]]

    def _produce(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        if self._log_fd is not None:
            os.write(self._log_fd, request)
        return _INDEX.pack(len(request))

    def stop(self) -> None:
        self._server.stop(0).wait()
        if self._log_fd is not None:
            os.close(self._log_fd)

    def __enter__(self) -> "BaselineServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def decode(response: bytes) -> list[pa.RecordBatch]:
    """Every batch's Arrow IPC body, as lakelog's client decodes it (without its checks and columns)."""
    view = memoryview(response)
    return [
        pa.ipc.open_stream(rb.body(view, pos, header)).read_next_batch()
        for pos, header in rb.iter_headers(view)
    ]


def fetch_all(address: str, count: int) -> int:
    """Fetch responses ``0 .. count - 1``, the next in flight while one is decoded; records decoded."""
    with grpc.insecure_channel(address, options=_OPTIONS) as channel:
        call = channel.unary_unary(f"/{SERVICE}/Fetch")
        records = 0
        pending = call.future(_INDEX.pack(0)) if count else None
        for index in range(count):
            assert pending is not None
            response = pending.result()
            pending = call.future(_INDEX.pack(index + 1)) if index + 1 < count else None
            records += sum(batch.num_rows for batch in decode(response))
        return records


def encode(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def produce_all(address: str, batches: Sequence[pa.RecordBatch], batch_bytes: int, in_flight: int) -> int:
    """Encode and send ``batches`` re-cut to ``batch_bytes``, at most ``in_flight`` requests at a time."""
    with grpc.insecure_channel(address, options=_OPTIONS) as channel:
        call = channel.unary_unary(f"/{SERVICE}/Produce")
        sent: deque[grpc.Future] = deque()
        records = 0
        table = pa.Table.from_batches(batches)
        rows = max(batch_bytes // max(table.nbytes // max(table.num_rows, 1), 1), 1)
        for batch in table.to_batches(max_chunksize=rows):
            if len(sent) >= in_flight:
                sent.popleft().result()
            sent.append(call.future(encode(batch)))
            records += batch.num_rows
        for future in sent:
            future.result()
        return records
