"""A client as a hostile or buggy one is: raw ProduceLog requests on a channel of its own, batches
and writer tokens exactly as it chooses to send them."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from lakelog.client.rpc.messages import ProduceBucket, ProduceRequest
from lakelog.client.rpc.tablet_gateway import encode_produce_request
from lakelog.rpc import lakelog_api_pb2 as pb
from lakelog.rpc.lakelog_api_pb2_grpc import CoordinatorServiceStub
from lakelog.security.writer_tokens import WriterIdentity

PRODUCE_LOG = "/lakelog.rpc.TabletService/ProduceLog"
Metadata = tuple[tuple[str, str], ...]


@dataclass
class RawClient:
    """What a hostile client holds: a channel, and the metadata it sends (its token, if any)."""

    address: str
    metadata: Metadata = ()

    def __post_init__(self) -> None:
        self.channel = grpc.insecure_channel(self.address)
        self._produce = self.channel.unary_unary(PRODUCE_LOG, response_deserializer=pb.ProduceLogResponse.FromString)

    def init_writer(self) -> WriterIdentity:
        answer = CoordinatorServiceStub(self.channel).InitWriter(pb.InitWriterRequest(), metadata=self.metadata, timeout=30)
        return WriterIdentity(answer.writer_id, answer.writer_token)

    def produce(self, table_id: int, batches: list[bytes], token: bytes = b"") -> pb.PbProduceLogRespForBucket:
        payload = encode_produce_request(ProduceRequest(table_id, [ProduceBucket(0, batches)], 30_000, writer_token=token))
        return self._produce(payload, metadata=self.metadata, timeout=60).buckets_resp[0]

    def produce_many(self, table_id: int, entries: list[tuple[bytes, bytes]]) -> list[pb.PbProduceLogRespForBucket]:
        """One request of many (batch, token) entries for bucket 0, each appended on its own."""
        request = pb.ProduceLogRequest(
            table_id=table_id,
            timeout_ms=30_000,
            buckets_req=[pb.PbProduceLogReqForBucket(bucket_id=0, records=batch, writer_token=token) for batch, token in entries],
        )
        return list(self._produce(request.SerializeToString(), metadata=self.metadata, timeout=120).buckets_resp)

    def close(self) -> None:
        self.channel.close()
